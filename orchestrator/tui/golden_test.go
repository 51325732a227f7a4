package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
)

// startedTurn puts f in a turn of prompt, as Enter would.
func startedTurn(f *fixture, prompt string) {
	f.m.startTurn(prompt)
}

func ev(f *fixture, e agent.Event) eventMsg { return eventMsg{turn: f.m.turnID, ev: e} }

func TestViewGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(f *fixture)
	}{
		{"idle", func(f *fixture) {}},
		{"streaming_reasoning_collapsed", func(f *fixture) {
			startedTurn(f, "plan the change")
			f.send(
				ev(f, agent.Event{Type: agent.EventReasoning, Text: "The user wants a plan.\nFirst read the code,\nthen decide where the change goes."}),
				ev(f, agent.Event{Type: agent.EventText, Text: "Here is **the plan**:\n\n1. read `main.go`\n2. edit"}),
				flushMsg{turn: f.m.turnID},
			)
		}},
		{"streaming_reasoning_expanded", func(f *fixture) {
			startedTurn(f, "plan the change")
			f.send(
				ev(f, agent.Event{Type: agent.EventReasoning, Text: "The user wants a plan.\nFirst read the code,\nthen decide where the change goes."}),
				ev(f, agent.Event{Type: agent.EventText, Text: "Here is **the plan**:\n\n1. read `main.go`\n2. edit"}),
				flushMsg{turn: f.m.turnID},
				key(ctrlR),
			)
		}},
		{"tool_in_flight", func(f *fixture) {
			startedTurn(f, "run the tests")
			f.send(
				ev(f, agent.Event{Type: agent.EventToolStart, ID: "c1", Name: "bash"}),
				ev(f, agent.Event{Type: agent.EventToolCall, ID: "c1", Name: "bash", Input: []byte(`{"command":"go test ./..."}`)}),
				ev(f, agent.Event{Type: agent.EventToolOutput, ID: "c1", Name: "bash", Chunk: "ok  \tpkg/a\t0.1s\nok  \tpkg/b\t0.2s\n"}),
			)
		}},
		{"approval_diff", func(f *fixture) {
			if err := os.WriteFile(filepath.Join(f.ws, "greet.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello world\")\n}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			startedTurn(f, "greet shiro")
			req := agent.ApprovalRequest{ID: "e1", Tool: "edit_file", Input: []byte(`{"path":"greet.go","oldString":"hello world","newString":"hello shiro"}`)}
			f.send(approvalMsg{req: req, detail: buildPreview(f.app.root, f.ws, req), reply: make(chan agent.Decision, 1)})
		}},
		{"command_menu", func(f *fixture) { f.typeText("/mo") }},
		{"file_picker", func(f *fixture) {
			f.send(filesMsg{files: []string{"README.md", "lib/src/other.go", "src/main.go", "src/util/strings.go", "docs/src-notes.md", "go.mod"}})
			f.typeText("look at @src/")
		}},
		{"task_panel", func(f *fixture) {
			startedTurn(f, "fix the parser")
			f.send(todosMsg{items: []sessiontools.Todo{
				{Content: "read the parser", Status: sessiontools.StatusDone},
				{Content: "fix the off-by-one", Status: sessiontools.StatusInProgress},
				{Content: "run the tests", Status: sessiontools.StatusPending},
				{Content: "update the changelog", Status: sessiontools.StatusBlocked, Note: "no write access"},
			}})
		}},
		{"subagent_panel", func(f *fixture) {
			startedTurn(f, "where is the config read?")
			f.send(
				subagentMsg{ev: sessiontools.SubagentEvent{Type: sessiontools.SubagentStart, ID: "sub1", Kind: "explore", Description: "find config loading"}},
				subagentMsg{ev: sessiontools.SubagentEvent{Type: sessiontools.SubagentStep, ID: "sub1", Tool: "grep", Summary: "LoadConfig"}},
				subagentMsg{ev: sessiontools.SubagentEvent{Type: sessiontools.SubagentStep, ID: "sub1", Tool: "glob", Summary: "**/*.toml"}},
				subagentMsg{ev: sessiontools.SubagentEvent{Type: sessiontools.SubagentStep, ID: "sub1", Tool: "read_file", Summary: "internal/config/load.go"}},
				subagentMsg{ev: sessiontools.SubagentEvent{Type: sessiontools.SubagentStep, ID: "sub1", Tool: "read_file", Summary: "internal/config/defaults.go which is a very long path that will be cut somewhere"}},
				subagentMsg{ev: sessiontools.SubagentEvent{Type: sessiontools.SubagentStart, ID: "sub2", Kind: "review", Description: "review the loader"}},
				subagentMsg{ev: sessiontools.SubagentEvent{Type: sessiontools.SubagentError, ID: "sub2", Error: "overloaded"}},
			)
		}},
		{"ask_options", func(f *fixture) {
			startedTurn(f, "add a database")
			f.send(askMsg{id: 1, reply: make(chan []string, 1), q: sessiontools.Question{
				Text: "Which **database** should the service use?",
				Options: []sessiontools.AskOption{
					{Label: "PostgreSQL", Detail: "Already used by the billing service; needs a container in tests."},
					{Label: "SQLite", Detail: "No server; one file."},
					{Label: "Keep the JSON files"},
				},
			}})
		}},
		{"ask_multiple", func(f *fixture) {
			startedTurn(f, "pick the checks")
			f.send(askMsg{id: 1, reply: make(chan []string, 1), q: sessiontools.Question{
				Text:     "Which checks should run before a commit?",
				Multiple: true,
				Options:  []sessiontools.AskOption{{Label: "go vet"}, {Label: "gofmt"}, {Label: "the race tests"}},
			}})
			f.send(runes("x"), key(down), key(down), runes("x"))
		}},
		{"queue_of_two", func(f *fixture) {
			startedTurn(f, "first")
			f.send(ev(f, agent.Event{Type: agent.EventText, Text: "Working on it"}), flushMsg{turn: f.m.turnID})
			for _, p := range []string{"second prompt", "third prompt, which is rather long and will be cut after seventy characters of text"} {
				f.typeText(p)
				f.send(key(enter))
			}
		}},
	}
	for _, tt := range tests {
		for _, width := range []int{80, 120} {
			t.Run(fmt.Sprintf("%s/%d", tt.name, width), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, width)
				tt.setup(f)
				golden(t, fmt.Sprintf("%s_%d", tt.name, width), f.view())
			})
		}
	}
}
