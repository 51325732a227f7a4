package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

func TestTUIAskIsAnsweredWithTheArrowKeys(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "q1", Name: "ask", Input: `{"question":"Which **database** should I use?","options":[` +
			`{"label":"PostgreSQL","detail":"What the billing service already runs."},` +
			`{"label":"SQLite","detail":"No server: one file next to the binary."},` +
			`{"label":"Keep the JSON files"}]}`}}},
		fakemodel.Reply{Text: "Going with the choice you made."},
	)
	s := startTUI(t, ws, srv)
	s.keys("add storage", true)
	s.waitFor("shiro is asking", 20*time.Second)
	scr := s.waitFor("up/down move | enter choose", 5*time.Second)
	for _, want := range []string{"Which database should I use?", "PostgreSQL", "SQLite", "Keep the JSON files", "type your own answer...", "What the billing service already runs."} {
		if !strings.Contains(scr, want) {
			t.Errorf("the question lacks %q:\n%s", want, scr)
		}
	}
	s.press("Down")
	s.waitFor("No server: one file next to the binary.", 5*time.Second)
	s.press("Down")
	s.waitGone("No server: one file next to the binary.", 5*time.Second)
	s.press("Up")
	s.waitFor("No server: one file next to the binary.", 5*time.Second)
	s.press("Enter")
	s.waitFor("Going with the choice you made.", 10*time.Second)

	reqs := modelRequests(srv)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	p := providers[0]
	if !slices.Contains(p.tools(reqs[0].JSON()), "ask") {
		t.Errorf("the interactive request does not offer ask: %v", p.tools(reqs[0].JSON()))
	}
	if !p.paired(t, reqs[1].JSON(), "q1", "The user answered: SQLite") {
		t.Errorf("the model did not get the answer:\n%s", reqs[1].Body)
	}
	s.quit()
}

func TestTUITaskAndSubagentPanels(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	tuiWriteFile(t, ws, "greet.go", "package main\n\n// hello is the greeting.\nconst hello = \"hi\"\n")
	todos := func(first, second string) string {
		return `{"todos":[{"content":"find the greeting","status":"` + first + `"},{"content":"report it","status":"` + second + `"}]}`
	}
	srv := fakemodel.New(t,
		// The parent keeps a list, then hands the search to a subagent.
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "t1", Name: "todo_write", Input: todos("in_progress", "pending")}}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "s1", Name: "task", Input: `{"description":"locate the greeting","prompt":"Find where the greeting is defined.","kind":"explore"}`}}},
		// The subagent's two steps (slow enough to be seen).
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "g1", Name: "grep", Input: `{"pattern":"hello"}`}}},
		fakemodel.Reply{Delay: 3 * time.Second, Text: "greet.go:3 defines hello."},
		// The parent finishes the list and answers.
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "t2", Name: "todo_write", Input: todos("done", "done")}}},
		fakemodel.Reply{Text: "The greeting is in greet.go."},
	)
	s := startTUI(t, ws, srv)
	s.keys("where is the greeting?", true)

	// The subagent's step shows, and its next answer takes 3 s: the panel
	// is on screen meanwhile.
	scr := s.waitFor("grep(hello)", 20*time.Second)
	for _, want := range []string{"explore locate the greeting  1 step", "tasks ", "0/2", "[~] find the greeting", "[ ] report it"} {
		if !strings.Contains(scr, want) {
			t.Errorf("while the subagent runs, the screen lacks %q:\n%s", want, scr)
		}
	}
	scr = s.waitFor("The greeting is in greet.go.", 20*time.Second)
	scr = s.waitGone("explore locate the greeting", 5*time.Second)
	if !strings.Contains(scr, "2/2") || !strings.Contains(scr, "[x] report it") {
		t.Errorf("the task panel should stay while the list exists:\n%s", scr)
	}
	s.keys("/todos", true)
	s.waitFor("2/2 done", 5*time.Second)
	s.dismiss("2/2 done")
	s.keys("/clear", true)
	s.waitGone("[x] report it", 5*time.Second)
	s.quit()
}

