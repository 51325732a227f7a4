package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

// effortOf is the adaptive thinking effort an Anthropic request carries
// (nil without thinking).
func effortOf(req fakemodel.Request) any { return obj(req.JSON()["output_config"])["effort"] }

func TestTUIAgentAndThink(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	srv := fakemodel.New(t, fakemodel.Reply{Text: "First answer."}, fakemodel.Reply{Text: "Second answer."}, fakemodel.Reply{Text: "Third answer."})
	s := startTUI(t, ws, srv, "--model", "claude-opus-5-5")
	s.waitFor("agent: default  thinking: medium", 5*time.Second)
	s.waitFor("default/medium", 5*time.Second)

	s.keys("one", true)
	s.waitFor("First answer.", 20*time.Second)

	// /think max changes the next request.
	s.keys("/think max", true)
	s.waitFor("thinking: max", 5*time.Second)
	s.waitFor("default/max", 5*time.Second)
	s.keys("two", true)
	s.waitFor("Second answer.", 20*time.Second)

	// /agent deep switches without a picker.
	s.keys("/agent deep", true)
	scr := s.waitFor("agent: deep  thinking: max", 5*time.Second)
	if strings.Contains(scr, "Pick an agent") {
		t.Errorf("/agent deep opened a picker:\n%s", scr)
	}
	s.waitFor("deep/max", 5*time.Second)

	// /agent alone opens a picker of the five; enter on "plan" switches.
	s.keys("/agent", true)
	scr = s.waitFor("Pick an agent", 5*time.Second)
	for _, name := range []string{"default ", "quick ", "deep ", "plan ", "review "} {
		if !strings.Contains(scr, name) {
			t.Errorf("the picker lacks %q:\n%s", name, scr)
		}
	}
	s.waitFor("up/down move | enter choose", 5*time.Second) // the picker takes keys now
	s.press("Down")                                         // deep is current; plan follows it
	s.press("Enter")
	s.waitFor("agent: plan  thinking: high", 5*time.Second)
	s.keys("three", true)
	s.waitFor("Third answer.", 20*time.Second)

	reqs := modelRequests(srv)
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, want := range []string{"medium", "max", "high"} {
		if e := effortOf(reqs[i]); e != want {
			t.Errorf("request %d: effort %v, want %s", i+1, e, want)
		}
	}
	for _, n := range names(reqs[2].JSON()["tools"], "name") {
		if n == "bash" || n == "write_file" || n == "edit_file" {
			t.Errorf("plan offered %s", n)
		}
	}
	s.quit()
}

func TestTUIInitWritesAgentsMDAfterApproval(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	if err := os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module example.com/demo\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	content := "# demo\\n\\nBuild: go build ./...\\nTest: go test ./...\\n"
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "toolu_read", Name: "read_file", Input: `{"path":"go.mod"}`}}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "toolu_write", Name: "write_file", Input: `{"path":"AGENTS.md","content":"` + content + `"}`}}},
		fakemodel.Reply{Text: "Wrote AGENTS.md."},
	)
	s := startTUI(t, ws, srv)
	s.waitFor("no AGENTS.md found - /init writes one", 5*time.Second)
	s.keys("/init", true)
	s.waitFor("y allow once | a always allow write_file | n deny", 20*time.Second)
	if _, err := os.Stat(filepath.Join(ws, "AGENTS.md")); err == nil {
		t.Fatal("AGENTS.md was written before the approval")
	}
	s.keys("y", false)
	s.waitFor("Wrote AGENTS.md.", 20*time.Second)
	got, err := os.ReadFile(filepath.Join(ws, "AGENTS.md"))
	if err != nil || !strings.Contains(string(got), "Test: go test ./...") {
		t.Fatalf("AGENTS.md: %q, %v", got, err)
	}
	reqs := modelRequests(srv)
	if first := lastUserText(reqs[0]); !strings.Contains(first, "AGENTS.md") || !strings.Contains(first, "verified") {
		t.Errorf("/init sent %q", first)
	}
	s.quit()
}
