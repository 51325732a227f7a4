package worktree

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// git runs the real git in dir for a test, with a fixed identity.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a repository with two commits on main, a staged change and
// an untracked file, and returns its top (symlinks resolved).
func newRepo(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	top := filepath.Join(dir, "checkout")
	git(t, dir, "init", "-q", "-b", "main", top)
	os.WriteFile(filepath.Join(top, "a.txt"), []byte("one\n"), 0o644)
	git(t, top, "add", "a.txt")
	git(t, top, "commit", "-q", "-m", "one")
	git(t, top, "tag", "v1")
	os.WriteFile(filepath.Join(top, "a.txt"), []byte("two\n"), 0o644)
	git(t, top, "commit", "-q", "-am", "two")
	os.WriteFile(filepath.Join(top, "a.txt"), []byte("staged\n"), 0o644)
	git(t, top, "add", "a.txt")
	os.WriteFile(filepath.Join(top, "new.txt"), []byte("untracked\n"), 0o644)
	return top
}

// checkoutState is what Open must leave alone in the user's checkout.
func checkoutState(t *testing.T, top string) string {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(top, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(top, "a.txt"))
	return strings.Join([]string{
		git(t, top, "rev-parse", "HEAD"),
		git(t, top, "symbolic-ref", "HEAD"),
		git(t, top, "status", "--porcelain"),
		string(index), string(a),
	}, "\x00")
}

// openOpts opens name from dir, with the data directory beside the
// checkout top (newRepo's).
func openOpts(t *testing.T, dir, name string) OpenOptions {
	t.Helper()
	top := dir
	for ; top != filepath.Dir(top); top = filepath.Dir(top) {
		if _, err := os.Lstat(filepath.Join(top, ".git")); err == nil {
			break
		}
	}
	if top == filepath.Dir(top) {
		top = dir
	}
	return OpenOptions{Dir: dir, Name: name, DataDir: filepath.Join(filepath.Dir(top), "data")}
}

func TestOpenMakesTheWorktreeAndLeavesTheCheckout(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	before := checkoutState(t, top)
	sub := filepath.Join(top, "sub")
	os.Mkdir(sub, 0o755)
	a, err := Open(t.Context(), openOpts(t, sub, "fix-1"))
	if err != nil {
		t.Fatal(err)
	}
	if after := checkoutState(t, top); after != before {
		t.Errorf("the checkout changed:\nbefore %q\nafter  %q", before, after)
	}
	l := LayoutFor(filepath.Join(filepath.Dir(top), "data"), "", filepath.Join(top, ".git"))
	if a.Path != l.Path("fix-1") || a.Branch != "shiro/fix-1" || a.Checkout != top || a.CommonDir != filepath.Join(top, ".git") {
		t.Errorf("agent %+v", a)
	}
	if strings.HasPrefix(a.Path, top+string(filepath.Separator)) {
		t.Errorf("the worktree %s is inside the checkout", a.Path)
	}
	if got := git(t, a.Path, "symbolic-ref", "HEAD"); got != "refs/heads/shiro/fix-1" {
		t.Errorf("the worktree is on %s", got)
	}
	if head := git(t, top, "rev-parse", "HEAD"); a.Base != head || git(t, a.Path, "rev-parse", "HEAD") != head {
		t.Errorf("base %s, want the checkout's HEAD %s", a.Base, head)
	}
	if b, _ := os.ReadFile(filepath.Join(a.Path, "a.txt")); string(b) != "two\n" {
		t.Errorf("the worktree's a.txt is %q, want the committed \"two\\n\"", b)
	}
	if _, err := os.Stat(filepath.Join(a.Path, "new.txt")); err == nil {
		t.Error("the checkout's untracked file is in the worktree")
	}
	rec, err := l.Load("fix-1")
	if err != nil || *rec != *a {
		t.Errorf("record %+v, %v; want %+v", rec, err, a)
	}
}

func TestOpenReuses(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	o := openOpts(t, top, "again")
	first, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(first.Path, "work.txt"), []byte("in progress\n"), 0o644)
	second, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if *second != *first {
		t.Errorf("reopened %+v, want %+v", second, first)
	}
	if _, err := os.Stat(filepath.Join(first.Path, "work.txt")); err != nil {
		t.Errorf("the worktree's work is gone: %v", err)
	}

	t.Run("the branch without its worktree is attached again", func(t *testing.T) {
		git(t, first.Path, "commit", "-q", "--allow-empty", "-m", "agent's work")
		tip := git(t, first.Path, "rev-parse", "HEAD")
		if err := os.RemoveAll(first.Path); err != nil {
			t.Fatal(err)
		}
		third, err := Open(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		if got := git(t, third.Path, "rev-parse", "HEAD"); got != tip || third.Created != first.Created {
			t.Errorf("reattached at %s (created %v), want the branch's %s (created %v)", got, third.Created, tip, first.Created)
		}
	})
}

