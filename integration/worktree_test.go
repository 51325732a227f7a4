package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// A headless worktree agent, as a normal user: `-p --worktree a` edits and
// commits in its sandbox, in a worktree outside the checkout; the commit
// lands on shiro/a in the repository; the checkout's HEAD, branch, index
// and files do not change, and the hook the repository planted never runs
// on the host; `-c --worktree a` continues the same session, and a plain
// `-c` in the checkout does not pick it up.
func TestWorktreeAgentCommitsOnItsBranch(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("checkout")
	h.repo(ws)
	hook := filepath.Join(ws, ".git", "hooks", "post-checkout")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n"+h.plant("post-checkout")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(hook, h.uid, h.gid)
	os.WriteFile(filepath.Join(ws, "README"), []byte("the user's own edit\n"), 0o644)
	state := func() string {
		index, _ := os.ReadFile(filepath.Join(ws, ".git", "index"))
		readme, _ := os.ReadFile(filepath.Join(ws, "README"))
		return strings.Join([]string{h.git(ws, "rev-parse", "HEAD"), h.git(ws, "symbolic-ref", "HEAD"),
			h.git(ws, "status", "--porcelain"), string(index), string(readme)}, "\x00")
	}
	before := state()

	home := h.dir("shiro-home", 0o700)
	run := func(replies []fakemodel.Reply, args ...string) (result, []fakemodel.Request) {
		t.Helper()
		srv := fakemodel.New(t, replies...)
		env := append([]string{"SHIRO_HOME=" + home, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "SHIRO_API_KEY=", "SHIRO_MODEL=", "SHIRO_OPENAI_API="}, providers[0].env(srv.URL)...)
		return h.shiro(ws, env, args...), srv.Requests()
	}
	commit := `echo agent >> README && git add README && git -c user.email=agent@sandbox -c user.name=agent commit -q -m "agent's commit" && echo "at $(pwd) on $(git rev-parse --abbrev-ref HEAD)"`
	res, reqs := run([]fakemodel.Reply{
		{ToolCalls: []fakemodel.ToolCall{bashCall("call_commit", commit)}},
		{Text: "committed the-first-turn"},
	}, "-p", "--yolo", "--worktree", "a", "commit a change")
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	var agent struct{ Path, Branch, Checkout string }
	records, _ := filepath.Glob(filepath.Join(home, "agents", "*", "a.json"))
	if len(records) != 1 {
		t.Fatalf("agent records: %v", records)
	}
	b, _ := os.ReadFile(records[0])
	if err := json.Unmarshal(b, &agent); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.RemoveContainers(t, h.api, agent.Path) })
	if agent.Branch != "shiro/a" || agent.Checkout != ws || strings.HasPrefix(agent.Path, ws+"/") {
		t.Errorf("agent record %+v", agent)
	}
	mustContain(t, "the command's result", resultOf(t, reqs, "call_commit"), "at "+agent.Path+" on shiro/a")

	if got := h.git(ws, "log", "--format=%s", "-2", "shiro/a"); got != "agent's commit\nfirst" {
		t.Errorf("shiro/a in the repository:\n%s", got)
	}
	if got := h.git(ws, "show", "shiro/a:README"); got != "hello\nagent" {
		t.Errorf("README on shiro/a: %q", got)
	}
	if after := state(); after != before {
		t.Errorf("the checkout changed:\nbefore %q\nafter  %q", before, after)
	}
	if got := h.git(agent.Path, "status", "--porcelain"); got != "" {
		t.Errorf("the worktree's status on the host:\n%s", got)
	}
	h.noMarker()
	h.git(ws, "fsck", "--strict")

	var sess struct{ ID, Cwd, Worktree, Branch string }
	sessions, _ := filepath.Glob(filepath.Join(home, "sessions", "*.json"))
	if len(sessions) != 1 {
		t.Fatalf("sessions: %v", sessions)
	}
	b, _ = os.ReadFile(sessions[0])
	json.Unmarshal(b, &sess)
	if sess.Cwd != agent.Path || sess.Worktree != "a" || sess.Branch != "shiro/a" {
		t.Errorf("the session record names %q %q %q", sess.Cwd, sess.Worktree, sess.Branch)
	}

	res, _ = run([]fakemodel.Reply{{Text: "hello"}}, "-p", "-c", "bonjour")
	if res.code == 0 || !strings.Contains(res.stderr, "no saved session for this directory") {
		t.Errorf("plain -c in the checkout: exit %d\n%s", res.code, res.stderr)
	}
	res, reqs = run([]fakemodel.Reply{{Text: "continued"}}, "-p", "-c", "--worktree", "a", "and now?")
	if res.code != 0 {
		t.Fatalf("-c --worktree a: exit %d\n%s", res.code, res.stderr)
	}
	body := string(reqs[0].Body)
	for _, want := range []string{"commit a change", "committed the-first-turn", "and now?"} {
		if !strings.Contains(body, want) {
			t.Errorf("the continued session's request lacks %q", want)
		}
	}
	if sessions, _ := filepath.Glob(filepath.Join(home, "sessions", "*.json")); len(sessions) != 1 {
		t.Errorf("-c --worktree made another session: %v", sessions)
	}
	if after := state(); after != before {
		t.Errorf("the checkout changed in the second run")
	}
	h.noMarker()
}
