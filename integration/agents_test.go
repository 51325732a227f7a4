package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// TestAgentsCompareAndMerge is issue 30's first acceptance, as a normal
// user: two headless agents with --worktree edit and commit the same file
// at the same time; the user's checkout does not change; both commits are
// on their branches; `shiro agents` lists both; `merge` of one brings its
// change, the other's merge reports the conflict and leaves the checkout as
// it was; `rm` takes the agent's worktree, container and branch; an agent
// whose session runs is listed as running and is neither merged nor
// removed until it ends; `git fsck` is clean and no hook of the
// repository's ran on the host.
func TestAgentsCompareAndMerge(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("checkout")
	h.repo(ws)
	// A hook the repository plants: no host git of shiro's may run it.
	hook := filepath.Join(ws, ".git", "hooks", "post-merge")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n"+h.plant("post-merge")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(hook, h.uid, h.gid)
	home := h.dir("shiro-home", 0o700)
	env := func(url string) []string {
		return append([]string{"SHIRO_HOME=" + home, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "SHIRO_API_KEY=", "SHIRO_MODEL=", "SHIRO_OPENAI_API="}, providers[0].env(url)...)
	}
	state := func() string {
		return strings.Join([]string{h.git(ws, "rev-parse", "HEAD"), h.git(ws, "symbolic-ref", "HEAD"),
			h.git(ws, "ls-files", "--stage"), h.git(ws, "status", "--porcelain", "--untracked-files=all"), read(t, filepath.Join(ws, "README"))}, "\x00")
	}
	before := state()

	// Both agents at once, each with its own model.
	var wg sync.WaitGroup
	results := map[string]result{}
	var mu sync.Mutex
	for _, name := range []string{"left", "right"} {
		srv := fakemodel.New(t,
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "c1", Name: "bash", Input: bashJSON(fmt.Sprintf(
				`printf 'hello from %s\n' > README && git add README && git -c user.email=agent@sandbox -c user.name=agent commit -q -m "%s's greeting" && echo committed`, name, name), 0)}}},
			fakemodel.Reply{Text: "done"},
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := h.shiro(ws, env(srv.URL), "-p", "--yolo", "--worktree", name, "greet")
			mu.Lock()
			results[name] = res
			mu.Unlock()
		}()
	}
	wg.Wait()
	agentPath := map[string]string{}
	for _, name := range []string{"left", "right"} {
		if res := results[name]; res.code != 0 {
			t.Fatalf("agent %s: exit %d\nstdout: %s\nstderr: %s", name, res.code, res.stdout, res.stderr)
		}
		recs, _ := filepath.Glob(filepath.Join(home, "agents", "*", name+".json"))
		if len(recs) != 1 {
			t.Fatalf("records of %s: %v", name, recs)
		}
		var rec struct{ Path string }
		if err := json.Unmarshal([]byte(read(t, recs[0])), &rec); err != nil {
			t.Fatal(err)
		}
		agentPath[name] = rec.Path
		t.Cleanup(func() { testenv.RemoveContainers(t, h.api, rec.Path) })
		if got := h.git(ws, "log", "-1", "--format=%s", "shiro/"+name); got != name+"'s greeting" {
			t.Errorf("shiro/%s: %q", name, got)
		}
	}
	if after := state(); after != before {
		t.Fatalf("the agents changed the checkout:\nbefore %q\nafter  %q", before, after)
	}

	agents := func(args ...string) result {
		t.Helper()
		return h.shiro(ws, env("http://127.0.0.1:1"), append([]string{"agents"}, args...)...)
	}
	res := agents()
	if res.code != 0 {
		t.Fatalf("shiro agents: exit %d\n%s", res.code, res.stderr)
	}
	mustContain(t, "shiro agents", res.stdout, "NAME", "CONTAINER")
	for _, name := range []string{"left", "right"} {
		if !strings.Contains(res.stdout, name+"  ") || !strings.Contains(res.stdout, "shiro/"+name) {
			t.Errorf("shiro agents does not list %s:\n%s", name, res.stdout)
		}
	}
	res = agents("--json")
	var listed []struct {
		Name, Branch, Path string
		Running            bool
		Commits            int
		Changed            []string
		Sandboxes          []struct{ Container string }
	}
	if err := json.Unmarshal([]byte(res.stdout), &listed); err != nil {
		t.Fatalf("shiro agents --json: %v\n%s", err, res.stdout)
	}
	if len(listed) != 2 {
		t.Fatalf("listed %d agents:\n%s", len(listed), res.stdout)
	}
	for _, a := range listed {
		if a.Running || a.Commits != 1 || strings.Join(a.Changed, ",") != "README" || len(a.Sandboxes) != 1 || a.Path != agentPath[a.Name] {
			t.Errorf("agent %s listed as %+v", a.Name, a)
		}
	}

	res = agents("diff", "left")
	mustContain(t, "shiro agents diff left", res.stdout, "-hello", "+hello from left")

	res = agents("merge", "left")
	if res.code != 0 {
		t.Fatalf("merge left: exit %d\n%s", res.code, res.stderr)
	}
	mustContain(t, "merge left", res.stdout, "Fast-forwarded main to shiro/left")
	if got := read(t, filepath.Join(ws, "README")); got != "hello from left\n" {
		t.Errorf("README after merging left: %q", got)
	}
	if h.git(ws, "rev-parse", "HEAD") != h.git(ws, "rev-parse", "shiro/left") {
		t.Error("main is not at shiro/left")
	}
	merged := state()

	res = agents("merge", "right")
	if res.code != 1 {
		t.Errorf("merge right: exit %d, want 1\n%s", res.code, res.stderr)
	}
	mustContain(t, "merge right", res.stderr, "conflicts in README", "your checkout is as it was")
	if after := state(); after != merged {
		t.Errorf("the conflicting merge changed the checkout:\nbefore %q\nafter  %q", merged, after)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "MERGE_HEAD")); err == nil {
		t.Error("a merge is left in progress")
	}

	res = agents("rm", "--delete-branch", "right")
	if res.code != 0 {
		t.Fatalf("rm right: exit %d\n%s", res.code, res.stderr)
	}
	if _, err := os.Lstat(agentPath["right"]); !os.IsNotExist(err) {
		t.Errorf("rm left the worktree: %v", err)
	}
	if ids := testenv.ContainerIDs(t, h.api, agentPath["right"]); len(ids) != 0 {
		t.Errorf("rm left the container: %v", ids)
	}
	if vols, err := h.api.VolumeList(t.Context(), client.VolumeListOptions{Filters: client.Filters{}.Add("label", "dev.shiro.workspace="+agentPath["right"])}); err != nil {
		t.Error(err)
	} else if len(vols.Items) != 0 {
		t.Errorf("rm left %d volumes of the agent's (HOME among them)", len(vols.Items))
	}
	if vols, _ := h.api.VolumeList(t.Context(), client.VolumeListOptions{Filters: client.Filters{}.Add("label", "dev.shiro.workspace="+agentPath["left"])}); len(vols.Items) == 0 {
		t.Error("the other agent has no volumes to compare with (the check above proves nothing)")
	}
	if out, err := h.command(t.Context(), ws, nil, "git", "rev-parse", "--verify", "-q", "shiro/right").CombinedOutput(); err == nil {
		t.Errorf("rm --delete-branch left the branch: %s", out)
	}
	res = agents()
	if strings.Contains(res.stdout, "right") || !strings.Contains(res.stdout, "left") {
		t.Errorf("shiro agents after rm:\n%s", res.stdout)
	}

	// An agent whose session runs is listed as running, and neither merged
	// nor removed until it ends.
	reached, hold := make(chan struct{}), make(chan struct{})
	srv := fakemodel.New(t, fakemodel.Reply{Text: "thinking", Reached: reached, Hold: hold})
	done := make(chan result, 1)
	go func() { done <- h.shiro(ws, env(srv.URL), "-p", "--yolo", "--worktree", "busy", "think") }()
	select {
	case <-reached:
	case res := <-done:
		t.Fatalf("the busy agent ended early: exit %d\n%s", res.code, res.stderr)
	}
	res = agents()
	if !regexp.MustCompile(`busy\s+shiro/busy\s+running`).MatchString(res.stdout) {
		t.Errorf("the busy agent is not listed as running:\n%s", res.stdout)
	}
	for _, args := range [][]string{{"merge", "busy"}, {"rm", "busy"}} {
		if res := agents(args...); res.code == 0 || !strings.Contains(res.stderr, "is running in another shiro") {
			t.Errorf("%v while the agent runs: exit %d\n%s", args, res.code, res.stderr)
		}
	}
	close(hold)
	if res := <-done; res.code != 0 {
		t.Fatalf("the busy agent: exit %d\n%s", res.code, res.stderr)
	}
	if res = agents(); !regexp.MustCompile(`busy\s+shiro/busy\s+ended`).MatchString(res.stdout) {
		t.Errorf("the busy agent is not listed as ended once it ended:\n%s", res.stdout)
	}
	if res = agents("rm", "busy"); res.code != 0 {
		t.Errorf("rm busy once it ended: exit %d\n%s", res.code, res.stderr)
	}

	h.git(ws, "fsck", "--strict", "--no-progress")
	h.noMarker()
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