func TestOpenFrom(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	o := openOpts(t, top, "old")
	o.From = "v1"
	a, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	v1 := git(t, top, "rev-parse", "v1^{commit}")
	if a.Base != v1 || git(t, a.Path, "rev-parse", "HEAD") != v1 {
		t.Errorf("base %s, want v1 %s", a.Base, v1)
	}
	if _, err := Open(t.Context(), o); err != nil {
		t.Errorf("reopening with the same --from: %v", err)
	}
	o.From = "main"
	if _, err := Open(t.Context(), o); err == nil || !strings.Contains(err.Error(), "applies only to a new agent") {
		t.Errorf("reopening from another commit: %v", err)
	}

	for _, from := range []string{"no-such-ref", "HEAD:a.txt", "--output=/tmp/x"} {
		t.Run("refuses "+from, func(t *testing.T) {
			o := openOpts(t, top, "bad-from")
			o.From = from
			_, err := Open(t.Context(), o)
			if err == nil || !strings.Contains(err.Error(), "names no commit") {
				t.Errorf("--from %s: %v", from, err)
			}
			if _, err := os.Stat(LayoutFor(o.DataDir, "", filepath.Join(top, ".git")).Path("bad-from")); err == nil {
				t.Error("a worktree was made")
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	for _, name := range []string{"", "-x", "a/b", "..", "a..b", "x.lock", "sp ace", strings.Repeat("n", 65)} {
		t.Run("the name "+name, func(t *testing.T) {
			if _, err := Open(t.Context(), openOpts(t, top, name)); err == nil || !strings.Contains(err.Error(), "cannot name a worktree agent") {
				t.Errorf("Open(%q): %v", name, err)
			}
		})
	}
	t.Run("a directory outside any repository", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := Open(t.Context(), openOpts(t, dir, "a")); !errors.Is(err, ErrNoRepository) {
			t.Errorf("Open outside a repository: %v", err)
		}
	})
	t.Run("a bare repository", func(t *testing.T) {
		bare := filepath.Join(t.TempDir(), "bare.git")
		git(t, top, "clone", "-q", "--bare", top, bare)
		if _, err := Open(t.Context(), openOpts(t, bare, "a")); !errors.Is(err, ErrBareRepository) {
			t.Errorf("Open in a bare repository: %v", err)
		}
	})
	t.Run("a repository without a commit", func(t *testing.T) {
		empty := filepath.Join(t.TempDir(), "empty")
		git(t, top, "init", "-q", empty)
		if _, err := Open(t.Context(), openOpts(t, empty, "a")); err == nil || !strings.Contains(err.Error(), "make a first commit") {
			t.Errorf("Open without a commit: %v", err)
		}
	})
	t.Run("a worktree folder inside the checkout", func(t *testing.T) {
		o := openOpts(t, top, "inside")
		o.WorktreeDir = filepath.Join(top, "agents")
		if _, err := Open(t.Context(), o); err == nil || !strings.Contains(err.Error(), "inside the checkout") {
			t.Errorf("Open into the checkout: %v", err)
		}
	})
	t.Run("a stranger's directory where the worktree goes", func(t *testing.T) {
		o := openOpts(t, top, "taken")
		path := LayoutFor(o.DataDir, "", filepath.Join(top, ".git")).Path("taken")
		os.MkdirAll(path, 0o755)
		if _, err := Open(t.Context(), o); err == nil || !strings.Contains(err.Error(), "is not a worktree of") {
			t.Errorf("Open over a plain directory: %v", err)
		}
	})
}

// A repository whose hooks and fsmonitor would run on `git worktree add`:
// Open runs neither. The control (plain git, same repository) shows that
// the hook does run without Git's options.
func TestOpenRunsNothingTheRepositoryPlanted(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	marks := t.TempDir()
	hook := "#!/bin/sh\necho ran > " + filepath.Join(marks, "hook") + "\n"
	if err := os.WriteFile(filepath.Join(top, ".git", "hooks", "post-checkout"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	monitor := filepath.Join(top, ".git", "monitor.sh")
	os.WriteFile(monitor, []byte("#!/bin/sh\necho ran > "+filepath.Join(marks, "fsmonitor")+"\nexit 1\n"), 0o755)
	git(t, top, "config", "core.fsmonitor", monitor)

	if _, err := Open(t.Context(), openOpts(t, top, "safe")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadDir(marks); len(got) != 0 {
		t.Fatalf("Open ran the repository's programs: %v", got)
	}

	git(t, top, "worktree", "add", "-q", "-b", "control", filepath.Join(t.TempDir(), "control"))
	if _, err := os.Stat(filepath.Join(marks, "hook")); err != nil {
		t.Fatalf("the control: plain git did not run the hook either, so the test proves nothing: %v", err)
	}
}

func TestOpenTakesTurns(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	o := openOpts(t, top, "same")
	errs := make(chan error, 4)
	paths := make(chan string, 4)
	for range 4 {
		go func() {
			a, err := Open(context.WithoutCancel(t.Context()), o)
			if err == nil {
				paths <- a.Path
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
	close(paths)
	for p := range paths {
		if p != LayoutFor(o.DataDir, "", filepath.Join(top, ".git")).Path("same") {
			t.Errorf("path %s", p)
		}
	}
}

func TestFindAndAgentAt(t *testing.T) {
	t.Parallel()
	top := newRepo(t)
	o := openOpts(t, top, "found")
	if _, err := Find(o); !errors.Is(err, ErrNoAgent) {
		t.Errorf("Find before Open: %v", err)
	}
	a, err := Open(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Find(o); err != nil || *got != *a {
		t.Errorf("Find: %+v %v", got, err)
	}
	os.MkdirAll(filepath.Join(a.Path, "deep", "er"), 0o755)
	for _, dir := range []string{a.Path, filepath.Join(a.Path, "deep", "er")} {
		if got, err := AgentAt(o.DataDir, "", dir); err != nil || got == nil || got.Name != "found" {
			t.Errorf("AgentAt(%s): %+v %v", dir, got, err)
		}
	}
	for _, dir := range []string{top, t.TempDir()} {
		if got, err := AgentAt(o.DataDir, "", dir); err != nil || got != nil {
			t.Errorf("AgentAt(%s) outside every agent: %+v %v", dir, got, err)
		}
	}
	os.RemoveAll(a.Path)
	if _, err := Find(o); err == nil || !strings.Contains(err.Error(), "is gone") {
		t.Errorf("Find without the worktree: %v", err)
	}
}
