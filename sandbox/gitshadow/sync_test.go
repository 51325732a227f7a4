package gitshadow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// gitIn runs the real git with a clean environment and returns its output.
func gitIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
	}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func requireGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and git is missing")
		}
		t.Skip("git not installed")
	}
}

// newRepo makes a repository with one commit in a fresh workspace.
func newRepo(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	gitIn(t, ws, nil, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, ws, nil, "add", "a.txt")
	gitIn(t, ws, nil, "commit", "-qm", "first")
	return ws
}

// fakeSandbox runs the helper's git commands in-process on a shadow
// directory standing in for the container's view of the common directory.
type fakeSandbox struct {
	shadow string
	calls  []string
}

func (f *fakeSandbox) Run(_ context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	if len(cmd.Args) < 4 || cmd.Args[2] != "git" {
		return sandbox.Result{}, errors.New("unexpected command")
	}
	args := append([]string{}, cmd.Args[3:]...)
	f.calls = append(f.calls, args[0])
	for i := range args {
		if i > 0 && args[i-1] == "--root" {
			args[i] = f.shadow // the container sees the shadow at the host's path
		}
	}
	stdout := cmd.Stdout
	if stdout == nil {
		stdout = io.Discard
	}
	if err := HelperMain(args, cmd.Stdin, stdout); err != nil {
		if cmd.Stderr != nil {
			fmt.Fprintln(cmd.Stderr, err)
		}
		return sandbox.Result{ExitCode: 1}, nil
	}
	return sandbox.Result{}, nil
}

// shadowed sets up a Syncer for ws's repository with the shadow in a
// temporary directory and returns a function running git "in the sandbox"
// (the shadow as git directory, the workspace as worktree).
func shadowed(t *testing.T, ws string) (*Syncer, *fakeSandbox, func(args ...string) string) {
	t.Helper()
	return shadowedWithLocks(t, ws, t.TempDir())
}

