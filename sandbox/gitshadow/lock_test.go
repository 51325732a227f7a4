package gitshadow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/internal/flock"
)

// gitCommits plays a git on the host that holds rel.lock and, the first
// time shiro finds it held, writes content through it, as git commits a
// lock file.
func gitCommits(t *testing.T, dir, rel, content string) func(string) {
	t.Helper()
	lock := filepath.Join(dir, filepath.FromSlash(rel)) + ".lock"
	if err := os.WriteFile(lock, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	done := false
	return func(busy string) {
		if busy != rel || done {
			return
		}
		done = true
		if err := os.Rename(lock, strings.TrimSuffix(lock, ".lock")); err != nil {
			t.Error(err)
		}
	}
}

func oid(c string) string { return strings.Repeat(c, oidLen) }

func TestDeleteRefKeepsWhatGitPackedMeanwhile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	before := "# pack-refs with: peeled fully-peeled sorted \n" +
		oid("a") + " refs/heads/a\n" + oid("b") + " refs/heads/b\n"
	if err := os.WriteFile(filepath.Join(dir, "packed-refs"), []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	// While shiro deletes a, the user's git pack-refs packs c, whose
	// loose file it has removed already.
	h := hostRefs{dir: dir, busy: gitCommits(t, dir, "packed-refs", before+oid("c")+" refs/heads/c\n")}
	if err := h.deleteRef("refs/heads/a", oid("a")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "packed-refs"))
	if err != nil {
		t.Fatal(err)
	}
	got := parsePackedRefs(b)
	if _, ok := got["refs/heads/a"]; ok {
		t.Error("refs/heads/a is still packed")
	}
	for _, name := range []string{"refs/heads/b", "refs/heads/c"} {
		if got[name] == "" {
			t.Errorf("%s was lost from packed-refs:\n%s", name, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "packed-refs.lock")); err == nil {
		t.Error("packed-refs.lock left behind")
	}
}

func TestRefWritesCheckTheValueUnderTheLock(t *testing.T) {
	t.Parallel()
	t.Run("an update", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "refs", "heads"), 0o755)
		os.WriteFile(filepath.Join(dir, "refs", "heads", "main"), []byte(oid("1")+"\n"), 0o644)
		// The user commits on main while shiro waits for main's lock.
		h := hostRefs{dir: dir, busy: gitCommits(t, dir, "refs/heads/main", oid("2")+"\n")}
		if err := h.setRef("refs/heads/main", oid("1"), oid("3"), "test"); !errors.Is(err, errChanged) {
			t.Errorf("setRef over the user's commit: %v, want errChanged", err)
		}
		if v, _ := h.current("refs/heads/main"); v != oid("2") {
			t.Errorf("main is %s, want the user's commit", v)
		}
	})
	t.Run("a deletion", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "refs", "tags"), 0o755)
		os.WriteFile(filepath.Join(dir, "refs", "tags", "v1"), []byte(oid("1")+"\n"), 0o644)
		h := hostRefs{dir: dir, busy: gitCommits(t, dir, "refs/tags/v1", oid("2")+"\n")}
		if err := h.deleteRef("refs/tags/v1", oid("1")); !errors.Is(err, errChanged) {
			t.Errorf("deleteRef of a tag the user moved: %v, want errChanged", err)
		}
		if v, _ := h.current("refs/tags/v1"); v != oid("2") {
			t.Errorf("v1 is %q, want the user's", v)
		}
	})
	t.Run("HEAD", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
		h := hostRefs{dir: dir, busy: gitCommits(t, dir, "HEAD", "ref: refs/heads/other\n")}
		same := func(cur []byte, ok bool) bool { return ok && string(cur) == "ref: refs/heads/main\n" }
		if err := h.lockWrite("HEAD", []byte("ref: refs/heads/sandbox\n"), same); !errors.Is(err, errChanged) {
			t.Errorf("lockWrite over the user's checkout: %v, want errChanged", err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "HEAD")); string(b) != "ref: refs/heads/other\n" {
			t.Errorf("HEAD is %q", b)
		}
	})
}

func TestImportLockIsTheRepositorysAndOutsideIt(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	gitIn(t, ws, nil, "worktree", "add", "-q", wt, "-b", "wt")
	lockDir := t.TempDir()
	main, err := Discover(ws)
	if err != nil {
		t.Fatal(err)
	}
	linked, err := Discover(wt)
	if err != nil {
		t.Fatal(err)
	}
	a, b := ImportLockPath(lockDir, main.CommonDir), ImportLockPath(lockDir, linked.CommonDir)
	if a != b {
		t.Errorf("the checkout's lock %s and its worktree's %s differ", a, b)
	}
	if filepath.Dir(a) != lockDir {
		t.Errorf("the lock %s is not in shiro's state directory %s", a, lockDir)
	}
	if other := ImportLockPath(lockDir, newRepo(t)+"/.git"); other == a {
		t.Error("two repositories share a lock")
	}
}

