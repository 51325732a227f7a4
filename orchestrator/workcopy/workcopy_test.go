package workcopy

import (
	"context"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/internal/dirstate"
	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
	"github.com/shiroagent/shiro/tools/copymode"
)

// fixture is a workspace and a sandbox copy of it in another directory,
// the sandbox's helper running in this process.
type fixture struct {
	ws, copyDir, stateFile string
	store                  *checkpoint.Store
	root                   *os.Root
	remote                 *copymode.Remote
	// forge, when set, answers the helper's commands instead (a hostile
	// sandbox).
	forge func(args []string, stdin io.Reader, stdout io.Writer) int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	fx := &fixture{ws: t.TempDir(), copyDir: t.TempDir(), stateFile: filepath.Join(t.TempDir(), "copy.json")}
	var err error
	if fx.root, err = os.OpenRoot(fx.ws); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.root.Close() })
	gate, err := hostwrite.New(fx.root, fx.ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Close() })
	if fx.store, err = checkpoint.Open(filepath.Join(t.TempDir(), "store"), fx.root, gate, checkpoint.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.store.Close() })
	fake := &sandboxtest.Fake{RunFunc: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		stdin := cmd.Stdin
		if stdin == nil {
			stdin = strings.NewReader("")
		}
		if fx.forge != nil {
			return sandbox.Result{ExitCode: fx.forge(cmd.Args[3:], stdin, cmd.Stdout)}, nil
		}
		return sandbox.Result{ExitCode: copymode.Main(cmd.Args[3:], stdin, cmd.Stdout, io.Discard)}, nil
	}}
	fx.remote = &copymode.Remote{
		Sandbox:   fake,
		Helper:    func(context.Context) (string, error) { return "/helper", nil },
		Workspace: fx.copyDir,
		Cache:     filepath.Join(t.TempDir(), "cache"),
	}
	return fx
}

func (fx *fixture) open(t *testing.T) (*Copy, []string) {
	t.Helper()
	c, notices, err := Open(t.Context(), Options{Remote: fx.remote, Store: fx.store, Root: fx.root, StateFile: fx.stateFile})
	if err != nil {
		t.Fatal(err)
	}
	return c, notices
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := dirstate.Write(dir, files); err != nil {
		t.Fatal(err)
	}
}

// files is a directory's files (".git" included), content or "-> target".
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[filepath.ToSlash(rel)] = "-> " + target
			return err
		}
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func paths(chs []checkpoint.FileChange) []string {
	var out []string
	for _, c := range chs {
		out = append(out, string(c.Action)+" "+c.Path)
	}
	sort.Strings(out)
	return out
}