// shadowedWithLocks is shadowed with the import locks in lockDir (shared
// by sessions on one repository).
func shadowedWithLocks(t *testing.T, ws, lockDir string) (*Syncer, *fakeSandbox, func(args ...string) string) {
	t.Helper()
	repo, err := Discover(ws)
	if err != nil || repo == nil {
		t.Fatalf("Discover: %v %v", repo, err)
	}
	fs := &fakeSandbox{shadow: t.TempDir()}
	s := NewSyncer(repo, fs, []string{"helper", "helper", "git"}, repo.CommonDir, lockDir)
	t.Cleanup(s.Close)
	if err := s.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	gitDir := filepath.Join(fs.shadow, filepath.FromSlash(repo.Worktree)) // a linked worktree's own
	inSandbox := func(args ...string) string {
		return gitIn(t, ws, []string{"GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + ws}, args...)
	}
	return s, fs, inSandbox
}

// after runs the Syncer's after-command step with the shadow's current
// fingerprint, as the helper would report it.
func after(t *testing.T, s *Syncer, fs *fakeSandbox) []string {
	t.Helper()
	n, err := s.After(t.Context(), Fingerprint(fs.shadow, s.Layout()))
	if err != nil {
		t.Fatalf("After: %v", err)
	}
	return n
}

func TestSandboxCommitReachesTheHost(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	s, fs, inSandbox := shadowed(t, ws)

	if err := os.WriteFile(filepath.Join(ws, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inSandbox("add", "b.txt")
	inSandbox("commit", "-qm", "from the sandbox")
	inSandbox("checkout", "-q", "-b", "feature")
	notices := after(t, s, fs)
	if len(notices) != 0 {
		t.Errorf("notices: %q", notices)
	}
	if got := gitIn(t, ws, nil, "log", "--format=%s", "main"); got != "from the sandbox\nfirst" {
		t.Errorf("host log of main:\n%s", got)
	}
	if got := gitIn(t, ws, nil, "rev-parse", "--abbrev-ref", "HEAD"); got != "feature" {
		t.Errorf("host HEAD is %s, want feature", got)
	}
	if got := gitIn(t, ws, nil, "status", "--porcelain"); got != "" {
		t.Errorf("host status not clean:\n%s", got)
	}
	gitIn(t, ws, nil, "fsck", "--strict")

	// The stash, with its log.
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inSandbox("stash", "-q")
	after(t, s, fs)
	if got := gitIn(t, ws, nil, "stash", "list"); !strings.Contains(got, "stash@{0}") {
		t.Errorf("host stash list: %q", got)
	}
	if got := gitIn(t, ws, nil, "status", "--porcelain"); got != "" {
		t.Errorf("host status after the stash:\n%s", got)
	}
}

func TestHostChangesReachTheSandbox(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	s, fs, inSandbox := shadowed(t, ws)
	if err := os.WriteFile(filepath.Join(ws, "h.txt"), []byte("h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, ws, nil, "add", "h.txt")
	gitIn(t, ws, nil, "commit", "-qm", "on the host")
	gitIn(t, ws, nil, "branch", "topic")
	if _, err := s.Before(t.Context(), Fingerprint(fs.shadow, s.Layout())); err != nil {
		t.Fatal(err)
	}
	if got := inSandbox("log", "--format=%s", "-1"); got != "on the host" {
		t.Errorf("sandbox log: %q", got)
	}
	if got := inSandbox("branch", "--format=%(refname:short)"); got != "main\ntopic" {
		t.Errorf("sandbox branches: %q", got)
	}
	gitIn(t, ws, nil, "branch", "-D", "topic")
	if _, err := s.Before(t.Context(), Fingerprint(fs.shadow, s.Layout())); err != nil {
		t.Fatal(err)
	}
	if got := inSandbox("branch", "--format=%(refname:short)"); got != "main" {
		t.Errorf("sandbox branches after the host deleted topic: %q", got)
	}
}

func TestConcurrentHostChangeWins(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	s, fs, inSandbox := shadowed(t, ws)
	inSandbox("commit", "-q", "--allow-empty", "-m", "sandbox")
	sandboxCommit := inSandbox("rev-parse", "HEAD")
	gitIn(t, ws, nil, "commit", "-q", "--allow-empty", "-m", "host")
	hostCommit := gitIn(t, ws, nil, "rev-parse", "HEAD")
	notices := after(t, s, fs)
	if got := gitIn(t, ws, nil, "rev-parse", "main"); got != hostCommit {
		t.Errorf("main is %s, want the host's %s", got, hostCommit)
	}
	if !strings.Contains(strings.Join(notices, "\n"), "changed in your repository meanwhile") {
		t.Errorf("no conflict notice: %q", notices)
	}
	// The sandbox's commit is kept as an object on the host, and the
	// shadow's branch is the host's again.
	gitIn(t, ws, nil, "cat-file", "-e", sandboxCommit)
	if got := inSandbox("rev-parse", "main"); got != hostCommit {
		t.Errorf("sandbox main is %s, want %s", got, hostCommit)
	}
}

func TestSandboxConfigAndHooksStayInTheSandbox(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	s, fs, inSandbox := shadowed(t, ws)
	before, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
	marker := filepath.Join(t.TempDir(), "ran")
	inSandbox("config", "core.fsmonitor", "touch "+marker)
	if err := os.MkdirAll(filepath.Join(fs.shadow, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fs.shadow, "hooks", "post-checkout"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	inSandbox("update-ref", "refs/replace/"+strings.Repeat("a", 40), inSandbox("rev-parse", "HEAD"))
	if err := os.WriteFile(filepath.Join(fs.shadow, "commondir"), []byte(t.TempDir()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notices := strings.Join(after(t, s, fs), "\n")
	for _, want := range []string{".git/config", ".git/hooks/post-checkout", ".git/commondir", "refs/replace/"} {
		if !strings.Contains(notices, want) {
			t.Errorf("no notice naming %s:\n%s", want, notices)
		}
	}
	now, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
	if !bytes.Equal(before, now) {
		t.Errorf("host config changed:\n%s", now)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "hooks", "post-checkout")); err == nil {
		t.Error("the hook reached the host")
	}
	gitIn(t, ws, nil, "status")
	gitIn(t, ws, nil, "checkout", "-q", "-b", "x")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("git on the host ran what the sandbox planted")
	}
	// Reported once.
	if n := after(t, s, fs); len(n) != 0 {
		t.Errorf("repeated notices: %q", n)
	}
}

func TestHostileShadowContentIsRefused(t *testing.T) {
	requireGit(t)
	t.Parallel()
	cases := []struct {
		name, file, content, want string
	}{
		{"HEAD outside refs/heads", "HEAD", "ref: refs/tags/../../config\n", "HEAD"},
		{"HEAD to a missing object", "HEAD", strings.Repeat("1", 40) + "\n", "missing"},
		{"branch to a missing object", "refs/heads/evil", strings.Repeat("2", 40) + "\n", "missing"},
		{"index with a .git path", "index", "", "inside .git"},
		{"garbage index", "index", "DIRCgarbage", "index"},
		{"stash log garbage", "logs/refs/stash", "not a log\n", "reflog"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := newRepo(t)
			s, fs, inSandbox := shadowed(t, ws)
			content := []byte(tc.content)
			if tc.file == "index" && tc.content == "" {
				content = indexWithPath(t, ws, inSandbox, ".git/config")
			}
			if tc.file == "logs/refs/stash" {
				inSandbox("stash", "-q", "--include-untracked")
			}
			p := filepath.Join(fs.shadow, filepath.FromSlash(tc.file))
			os.MkdirAll(filepath.Dir(p), 0o755)
			before, _ := os.ReadFile(filepath.Join(ws, ".git", filepath.FromSlash(tc.file)))
			if err := os.WriteFile(p, content, 0o644); err != nil {
				t.Fatal(err)
			}
			notices := strings.Join(after(t, s, fs), "\n")
			if !strings.Contains(notices, tc.want) {
				t.Errorf("notices lack %q:\n%s", tc.want, notices)
			}
			now, _ := os.ReadFile(filepath.Join(ws, ".git", filepath.FromSlash(tc.file)))
			if !bytes.Equal(before, now) {
				t.Errorf("host %s changed to %q", tc.file, now)
			}
			gitIn(t, ws, nil, "fsck")
		})
	}
}

// indexWithPath makes a valid index (checksum and all) holding an entry at
// path, by staging a file at a harmless path and renaming it in the bytes.
func indexWithPath(t *testing.T, ws string, inSandbox func(...string) string, path string) []byte {
	t.Helper()
	dir := t.TempDir()
	gitIn(t, dir, nil, "init", "-q")
	name := strings.Repeat("x", len(path))
	os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644)
	gitIn(t, dir, nil, "add", name)
	b, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(name), []byte(path), 1)
	return fixIndexChecksum(b)
}

func TestLooseAndPackedObjectsAreChecked(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	s, fs, inSandbox := shadowed(t, ws)
	for i := range 30 {
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d.txt", i)), []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 50+i)), 0o644)
	}
	inSandbox("add", ".")
	inSandbox("commit", "-qm", "many")
	os.WriteFile(filepath.Join(ws, "f1.txt"), []byte("edited\n"), 0o644)
	inSandbox("commit", "-qam", "edit")
	inSandbox("gc", "-q") // packs the shadow's own objects
	packs, _ := filepath.Glob(filepath.Join(fs.shadow, "objects", "pack", "*.pack"))
	if len(packs) == 0 {
		t.Fatal("gc made no pack in the shadow")
	}
	// A corrupt loose object next to it is refused, the rest imported.
	bad := filepath.Join(fs.shadow, "objects", "ab", strings.Repeat("c", 38))
	os.MkdirAll(filepath.Dir(bad), 0o755)
	os.WriteFile(bad, []byte("not zlib"), 0o444)
	notices := strings.Join(after(t, s, fs), "\n")
	if !strings.Contains(notices, "not imported") {
		t.Errorf("no notice for the corrupt object:\n%s", notices)
	}
	if got := gitIn(t, ws, nil, "log", "--format=%s", "-2"); got != "edit\nmany" {
		t.Errorf("host log: %q", got)
	}
	gitIn(t, ws, nil, "fsck", "--strict")
	if _, err := os.Stat(filepath.Join(ws, ".git", "objects", "ab", strings.Repeat("c", 38))); err == nil {
		t.Error("the corrupt object reached the host")
	}
	// The shadow still works (its packs stay; loose objects reach it
	// through alternates).
	inSandbox("log", "-1")
}

func TestUnchangedFingerprintCostsNothing(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	s, fs, _ := shadowed(t, ws)
	calls := len(fs.calls)
	fp := Fingerprint(fs.shadow, s.Layout())
	after(t, s, fs)
	after(t, s, fs)
	if _, err := s.Before(t.Context(), fp); err != nil {
		t.Fatal(err)
	}
	if got := fs.calls[calls:]; len(got) > 1 {
		t.Errorf("helper calls with nothing changed: %v", got)
	}
}

func TestHostStatusRefreshDoesNotBlockTheIndex(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	os.WriteFile(filepath.Join(ws, "c.txt"), []byte("c\n"), 0o644)
	gitIn(t, ws, nil, "add", "c.txt")
	gitIn(t, ws, nil, "commit", "-qm", "c")
	s, fs, inSandbox := shadowed(t, ws)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("edited\n"), 0o644)
	inSandbox("add", "a.txt")
	inSandbox("commit", "-qm", "edit")
	// Meanwhile the user's prompt runs git status, which rewrites the
	// host's index with fresh stat data but stages nothing new.
	before, _ := os.ReadFile(filepath.Join(ws, ".git", "index"))
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(ws, "c.txt"), old, old)
	gitIn(t, ws, nil, "status", "--porcelain")
	if now, _ := os.ReadFile(filepath.Join(ws, ".git", "index")); bytes.Equal(before, now) {
		t.Fatal("git status did not rewrite the host's index; the test needs it to")
	}
	if n := after(t, s, fs); len(n) != 0 {
		t.Errorf("notices: %q", n)
	}
	if got := gitIn(t, ws, nil, "status", "--porcelain"); got != "" {
		t.Errorf("host status after the sandbox's commit:\n%s", got)
	}
}

// A gitlink makes git on the host treat its directory as a submodule's
// worktree and go into whatever repository is there: the sandbox's index
// may keep the host's submodules but not add one (route: a gitlink to a
// repository made where the scanner could not look).
func TestIndexWithANewGitlinkStaysInTheSandbox(t *testing.T) {
	requireGit(t)
	t.Parallel()
	lib := newRepo(t)
	ws := newRepo(t)
	gitIn(t, ws, nil, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
	gitIn(t, ws, nil, "commit", "-qm", "add lib")
	s, fs, inSandbox := shadowed(t, ws)
	commit := gitIn(t, lib, nil, "rev-parse", "HEAD")

	// Staging over the known submodule is taken.
	os.WriteFile(filepath.Join(ws, "c.txt"), []byte("c\n"), 0o644)
	inSandbox("add", "c.txt")
	if n := after(t, s, fs); len(n) != 0 {
		t.Fatalf("notices for an index that keeps lib: %q", n)
	}
	if got := gitIn(t, ws, nil, "diff", "--cached", "--name-only"); got != "c.txt" {
		t.Fatalf("host staging: %q", got)
	}

	before, _ := os.ReadFile(filepath.Join(ws, ".git", "index"))
	inSandbox("update-index", "--add", "--cacheinfo", "160000,"+commit+",a/b")
	notices := strings.Join(after(t, s, fs), "\n")
	if !strings.Contains(notices, ".git/index stays in the sandbox") || !strings.Contains(notices, "submodule path a/b") {
		t.Errorf("notices:\n%s", notices)
	}
	now, _ := os.ReadFile(filepath.Join(ws, ".git", "index"))
	if !bytes.Equal(before, now) {
		t.Error("the host's index took the new gitlink")
	}
	if got := gitIn(t, ws, nil, "ls-files", "--stage", "a/b"); got != "" {
		t.Errorf("host index has a/b: %q", got)
	}
}

func TestShadowOfARepositoryWithEveryRefPacked(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	gitIn(t, ws, nil, "pack-refs", "--all")
	os.RemoveAll(filepath.Join(ws, ".git", "refs", "heads")) // as a fresh clone has it
	_, _, inSandbox := shadowed(t, ws)
	if got := inSandbox("log", "--format=%s"); got != "first" {
		t.Errorf("sandbox log: %q", got)
	}
}

// A git on the host holding a ref's lock as the shadow is filled (a
// pack-refs, a commit) must not leave the lock in the sandbox.
func TestHostLockFilesStayOnTheHost(t *testing.T) {
	requireGit(t)
	t.Parallel()
	ws := newRepo(t)
	lock := filepath.Join(ws, ".git", "refs", "heads", "main.lock")
	if err := os.WriteFile(lock, []byte(strings.Repeat("0", 40)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, fs, inSandbox := shadowed(t, ws)
	if _, err := os.Stat(filepath.Join(fs.shadow, "refs", "heads", "main.lock")); err == nil {
		t.Fatal("the host's lock reached the shadow")
	}
	os.Remove(lock)
	inSandbox("commit", "-q", "--allow-empty", "-m", "in the sandbox")
	after(t, s, fs)
	if got := gitIn(t, ws, nil, "log", "--format=%s", "-1"); got != "in the sandbox" {
		t.Errorf("host log: %q", got)
	}
}
