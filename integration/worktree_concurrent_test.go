package integration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/testenv"
)

// Several agents, each in its own linked worktree and sandbox, and one
// session in the user's checkout, all commit, tag, branch and delete at
// once while the user's git packs refs on the host: every import lands in
// the one common git directory, and nothing is lost or broken.
func TestWorktreeAgentsImportConcurrently(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	checkout := h.workspace("repo")
	h.repo(checkout)
	h.git(checkout, "config", "user.name", "agent")
	h.git(checkout, "config", "user.email", "agent@sandbox")

	type agent struct{ name, dir, branch string }
	agents := []agent{{"checkout", checkout, "main"}}
	h.dir("shiro/worktrees/repo", 0o755)
	for i := range 3 {
		name := fmt.Sprintf("a%d", i+1)
		dir := filepath.Join(h.base, "shiro", "worktrees", "repo", name)
		h.git(checkout, "worktree", "add", "-q", dir, "-b", "shiro/"+name)
		t.Cleanup(func() { testenv.RemoveContainers(t, h.api, dir) })
		agents = append(agents, agent{name, dir, "shiro/" + name})
	}

	const rounds, commits = 4, 10
	script := func(a agent, round int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "set -e\nfor i in $(seq 1 %d); do echo \"$i\" >> %s.txt; git add %[2]s.txt; git commit -qm \"%[2]s r%[3]d c$i\"; done\n", commits, a.name, round)
		fmt.Fprintf(&b, "git tag t-%s-%d\ngit branch side-%[1]s-%[2]d\n", a.name, round)
		if round > 1 {
			fmt.Fprintf(&b, "git tag -d t-%s-%d >/dev/null\ngit branch -qD side-%[1]s-%[2]d\n", a.name, round-1)
		}
		if a.name == "checkout" {
			b.WriteString("git pack-refs --all\ngit gc -q\n")
		}
		b.WriteString("echo round-done\n")
		return b.String()
	}

	// The user's git on the host meanwhile: an editor's pack-refs in the
	// checkout, a prompt's status in every worktree.
	ctx, stopHost := context.WithCancel(t.Context())
	var hostWG sync.WaitGroup
	hostWG.Add(1)
	go func() {
		defer hostWG.Done()
		for ctx.Err() == nil {
			_ = h.command(ctx, checkout, nil, "git", "pack-refs", "--all").Run()
			for _, a := range agents {
				_ = h.command(ctx, a.dir, nil, "git", "status", "--porcelain").Run()
			}
			select {
			case <-ctx.Done():
			case <-time.After(150 * time.Millisecond):
			}
		}
	}()

	outputs := make([][]string, len(agents))
	failures := make([]string, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 1; r <= rounds; r++ {
				runCtx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
				var out, errb bytes.Buffer
				cmd := h.command(runCtx, a.dir, nil, h.bin, "tool", "bash", bashJSON(script(a, r), 120000))
				cmd.Stdout, cmd.Stderr = &out, &errb
				err := cmd.Run()
				cancel()
				outputs[i] = append(outputs[i], out.String())
				if err != nil || !strings.Contains(out.String(), "round-done") {
					failures[i] = fmt.Sprintf("%s round %d: %v\n%s\n%s", a.name, r, err, out.String(), errb.String())
					return
				}
			}
		}()
	}
	wg.Wait()
	stopHost()
	hostWG.Wait()
	for _, f := range failures {
		if f != "" {
			t.Fatal(f)
		}
	}
	// No change refused or put off (git gc's info/refs stays in the
	// sandbox, as all it writes there but refs and objects).
	for i, outs := range outputs {
		for r, out := range outs {
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, ".git/info/") {
					continue
				}
				for _, bad := range []string{"stays in the sandbox", "not in your repository yet", "not copied", "not imported"} {
					if strings.Contains(line, bad) {
						t.Errorf("%s round %d: %s\n%s", agents[i].name, r+1, line, out)
					}
				}
			}
		}
	}

	// On the host: a sound repository, every commit on its branch,
	// the tags and branches of the last round only.
	h.git(checkout, "fsck", "--full", "--strict", "--no-dangling")
	for _, a := range agents {
		log := strings.Split(h.git(checkout, "log", "--format=%s", a.branch), "\n")
		seen := map[string]int{}
		for _, s := range log {
			seen[s]++
		}
		for r := 1; r <= rounds; r++ {
			for c := 1; c <= commits; c++ {
				if msg := fmt.Sprintf("%s r%d c%d", a.name, r, c); seen[msg] != 1 {
					t.Errorf("%s: the commit %q is on it %d times, want once", a.branch, msg, seen[msg])
				}
			}
		}
		for r := 1; r <= rounds; r++ {
			want := r == rounds
			for _, ref := range []string{fmt.Sprintf("refs/tags/t-%s-%d", a.name, r), fmt.Sprintf("refs/heads/side-%s-%d", a.name, r)} {
				out, err := h.command(t.Context(), checkout, nil, "git", "rev-parse", "-q", "--verify", ref).Output()
				if got := err == nil; got != want {
					t.Errorf("%s exists: %v, want %v (%s)", ref, got, want, bytes.TrimSpace(out))
				}
			}
		}
		if got := h.git(a.dir, "rev-parse", "--abbrev-ref", "HEAD"); got != a.branch {
			t.Errorf("%s: HEAD is %s, want %s", a.dir, got, a.branch)
		}
		if got := h.git(a.dir, "status", "--porcelain"); got != "" {
			t.Errorf("%s: status not clean (its index lost a commit):\n%s", a.dir, got)
		}
	}
}