func TestTUIOnboardingPicksAModelTheEndpointLists(t *testing.T) {
	t.Parallel()
	requireTmux(t)
	ws := t.TempDir()
	home := t.TempDir()
	srv := fakemodel.New(t, fakemodel.Reply{Text: "Hello from the small model."})
	env := []string{"SHIRO_HOME=" + home, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "SHIRO_API_KEY=", "SHIRO_MODEL=", "SHIRO_PROVIDER=", "SHIRO_BASE_URL=", "TERM=xterm-256color"}
	s := newTmux(t, ws, tuiWidth, tuiHeight, env, testenv.Binary(t), "--no-sandbox")
	s.run("set-option", "-t", s.name, "remain-on-exit", "on")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen at the end:\n%s", s.screen())
		}
	})
	s.waitFor("Which provider?", 20*time.Second)
	s.waitFor("up/down move | enter choose", 5*time.Second)
	s.press("End") // the last preset: a custom Anthropic-compatible endpoint
	s.waitFor("> Custom Anthropic-compatible endpoint", 5*time.Second)
	s.press("Enter")
	s.waitFor("Endpoint URL", 5*time.Second)
	s.keys(srv.URL+"/v1", true)
	s.waitFor("API key", 5*time.Second)
	s.keys("test-key", true)
	s.waitFor("Which model?", 10*time.Second)
	scr := s.waitFor("up/down move | enter choose", 5*time.Second)
	for _, want := range []string{"fake-large", "fake-small", "type a model id myself..."} {
		if !strings.Contains(scr, want) {
			t.Errorf("the model picker lacks %q:\n%s", want, scr)
		}
	}
	s.press("Down")
	s.press("Enter")
	s.waitFor("model: anthropic/fake-small", 10*time.Second)

	cfg, err := os.ReadFile(filepath.Join(home, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"model": "fake-small"`, `"baseURL": "` + srv.URL + `/v1"`, `"apiKey": "test-key"`} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.json lacks %s:\n%s", want, cfg)
		}
	}
	s.keys("hi", true)
	s.waitFor("Hello from the small model.", 10*time.Second)
	reqs := modelRequests(srv)
	if len(reqs) != 1 || reqs[0].JSON()["model"] != "fake-small" {
		t.Errorf("the prompt did not reach fake-small: %d requests", len(reqs))
	}
	s.quit()
}

func TestTUIContinueShowsTheEarlierConversation(t *testing.T) {
	t.Parallel()
	requireTmux(t)
	ws := t.TempDir()
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "r1", Name: "read_file", Input: `{"path":"missing.txt"}`}}},
		fakemodel.Reply{Text: "There is no **missing.txt** here."},
		fakemodel.Reply{Text: "Still none."},
	)
	env := headlessEnv(t, providers[0], srv.URL)
	if res := shiro(t, ws, env, "-p", "--no-sandbox", "what is in missing.txt?"); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	s := newTmux(t, ws, tuiWidth, tuiHeight, append(env, "TERM=xterm-256color"), testenv.Binary(t), "-c", "--no-sandbox")
	s.run("set-option", "-t", s.name, "remain-on-exit", "on")
	scr := s.waitFor("There is no missing.txt here.", 20*time.Second)
	for _, want := range []string{"> what is in missing.txt?", "x read_file(missing.txt)"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the resumed screen lacks %q:\n%s", want, scr)
		}
	}
	s.keys("and now?", true)
	s.waitFor("Still none.", 10*time.Second)
	if got := len(userTexts(modelRequests(srv)[2])); got != 2 {
		t.Errorf("the continued request carries %d user texts, want 2", got)
	}
	s.quit()
}

func TestTUIMCPToolAsksAndMCPListsTheServer(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	bin := filepath.Join(ws, ".bin", "mcpecho")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, mcpecho(t), bin, 0o755)
	writeJSON(t, filepath.Join(ws, ".shiro", "config.json"), map[string]any{
		"mcpServers": map[string]any{"srv": map[string]any{"command": bin}},
	})
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "m1", Name: "mcp__srv__echo", Input: `{"text":"through the gate"}`}}},
		fakemodel.Reply{Text: "The server answered."},
	)
	s := startTUI(t, ws, srv, "--trust-project") // the project's server, trusted
	s.waitFor("mcp: 10 tools", 30*time.Second)   // the header, once the server is up
	s.keys("/mcp", true)
	scr := s.waitFor("srv  (project config, stdio, sandbox)", 10*time.Second)
	if !strings.Contains(scr, "10 tools: mcp__srv__") || !strings.Contains(scr, "mcp__srv__echo") {
		t.Errorf("/mcp lacks the server's tools:\n%s", scr)
	}
	s.dismiss("srv  (project config, stdio, sandbox)")
	s.keys("echo something", true)
	s.waitFor("mcp__srv__echo wants to run", 20*time.Second)
	scr = s.waitFor("y allow once", 5*time.Second)
	if !strings.Contains(scr, "through the gate") {
		t.Errorf("the approval does not show the call's input:\n%s", scr)
	}
	s.keys("y", false)
	s.waitFor("The server answered.", 20*time.Second)
	if !providers[0].paired(t, modelRequests(srv)[1].JSON(), "m1", "through the gate") {
		t.Errorf("the tool's result did not reach the model: %s", modelRequests(srv)[1].Body)
	}
	s.quit()
}