func TestImportWaitsForAnotherSessionsImport(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	lockDir := t.TempDir()
	s, fs, inSandbox := shadowedWithLocks(t, ws, lockDir)
	s.lockWait = 200 * time.Millisecond
	first := gitIn(t, ws, nil, "rev-parse", "main")

	// Another session's import holds the repository's lock.
	unlock, err := flock.Lock(t.Context(), ImportLockPath(lockDir, s.repo.CommonDir))
	if err != nil {
		t.Fatal(err)
	}
	inSandbox("commit", "-q", "--allow-empty", "-m", "while locked")
	inSandbox("tag", "locked")
	start := time.Now()
	notices := strings.Join(after(t, s, fs), "\n")
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("the import waited %s for a held lock, bound %s", waited, s.lockWait)
	}
	if !strings.Contains(notices, "not in your repository yet") || !strings.Contains(notices, "next command") {
		t.Errorf("no notice of the wait:\n%s", notices)
	}
	if got := gitIn(t, ws, nil, "rev-parse", "main"); got != first {
		t.Errorf("main moved to %s while another import held the lock", got)
	}
	if got := gitIn(t, ws, nil, "tag", "--list"); got != "" {
		t.Errorf("tags written while another import held the lock: %q", got)
	}

	// Nothing lost: the next sync takes it.
	unlock()
	if _, err := s.Before(t.Context(), Fingerprint(fs.shadow, s.Layout())); err != nil {
		t.Fatal(err)
	}
	if got := gitIn(t, ws, nil, "log", "--format=%s", "-1", "main"); got != "while locked" {
		t.Errorf("main after the lock was released: %q", got)
	}
	if got := gitIn(t, ws, nil, "tag", "--list"); got != "locked" {
		t.Errorf("tags after the lock was released: %q", got)
	}
	gitIn(t, ws, nil, "fsck", "--full", "--strict")
}

func TestBranchCheckedOutElsewhereStaysPut(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	wt := filepath.Join(t.TempDir(), "agent")
	gitIn(t, ws, nil, "worktree", "add", "-q", wt, "-b", "shiro/agent")
	gitIn(t, ws, nil, "branch", "free")
	lockDir := t.TempDir()
	mainBefore := gitIn(t, ws, nil, "rev-parse", "main")

	// The agent's sandbox moves the user's checked-out main, deletes
	// nothing it may not, and moves a branch no worktree has.
	s, fs, inSandbox := shadowedWithLocks(t, wt, lockDir)
	inSandbox("commit", "-q", "--allow-empty", "-m", "agent")
	agent := inSandbox("rev-parse", "HEAD")
	inSandbox("update-ref", "refs/heads/main", agent)
	inSandbox("update-ref", "refs/heads/free", agent)
	notices := strings.Join(after(t, s, fs), "\n")
	if got := gitIn(t, ws, nil, "rev-parse", "main"); got != mainBefore {
		t.Errorf("the user's checked-out main moved to %s", got)
	}
	if !strings.Contains(notices, "refs/heads/main stays in the sandbox: it is the branch checked out in "+ws) {
		t.Errorf("no notice for main:\n%s", notices)
	}
	for branch, want := range map[string]string{"shiro/agent": agent, "free": agent} {
		if got := gitIn(t, ws, nil, "rev-parse", branch); got != want {
			t.Errorf("%s is %s, want the sandbox's %s", branch, got, want)
		}
	}
	if got := gitIn(t, ws, nil, "status", "--porcelain"); got != "" {
		t.Errorf("the user's checkout changed:\n%s", got)
	}

	// The checkout's own session does not move the agent's branch.
	m, mfs, inMain := shadowedWithLocks(t, ws, lockDir)
	inMain("update-ref", "refs/heads/shiro/agent", mainBefore)
	notices = strings.Join(after(t, m, mfs), "\n")
	if got := gitIn(t, ws, nil, "rev-parse", "shiro/agent"); got != agent {
		t.Errorf("the agent's branch moved to %s", got)
	}
	if !strings.Contains(notices, "checked out in "+wt) {
		t.Errorf("no notice for shiro/agent:\n%s", notices)
	}
	gitIn(t, ws, nil, "fsck", "--full")
}