func TestTheCopyIsMadeOnceAndKeptInStep(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	write(t, fx.ws, map[string]string{"a.txt": "alpha\n", "src/b.go": "package b\n", ".gitignore": "*.log\n", "x.log": "ignored\n", ".git/HEAD": "ref: refs/heads/main\n", "link": "->a.txt"})
	c, _ := fx.open(t)
	want := map[string]string{"a.txt": "alpha\n", "src/b.go": "package b\n", ".gitignore": "*.log\n", ".git/HEAD": "ref: refs/heads/main\n", "link": "-> a.txt"}
	if got := files(t, fx.copyDir); !maps.Equal(got, want) {
		t.Fatalf("the copy holds %v, want %v", got, want)
	}

	// The user edits, creates and deletes here; the sandbox changes
	// another file: the user's changes go in, the sandbox's stay.
	write(t, fx.ws, map[string]string{"a.txt": "ALPHA\n", "new.txt": "new\n"})
	if err := os.Remove(filepath.Join(fx.ws, "src/b.go")); err != nil {
		t.Fatal(err)
	}
	write(t, fx.copyDir, map[string]string{".gitignore": "*.log\n*.tmp\n"})
	notices, err := c.Sync(t.Context())
	if err != nil || len(notices) != 0 {
		t.Fatalf("Sync: %v %v", notices, err)
	}
	got := files(t, fx.copyDir)
	if got["a.txt"] != "ALPHA\n" || got["new.txt"] != "new\n" || got[".gitignore"] != "*.log\n*.tmp\n" {
		t.Errorf("after Sync the copy holds %v", got)
	}
	if _, ok := got["src/b.go"]; ok {
		t.Error("the deletion did not reach the copy")
	}

	// A later session finds its base and the copy: nothing is copied again
	// (the sandbox's own file survives).
	write(t, fx.copyDir, map[string]string{"made-in-sandbox.txt": "mine\n"})
	fx.open(t)
	if files(t, fx.copyDir)["made-in-sandbox.txt"] != "mine\n" {
		t.Error("the copy was made again")
	}
	// A sandbox whose storage is new gets a new copy.
	if err := os.RemoveAll(fx.copyDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(fx.copyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	fx.open(t)
	if files(t, fx.copyDir)["a.txt"] != "ALPHA\n" {
		t.Error("a lost copy was not made again")
	}
}

// TestTheCopyListsWhatTheWorkspaceLists: an ignore file a rule ignores
// is not listed but still holds rules (a negation); the copy gets it, so
// that its walker lists the same files.
func TestTheCopyListsWhatTheWorkspaceLists(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	write(t, fx.ws, map[string]string{
		".gitignore":      ".*\n!/.gitignore\n*.txt\n",
		"keep/.gitignore": "!kept.txt\n",
		"keep/kept.txt":   "kept\n",
		"keep/other.txt":  "ignored\n",
	})
	fx.open(t)
	entries, err := fx.remote.Manifest(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Path)
	}
	sort.Strings(got)
	if want := []string{".gitignore", "keep/kept.txt"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the copy lists %v, want %v", got, want)
	}
}

func TestTheSandboxsChangesAreListedAndApplied(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	write(t, fx.ws, map[string]string{"keep.txt": "keep\n", "edit.txt": "one\n", "gone.txt": "bye\n", "both.txt": "base\n"})
	c, _ := fx.open(t)
	write(t, fx.copyDir, map[string]string{"edit.txt": "two\n", "made/new.txt": "new\n", "both.txt": "sandbox\n", "inside": "->keep.txt"})
	if err := os.Remove(filepath.Join(fx.copyDir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(fx.copyDir, "keep.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, fx.ws, map[string]string{"both.txt": "mine\n"}) // the user's edit of the same file
	ch, err := c.Changes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{"created inside", "created made/new.txt", "deleted gone.txt", "modified both.txt", "modified edit.txt", "modified keep.txt"}
	if got := paths(ch.Files); strings.Join(got, ",") != strings.Join(wantFiles, ",") {
		t.Errorf("changes = %v, want %v", got, wantFiles)
	}
	if strings.Join(ch.Conflicts, ",") != "both.txt" {
		t.Errorf("conflicts = %v", ch.Conflicts)
	}
	for _, f := range ch.Files {
		if f.Path == "edit.txt" {
			patch, err := c.Patch(t.Context(), f)
			if err != nil || !strings.Contains(patch, "-one\n+two\n") {
				t.Errorf("patch of edit.txt = %q, %v", patch, err)
			}
		}
	}
	if ch.Stat() != "6 files changed: 2 created, 1 deleted, 3 modified" {
		t.Errorf("stat = %q", ch.Stat())
	}
	res, err := c.Apply(t.Context(), ch, nil, checkpoint.Meta{Session: "s", Turn: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped["both.txt"] == "" || len(res.Files) != 5 {
		t.Errorf("applied %v, skipped %v", paths(res.Files), res.Skipped)
	}
	want := map[string]string{"keep.txt": "keep\n", "edit.txt": "two\n", "made/new.txt": "new\n", "both.txt": "mine\n", "inside": "-> keep.txt"}
	if got := files(t, fx.ws); !maps.Equal(got, want) {
		t.Errorf("the workspace holds %v, want %v", got, want)
	}
	if fi, err := os.Stat(filepath.Join(fx.ws, "keep.txt")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("keep.txt's mode was not applied: %v", err)
	}
	// Applied, they are no change any more; the conflict stays and Sync
	// does not overwrite either side.
	ch, err = c.Changes(t.Context())
	if err != nil || strings.Join(paths(ch.Files), ",") != "modified both.txt" {
		t.Errorf("changes after the apply = %v, %v", paths(ch.Files), err)
	}
	notices, err := c.Sync(t.Context())
	if err != nil || len(notices) != 1 || !strings.Contains(notices[0], "both.txt") {
		t.Errorf("Sync = %v, %v", notices, err)
	}
	if files(t, fx.copyDir)["both.txt"] != "sandbox\n" || files(t, fx.ws)["both.txt"] != "mine\n" {
		t.Error("a conflict was overwritten")
	}
}

func TestNothingThatMakesARepositoryOrLeavesTheWorkspaceIsApplied(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	outside := t.TempDir()
	write(t, fx.ws, map[string]string{"a.txt": "a\n"})
	c, _ := fx.open(t)
	write(t, fx.copyDir, map[string]string{
		"evil/HEAD":            "ref: refs/heads/main\n",
		"evil/objects/info/x":  "x\n",
		"evil/refs/heads/main": "0000000000000000000000000000000000000000\n",
		"evil/config":          "[core]\n\tfsmonitor = touch " + outside + "/marker\n",
		"wt/HEAD":              "ref: refs/heads/main\n",
		"wt/commondir":         "../evil\n",
		"up":                   "->../../etc",
		"abs":                  "->" + outside,
		"ok.txt":               "fine\n",
	})
	ch, err := c.Changes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"evil/HEAD", "evil/objects/info/x", "evil/refs/heads/main", "evil/config", "wt/HEAD", "wt/commondir", "up", "abs"} {
		if ch.Refused[p] == "" {
			t.Errorf("%s is not refused (refused: %v)", p, ch.Refused)
		}
	}
	if _, err := c.Apply(t.Context(), ch, nil, checkpoint.Meta{Session: "s", Turn: 1}); err != nil {
		t.Fatal(err)
	}
	got := files(t, fx.ws)
	if got["ok.txt"] != "fine\n" || len(got) != 2 {
		t.Errorf("the workspace holds %v", got)
	}

	// A hostile sandbox's manifest names paths inside .git: never fetched
	// into the workspace.
	fx.forge = func(args []string, stdin io.Reader, stdout io.Writer) int {
		switch args[0] {
		case "manifest":
			io.WriteString(stdout, "shiro-manifest - full\x00")
			for _, p := range []string{".git/hooks/post-checkout", "sub/.GIT/config", "a.txt"} {
				io.WriteString(stdout, "100755 "+copymode.BlobHash([]byte("#!/bin/sh\ntouch "+outside+"/m\n"))+" 24 "+p+"\x00")
			}
			return 0
		case "pack":
			return copymode.Main([]string{"pack", "--ws", fx.copyDir}, stdin, stdout, io.Discard)
		}
		return 1
	}
	write(t, fx.copyDir, map[string]string{".git/hooks/post-checkout": "#!/bin/sh\ntouch " + outside + "/m\n", "sub/.GIT/config": "#!/bin/sh\ntouch " + outside + "/m\n"})
	ch, err = c.Changes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(t.Context(), ch, nil, checkpoint.Meta{Session: "s", Turn: 2}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git", "sub"} {
		if _, err := os.Lstat(filepath.Join(fx.ws, p)); err == nil {
			t.Errorf("%s was written into the workspace", p)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("something ran: %v", entries)
	}
}

func TestRebaseAfterAnUndoMakesTheSandboxsVersionPendingAgain(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	write(t, fx.ws, map[string]string{"f.txt": "old\n"})
	c, _ := fx.open(t)
	write(t, fx.copyDir, map[string]string{"f.txt": "new\n"})
	ch, err := c.Changes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(t.Context(), ch, nil, checkpoint.Meta{Session: "s", Turn: 1}); err != nil {
		t.Fatal(err)
	}
	write(t, fx.ws, map[string]string{"f.txt": "old\n"}) // what an undo of the apply does
	if err := c.Rebase(t.Context(), []string{"f.txt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if files(t, fx.copyDir)["f.txt"] != "new\n" {
		t.Error("the undo was carried into the sandbox")
	}
	ch, err = c.Changes(t.Context())
	if err != nil || strings.Join(paths(ch.Files), ",") != "modified f.txt" {
		t.Errorf("changes after the undo = %v, %v", paths(ch.Files), err)
	}
}
