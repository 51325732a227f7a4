package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/integration/testenv"
)

// A worktree agent's sandbox is opened at a linked worktree that lives in
// shiro's data directory, outside the user's checkout. Whatever it runs,
// as a normal user, the checkout (another worktree of the same
// repository) and the repository's configuration and hooks stay as they
// were on the host, and git on the host runs nothing it planted.
func TestHostileWorktreeCannotReachTheCheckout(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	q := strconv.Quote
	checkout := h.workspace("checkout")
	h.repo(checkout)
	h.git(checkout, "config", "user.name", "agent")
	h.git(checkout, "config", "user.email", "agent@sandbox")
	shiroHome := h.dir("shiro-home", 0o700)
	h.dir("shiro-home/worktrees/checkout", 0o755)
	wt := filepath.Join(shiroHome, "worktrees", "checkout", "agent")
	h.git(checkout, "worktree", "add", "-q", wt, "-b", "shiro/agent")
	t.Cleanup(func() { testenv.RemoveContainers(t, h.api, wt) })
	env := []string{"SHIRO_HOME=" + shiroHome}
	common := filepath.Join(checkout, ".git")
	rel, err := filepath.Rel(wt, checkout)
	if err != nil {
		t.Fatal(err)
	}

	// What must not change on the host.
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "(missing: " + err.Error() + ")"
		}
		return string(b)
	}
	kept := []string{
		filepath.Join(checkout, "README"), filepath.Join(wt, ".git"),
		filepath.Join(common, "config"), filepath.Join(common, "HEAD"), filepath.Join(common, "index"),
		filepath.Join(common, "worktrees", "agent", "commondir"), filepath.Join(common, "worktrees", "agent", "gitdir"),
	}
	before := map[string]string{}
	for _, p := range kept {
		before[p] = read(p)
	}
	mainBefore := h.git(checkout, "rev-parse", "main")
	hooksBefore, _ := os.ReadDir(filepath.Join(common, "hooks"))

	bash := func(t *testing.T, command string) string {
		t.Helper()
		stop := h.gitLoop([]string{checkout, wt})
		res := h.with(t).shiro(wt, env, "tool", "bash", bashJSON(command, 60000))
		stop()
		h.with(t).noMarker()
		t.Log(res.stdout + res.stderr)
		return res.stdout + res.stderr
	}

	t.Run("the agent's own work lands on its branch", func(t *testing.T) {
		out := bash(t, `echo agent > agent.txt && git add agent.txt && git commit -qm "agent's work" && echo committed`)
		mustContain(t, "the result", out, "committed")
		if got := h.git(checkout, "log", "--format=%s", "-1", "shiro/agent"); got != "agent's work" {
			t.Errorf("shiro/agent on the host: %q\n%s", got, out)
		}
	})

	t.Run("the user's branch moved from the sandbox", func(t *testing.T) {
		out := bash(t, `git update-ref refs/heads/main HEAD; git push -q . HEAD:refs/heads/main 2>&1; git branch -f main HEAD 2>&1; echo moved`)
		mustContain(t, "the result", out, "moved", "refs/heads/main stays in the sandbox: it is the branch checked out in "+checkout)
		if got := h.git(checkout, "rev-parse", "main"); got != mainBefore {
			t.Errorf("the user's main moved to %s\n%s", got, out)
		}
	})

	t.Run("the checkout's files by relative and absolute path", func(t *testing.T) {
		out := bash(t, fmt.Sprintf(`echo pwned > %[1]s/x; echo "rel-rc=$?"
echo pwned > %[2]s/y; echo "abs-rc=$?"
echo pwned >> %[2]s/README; echo "readme-rc=$?"
mkdir -p %[2]s/sub; echo "mkdir-rc=$?"
cd %[1]s && touch from-cd; echo "cd-rc=$?"
true`, rel, checkout))
		for _, rc := range []string{"rel-rc=0", "abs-rc=0", "readme-rc=0", "mkdir-rc=0", "cd-rc=0"} {
			if strings.Contains(out, rc) {
				t.Errorf("a write into the checkout succeeded in the sandbox (%s):\n%s", rc, out)
			}
		}
		for _, name := range []string{"x", "y", "sub", "from-cd"} {
			if _, err := os.Lstat(filepath.Join(checkout, name)); err == nil {
				t.Errorf("%s appeared in the user's checkout", name)
			}
		}
	})

	t.Run("the repository's hooks and config through the gitfile", func(t *testing.T) {
		out := bash(t, fmt.Sprintf(`gd=$(sed -n 's/^gitdir: //p' .git); cd_=$gd/$(cat $gd/commondir); echo "common=$cd_"
for hook in post-checkout post-commit pre-commit reference-transaction; do printf '#!/bin/sh\n%[1]s\n' > $cd_/hooks/$hook && chmod +x $cd_/hooks/$hook; done
git config -f $cd_/config core.fsmonitor %[2]s
mkdir -p evilhooks && printf '#!/bin/sh\n%[3]s\n' > evilhooks/post-checkout && chmod +x evilhooks/post-checkout
git config -f $cd_/config core.hooksPath "$PWD/evilhooks"
printf '[core]\n\tfsmonitor = %[4]s\n' > $gd/config.worktree
echo "ref: refs/heads/evil" > $cd_/HEAD
cp $gd/index $cd_/index
echo "$PWD/evil" > $gd/commondir
echo "%[5]s/.git" > $gd/gitdir
printf '#!/bin/sh\n%[1]s\n' > /.shiro/host/hooks/post-checkout; echo "hostmount-rc=$?"
ls -d %[6]s/sandbox 2>&1 || echo "no shiro state here"
echo planted`, h.plant("common-hook"), q(h.plant("common-fsmonitor")), h.plant("hookspath"), h.plant("worktree-config"), checkout, shiroHome))
		mustContain(t, "the result", out, "common="+filepath.Join(common, "worktrees", "agent"), "planted", "Read-only file system", "no shiro state here")
		if strings.Contains(out, "hostmount-rc=0") {
			t.Errorf("the host's git directory was writable through its read-only mount:\n%s", out)
		}
		hooks, _ := os.ReadDir(filepath.Join(common, "hooks"))
		if len(hooks) != len(hooksBefore) {
			t.Errorf("the repository's hooks changed on the host: %d files, were %d", len(hooks), len(hooksBefore))
		}
		if _, err := os.Lstat(filepath.Join(common, "worktrees", "agent", "config.worktree")); err == nil {
			t.Error("config.worktree reached the host")
		}
	})

	t.Run("the worktree's gitfile rewritten, removed, renamed", func(t *testing.T) {
		out := bash(t, fmt.Sprintf(`echo "gitdir: %[1]s" > .git; echo "write-rc=$?"
rm -f .git; echo "rm-rc=$?"
mv .git .git.old; echo "mv-rc=$?"
git init -q evilgd && git -C evilgd config core.fsmonitor %[2]s
ln -sfn evilgd/.git .git; echo "ln-rc=$?"
true`, common, q(h.plant("gitfile-fsmonitor"))))
		for _, rc := range []string{"write-rc=0", "rm-rc=0", "mv-rc=0", "ln-rc=0"} {
			if strings.Contains(out, rc) {
				t.Errorf("the worktree's gitfile was changed in the sandbox (%s):\n%s", rc, out)
			}
		}
	})

	t.Run("symlinks into the checkout and its git directory", func(t *testing.T) {
		out := bash(t, fmt.Sprintf(`ln -s %[1]s to-checkout; echo pwned > to-checkout/via-link; echo "link-rc=$?"
ln -s %[2]s/hooks to-hooks; printf '#!/bin/sh\n%[3]s\n' > to-hooks/pre-commit; echo "hooks-rc=$?"
mkdir -p nested && ln -s %[2]s nested/.git && echo nested-made
ln -s %[2]s/worktrees/agent wtgd; echo "gitdir: $PWD/wtgd" > sub-gitfile 2>/dev/null
true`, checkout, common, h.plant("symlink-hook")))
		// In the sandbox the common directory is the shadow: the hook
		// lands there, and stays there.
		mustContain(t, "the result", out, "hooks-rc=0", ".git/hooks/pre-commit; the change stays in the sandbox")
		if strings.Contains(out, "link-rc=0") {
			t.Errorf("a write through a symlink into the checkout succeeded in the sandbox:\n%s", out)
		}
		if _, err := os.Lstat(filepath.Join(checkout, "via-link")); err == nil {
			t.Error("a write through a symlink reached the checkout")
		}
		if _, err := os.Lstat(filepath.Join(common, "hooks", "pre-commit")); err == nil {
			t.Error("a hook written through a symlink reached the host")
		}
		h.with(t).hostGit(filepath.Join(wt, "nested"))
	})

	// Nothing of the checkout changed: its files, HEAD, index, status and
	// the repository's configuration; the worktree's links are as made.
	for _, p := range kept {
		if now := read(p); now != before[p] {
			t.Errorf("%s changed on the host:\n%s\nwas:\n%s", p, now, before[p])
		}
	}
	if got := h.git(checkout, "status", "--porcelain"); got != "" {
		t.Errorf("the checkout's status:\n%s", got)
	}
	if got := h.git(checkout, "rev-parse", "--abbrev-ref", "HEAD"); got != "main" {
		t.Errorf("the checkout's branch is %s", got)
	}
	if got := h.git(wt, "rev-parse", "--git-common-dir"); filepath.Clean(got) != common {
		t.Errorf("the worktree's common directory is %s, want %s", got, common)
	}

	// The user's git in both worktrees: checkouts and commits, whose hooks
	// would run whatever was planted.
	for _, dir := range []string{checkout, wt} {
		out, err := h.command(t.Context(), dir, nil, "git", "checkout", "-q", "-b", "user-"+filepath.Base(dir)).CombinedOutput()
		if err != nil {
			t.Errorf("git checkout in %s: %v\n%s", dir, err, out)
		}
		h.hostGit(dir)
	}
	h.noMarker()
	if b := read(filepath.Join(common, "config")); bytes.Contains([]byte(b), []byte("fsmonitor")) || strings.Contains(b, "hooksPath") {
		t.Errorf("the repository's config:\n%s", b)
	}
	h.git(checkout, "fsck", "--full")
}
