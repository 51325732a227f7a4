package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
)

// TestHostAskNamesNoAsker: the form for a connection says which commands
// run now, and says any process in the sandbox may be the one asking; it
// never names a command as the asker (the proxy token is not proof).
func TestHostAskNamesNoAsker(t *testing.T) {
	f := newFixture(t, 100)
	running := []sandbox.Caller{
		{ID: "call_ok", Tool: "bash", Summary: "npm test"},
		{ID: "call_2", Tool: "bash", Summary: "make"},
	}
	f.m.Update(hostAskMsg{id: 1, req: egress.Request{Host: "exfil.example", Port: 443, Running: running}, reply: make(chan egress.Answer, 1)})
	v := f.view()
	for _, want := range []string{
		"the sandbox wants to connect to exfil.example:443",
		"running now (any process in the sandbox may be the one asking):",
		"bash: npm test (tool call call_ok)",
		"bash: make (tool call call_2)",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("the form lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "bash wants to connect") {
		t.Errorf("the form names a command as the asker:\n%s", v)
	}

	g := newFixture(t, 100)
	g.m.Update(hostAskMsg{id: 2, req: egress.Request{Host: "exfil.example", Port: 443}, reply: make(chan egress.Answer, 1)})
	if v := g.view(); !strings.Contains(v, "no command is running: a process an earlier command left behind asks") {
		t.Errorf("with nothing running:\n%s", v)
	}
}

// /network reads the session's connections through Session itself.
func TestNetworkCommandListsTheSessionsConnections(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	f.sess.network = []egress.Record{{Host: "example.com", Port: 443, Decision: egress.DecisionDeny, Rule: "no rule"}}
	f.m.runCommand("/network")
	if f.m.info == nil || !strings.Contains(f.m.info.body, "example.com") || !strings.Contains(f.m.info.body, "(no rule)") {
		t.Errorf("/network:\n%+v", f.m.info)
	}
}

// An approval's preview reads the sandbox's copy in copy mode, the
// workspace otherwise, through Session itself.
func TestPreviewReadsTheCopyInCopyMode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	if err := os.WriteFile(filepath.Join(f.ws, "a.txt"), []byte("on the host"), 0o600); err != nil {
		t.Fatal(err)
	}
	if content, exists, _ := f.app.preview("a.txt"); !exists || content != "on the host" {
		t.Errorf("mount mode: %q %v", content, exists)
	}
	f.sess.copyFiles = map[string]string{"a.txt": "in the copy"}
	if content, exists, _ := f.app.preview("a.txt"); !exists || content != "in the copy" {
		t.Errorf("copy mode: %q %v", content, exists)
	}
}
