package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/orchestrator/store"
)

// startedTurn puts f in a turn of prompt, as Enter would.
func startedTurn(f *fixture, prompt string) {
	f.m.startTurn(prompt)
}

func ev(f *fixture, e agent.Event) eventMsg { return eventMsg{turn: f.m.turnID, ev: e} }

// goldenSizes are the terminals every form and panel is drawn in: the
// common 80×24 and the smallest supported, 60×20.
var goldenSizes = []struct{ w, h int }{{80, 24}, {60, 20}}

// longDiff writes a file and returns an approval of an edit to it whose
// diff is taller than the terminal.
func longDiff(t *testing.T, f *fixture) approvalMsg {
	var old strings.Builder
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&old, "line %d\n", i)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "long.txt"), []byte(old.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var edits []string
	for i := 5; i <= 50; i += 3 {
		edits = append(edits, fmt.Sprintf(`{"oldString":"line %d\n","newString":"line %d changed\n"}`, i, i))
	}
	req := agent.ApprovalRequest{ID: "m1", Tool: "multi_edit", Input: []byte(`{"path":"long.txt","edits":[` + strings.Join(edits, ",") + `]}`)}
	return approvalMsg{req: req, detail: buildPreview(hostReader(f.app.root, f.ws), req), reply: make(chan agent.Decision, 1)}
}

func TestViewGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, f *fixture)
	}{
		{"idle", func(t *testing.T, f *fixture) {}},
		{"streaming_reasoning_collapsed", func(t *testing.T, f *fixture) {
			startedTurn(f, "plan the change")
			f.send(
				ev(f, agent.Event{Type: agent.EventReasoning, Text: "The user wants a plan.\nFirst read the code,\nthen decide where the change goes."}),
			)
		}},
		{"streaming_reasoning_expanded", func(t *testing.T, f *fixture) {
			startedTurn(f, "plan the change")
			f.send(
				ev(f, agent.Event{Type: agent.EventReasoning, Text: "The user wants a plan.\nFirst read the code,\nthen decide where the change goes."}),
				key(ctrlR),
			)
		}},
		{"streaming_reply", func(t *testing.T, f *fixture) {
			startedTurn(f, "plan the change")
			f.send(
				ev(f, agent.Event{Type: agent.EventText, Text: "Here is **the plan**:\n\n1. read `main.go`\n2. edit"}),
				flushMsg{turn: f.m.turnID},
			)
		}},
		{"tool_in_flight", func(t *testing.T, f *fixture) {
			startedTurn(f, "run the tests")
			f.send(
				ev(f, agent.Event{Type: agent.EventToolStart, ID: "c1", Name: "bash"}),
				ev(f, agent.Event{Type: agent.EventToolCall, ID: "c1", Name: "bash", Input: []byte(`{"command":"go test ./..."}`)}),
				ev(f, agent.Event{Type: agent.EventToolOutput, ID: "c1", Name: "bash", Chunk: "ok  \tpkg/a\t0.1s\nok  \tpkg/b\t0.2s\n"}),
			)
		}},
		{"tool_binary_output", func(t *testing.T, f *fixture) {
			startedTurn(f, "make noise")
			f.send(
				ev(f, agent.Event{Type: agent.EventToolCall, ID: "c1", Name: "bash", Input: []byte(`{"command":"head -c 300 /dev/urandom"}`)}),
				ev(f, agent.Event{Type: agent.EventToolOutput, ID: "c1", Name: "bash", Chunk: "start\n\x00\x01\x1b[2J\x0e\xff\xfe garbage \x07\x08\nend\n"}),
			)
		}},
		{"approval_bash", func(t *testing.T, f *fixture) {
			startedTurn(f, "test it")
			f.send(approvalMsg{req: agent.ApprovalRequest{ID: "b1", Tool: "bash", Input: []byte(`{"command":"go test ./..."}`)}, detail: preview{command: "go test ./..."}, reply: make(chan agent.Decision, 1)})
		}},
		{"approval_bash_prefix", func(t *testing.T, f *fixture) {
			startedTurn(f, "test it")
			req := agent.ApprovalRequest{ID: "b1", Tool: "bash", Input: []byte(`{"command":"go build ./... && go test ./..."}`), Prefixes: [][]string{{"go", "build"}, {"go", "test"}}}
			f.send(approvalMsg{req: req, detail: preview{command: "go build ./... && go test ./..."}, reply: make(chan agent.Decision, 1)})
		}},
		{"approval_diff", func(t *testing.T, f *fixture) {
			if err := os.WriteFile(filepath.Join(f.ws, "greet.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello world\")\n}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			startedTurn(f, "greet shiro")
			req := agent.ApprovalRequest{ID: "e1", Tool: "edit_file", Input: []byte(`{"path":"greet.go","oldString":"hello world","newString":"hello shiro"}`)}
			f.send(approvalMsg{req: req, detail: buildPreview(hostReader(f.app.root, f.ws), req), reply: make(chan agent.Decision, 1)})
		}},
		{"approval_long_diff", func(t *testing.T, f *fixture) {
			startedTurn(f, "change many lines")
			f.send(longDiff(t, f))
		}},
		{"approval_long_diff_scrolled", func(t *testing.T, f *fixture) {
			startedTurn(f, "change many lines")
			f.send(longDiff(t, f), key(tea.KeyPgDown), key(tea.KeyPgDown))
		}},
		{"approval_while_typing", func(t *testing.T, f *fixture) {
			now := time.Unix(1000, 0)
			f.m.clock = func() time.Time { return now }
			f.m.guardFor = guardInterval
			startedTurn(f, "test it")
			f.typeText("next quest")
			f.send(approvalMsg{req: agent.ApprovalRequest{ID: "b1", Tool: "bash", Input: []byte(`{"command":"go test ./..."}`)}, detail: preview{command: "go test ./..."}, reply: make(chan agent.Decision, 1)})
			f.typeText("ion")
		}},
		{"ask_options", func(t *testing.T, f *fixture) {
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
		{"ask_multiple", func(t *testing.T, f *fixture) {
			startedTurn(f, "pick the checks")
			f.send(askMsg{id: 1, reply: make(chan []string, 1), q: sessiontools.Question{
				Text:     "Which checks should run before a commit?",
				Multiple: true,
				Options:  []sessiontools.AskOption{{Label: "go vet"}, {Label: "gofmt"}, {Label: "the race tests"}},
			}})
			f.send(runes("x"), key(down), key(down), runes("x"))
		}},
		{"ask_many_options", func(t *testing.T, f *fixture) {
			startedTurn(f, "pick one")
			var opts []sessiontools.AskOption
			for i := 1; i <= 20; i++ {
				opts = append(opts, sessiontools.AskOption{Label: fmt.Sprintf("option %d", i)})
			}
			f.send(askMsg{id: 1, reply: make(chan []string, 1), q: sessiontools.Question{Text: "Which one?", Options: opts}})
			for range 10 {
				f.send(key(down))
			}
		}},
		{"ask_text", func(t *testing.T, f *fixture) {
			startedTurn(f, "name it")
			f.send(askMsg{id: 1, reply: make(chan []string, 1), q: sessiontools.Question{Text: "What should the service be called?"}})
		}},
		{"onboarding_provider", func(t *testing.T, f *fixture) {
			f.m.openOnboarding()
		}},
		{"onboarding_key", func(t *testing.T, f *fixture) {
			f.m.askAPIKey(onboarding{preset: config.Presets[0], label: "Anthropic"})
			f.typeText("sk-secret")
		}},
		{"onboarding_listing", func(t *testing.T, f *fixture) {
			f.m.openOnboarding()
			f.m.form = &formModal{title: "Set up Anthropic", note: "key sk-s...cret - listing the models of https://api.anthropic.com/v1...", waiting: true}
		}},
		{"onboarding_model", func(t *testing.T, f *fixture) {
			f.m.form = &formModal{waiting: true}
			f.send(onboardModelsMsg{o: onboarding{label: "Anthropic"}, ids: []string{"claude-haiku-5-5", "claude-opus-5-5", "claude-sonnet-5-5"},
				warning: "https://example.com/v1: 404 Not Found - check the model and the endpoint: /model, /provider"})
		}},
		{"model_picker", func(t *testing.T, f *fixture) {
			var ids []string
			for i := 1; i <= 30; i++ {
				ids = append(ids, fmt.Sprintf("model-%02d", i))
			}
			f.m.openModelPicker(ids, "")
			for range 12 {
				f.send(key(down))
			}
		}},
		{"resume_picker", func(t *testing.T, f *fixture) {
			at := time.Date(2026, 5, 4, 10, 30, 0, 0, time.Local)
			var recs []store.Record
			for i := range 12 {
				recs = append(recs, store.Record{ID: fmt.Sprintf("0192f3a4-%04d-7000-8000-000000000000", i), UpdatedAt: at.Add(-time.Duration(i) * time.Hour), Title: fmt.Sprintf("session number %d about something", i)})
			}
			f.m.openSessionPicker(sessionsMsg{recs: recs, counts: make([]int, 12), pick: true})
		}},
		{"help_panel", func(t *testing.T, f *fixture) {
			f.m.runCommand("/help")
		}},
		{"help_panel_scrolled", func(t *testing.T, f *fixture) {
			f.m.runCommand("/help")
			f.m.View()
			f.send(key(tea.KeyPgDown), key(tea.KeyPgDown), key(tea.KeyPgDown))
		}},
		{"tools_panel", func(t *testing.T, f *fixture) {
			f.m.runCommand("/tools")
		}},
		{"expanded_output", func(t *testing.T, f *fixture) {
			startedTurn(f, "run it")
			var out strings.Builder
			for i := 1; i <= 30; i++ {
				fmt.Fprintf(&out, "output line %d\n", i)
			}
			f.send(
				ev(f, agent.Event{Type: agent.EventToolCall, ID: "c1", Name: "bash", Input: []byte(`{"command":"seq 30"}`)}),
				ev(f, agent.Event{Type: agent.EventToolOutput, ID: "c1", Name: "bash", Chunk: out.String()}),
				ev(f, agent.Event{Type: agent.EventToolResult, ID: "c1", Name: "bash", Output: "exit: 0\n\nstdout:\n" + out.String(), Exit: &agent.Exit{Code: 0}}),
				turnEndMsg{turn: f.m.turnID},
				key(tea.KeyCtrlO),
			)
		}},
		{"command_menu", func(t *testing.T, f *fixture) { f.typeText("/") }},
		{"file_picker", func(t *testing.T, f *fixture) {
			f.send(filesMsg{files: []string{"README.md", "lib/src/other.go", "src/main.go", "src/util/strings.go", "docs/src-notes.md", "go.mod"}})
			f.typeText("look at @src/")
		}},
		{"task_panel", func(t *testing.T, f *fixture) {
			startedTurn(f, "fix the parser")
			f.send(todosMsg{items: []sessiontools.Todo{
				{Content: "read the parser", Status: sessiontools.StatusDone},
				{Content: "fix the off-by-one", Status: sessiontools.StatusInProgress},
				{Content: "run the tests", Status: sessiontools.StatusPending},
				{Content: "update the changelog", Status: sessiontools.StatusBlocked, Note: "no write access"},
			}})
		}},
		{"subagent_panel", func(t *testing.T, f *fixture) {
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
		{"queue_of_five", func(t *testing.T, f *fixture) {
			startedTurn(f, "first")
			f.send(ev(f, agent.Event{Type: agent.EventText, Text: "Working on it"}), flushMsg{turn: f.m.turnID})
			for _, p := range []string{"second prompt", "third prompt, which is rather long and will be cut after seventy characters of text", "fourth", "fifth", "sixth"} {
				f.typeText(p)
				f.send(key(enter))
			}
		}},
		{"multiline_draft", func(t *testing.T, f *fixture) {
			for i := 1; i <= 12; i++ {
				f.typeText(fmt.Sprintf("line %d of a long draft", i))
				f.send(key(tea.KeyCtrlJ))
			}
			f.send(key(up), key(up))
		}},
		{"collapsed_paste", func(t *testing.T, f *fixture) {
			f.typeText("review this: ")
			f.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(strings.Repeat("pasted line\n", 200)), Paste: true})
		}},
	}
	for _, tt := range tests {
		for _, sz := range goldenSizes {
			t.Run(fmt.Sprintf("%s/%dx%d", tt.name, sz.w, sz.h), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, sz.w)
				f.send(tea.WindowSizeMsg{Width: sz.w, Height: sz.h})
				tt.setup(t, f)
				got := f.view()
				checkFits(t, got, sz.w, sz.h)
				golden(t, fmt.Sprintf("%s_%dx%d", tt.name, sz.w, sz.h), got)
			})
		}
	}
}

// checkFits fails when a view would not fit the terminal.
func checkFits(t *testing.T, view string, w, h int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) > h {
		t.Errorf("%d rows, the terminal has %d", len(lines), h)
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			t.Errorf("row %d is %d cells wide, the terminal %d: %q", i, n, w, l)
		}
	}
}
