package checkpoint

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/internal/dirstate"
	"github.com/shiroagent/shiro/internal/hostwrite"
)

// state describes a tree on disk: path -> "mode content" (a symlink's
// target for a link), directories as "dir".
func state(t *testing.T, dir string) map[string]string {
	t.Helper()
	out, err := dirstate.Describe(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type fixture struct {
	ws    string
	store *Store
	now   time.Time
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	fx := &fixture{ws: t.TempDir(), now: time.Now()}
	root, err := os.OpenRoot(fx.ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	if opts.Now == nil {
		opts.Now = func() time.Time { return fx.now }
	}
	gate, err := hostwrite.New(root, fx.ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Close() })
	fx.store, err = Open(filepath.Join(t.TempDir(), "store"), root, gate, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.store.Close() })
	return fx
}

func (fx *fixture) record(t *testing.T, m Meta) Checkpoint {
	t.Helper()
	fx.now = fx.now.Add(time.Second)
	c, err := fx.store.Record(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sh(t *testing.T, dir string, steps ...func(string) error) {
	t.Helper()
	for _, s := range steps {
		if err := s(dir); err != nil {
			t.Fatal(err)
		}
	}
}

func TestUndoPutsEverythingBack(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{})
	ws := fx.ws
	write(t, ws, map[string]string{
		"a.txt": "alpha\n", "b.txt": "beta\n", "c.txt": "gamma\n",
		"src/x.go": "package x\n", "src/deep/y.go": "package y\n",
		".gitignore": "ignored.log\nbuild/\n", "ignored.log": "keep me\n",
	})
	sh(t, ws,
		func(d string) error { return os.Chmod(filepath.Join(d, "b.txt"), 0o755) },
		func(d string) error { return os.Symlink("a.txt", filepath.Join(d, "link")) },
		func(d string) error { return os.Symlink("src", filepath.Join(d, "srclink")) },
		func(d string) error { return os.Symlink("nowhere", filepath.Join(d, "dangling")) },
	)
	before := state(t, ws)
	cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})

	// The turn: edits, a deleted tree, new files and directories, modes,
	// symlinks changed, an ignored file changed.
	write(t, ws, map[string]string{"a.txt": "ALPHA\n", "new": "", "made/dir/n.txt": "n\n", "ignored.log": "changed\n", "build/out.o": "obj"})
	sh(t, ws,
		func(d string) error { return os.RemoveAll(filepath.Join(d, "src")) },
		func(d string) error { return os.Chmod(filepath.Join(d, "c.txt"), 0o755) },
		func(d string) error { return os.Chmod(filepath.Join(d, "b.txt"), 0o644) },
		func(d string) error { return os.Remove(filepath.Join(d, "link")) },
		func(d string) error { return os.Symlink("b.txt", filepath.Join(d, "link")) },
		func(d string) error { return os.Remove(filepath.Join(d, "dangling")) },
	)
	end := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindEnd})

	plan, err := fx.store.Plan(t.Context(), cp, &end)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.UserChanged) != 0 {
		t.Errorf("user changed %v, want none", plan.UserChanged)
	}
	done, err := fx.store.Apply(t.Context(), plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) == 0 {
		t.Fatal("Apply changed nothing")
	}
	after := state(t, ws)
	// Ignored files are neither recorded nor touched.
	want := maps(before)
	want["ignored.log"] = "-rw-r--r-- changed\n"
	want["build"] = "dir"
	want["build/out.o"] = "-rw-r--r-- obj"
	for k, v := range want {
		if after[k] != v {
			t.Errorf("%s: %q after undo, want %q", k, after[k], v)
		}
	}
	for k := range after {
		if _, ok := want[k]; !ok {
			t.Errorf("%s left after undo (%q)", k, after[k])
		}
	}
	// The undo is undoable in turn.
	list, _ := fx.store.List("s")
	if last := list[len(list)-1]; last.Kind != KindUndo {
		t.Errorf("last checkpoint is %s, want undo", last.Kind)
	}
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestLargeFilesAreNamedNotRecorded(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{MaxFileSize: 10})
	write(t, fx.ws, map[string]string{"small": "tiny", "big": "0123456789abcdef"})
	cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
	if _, ok := cp.Skipped["big"]; !ok {
		t.Fatalf("skipped %v, want big", cp.Skipped)
	}
	write(t, fx.ws, map[string]string{"big": "0123456789ABCDEFGH", "huge": "0123456789abcdefghij", "small": "TINY"})
	plan, err := fx.store.Plan(t.Context(), cp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.Unrestorable, []string{"big", "huge"}) {
		t.Errorf("unrestorable %v, want [big huge]", plan.Unrestorable)
	}
	if _, err := fx.store.Apply(t.Context(), plan, nil); err != nil {
		t.Fatal(err)
	}
	got := state(t, fx.ws)
	if got["small"] != "-rw-r--r-- tiny" || got["huge"] == "" || got["big"] != "-rw-r--r-- 0123456789ABCDEFGH" {
		t.Errorf("after undo: %v (small back, big and huge left alone)", got)
	}
}

func TestStatIndexSkipsUnchangedFiles(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{})
	fx.store.noEvents = true // every scan walks, as a new process's first does
	write(t, fx.ws, map[string]string{"f": "content"})
	old := fx.now.Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(fx.ws, "f"), old, old); err != nil {
		t.Fatal(err)
	}
	first := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
	// Same size, mtime, ctime, inode: poison the recorded hash and see it
	// reused, which proves the file was not read.
	e := fx.store.index.Files["f"]
	poisoned := e
	poisoned.Hash[0] ^= 0xff
	fx.store.index.Files["f"] = poisoned
	second := fx.record(t, Meta{Session: "s", Turn: 2, Kind: KindTurn})
	if first.Tree == second.Tree {
		t.Fatal("the file was hashed again although its stat data did not change")
	}
	// A change of content with the same size is seen through mtime.
	fx.store.index.Files["f"] = e
	write(t, fx.ws, map[string]string{"f": "CONTENT"})
	third := fx.record(t, Meta{Session: "s", Turn: 3, Kind: KindTurn})
	if third.Tree == first.Tree {
		t.Fatal("a changed file was not hashed again")
	}
}

func TestUserChangesAreNamed(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{})
	write(t, fx.ws, map[string]string{"a": "1", "b": "1"})
	cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
	write(t, fx.ws, map[string]string{"a": "2", "b": "2"})
	end := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindEnd})
	write(t, fx.ws, map[string]string{"b": "user", "c": "user's new file"})
	plan, err := fx.store.Plan(t.Context(), cp, &end)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plan.UserChanged, []string{"b", "c"}) {
		t.Fatalf("user changed %v, want [b c]", plan.UserChanged)
	}
	if _, err := fx.store.Apply(t.Context(), plan, map[string]bool{"b": true, "c": true}); err != nil {
		t.Fatal(err)
	}
	got := state(t, fx.ws)
	if got["a"] != "-rw-r--r-- 1" || got["b"] != "-rw-r--r-- user" || got["c"] == "" {
		t.Errorf("after undo keeping the user's files: %v", got)
	}
}

func TestPatchAndAttribution(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{})
	write(t, fx.ws, map[string]string{"a.txt": "one\ntwo\nthree\n", "gone": "bye\n"})
	turn := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
	call1 := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindCall, Tool: "edit_file"})
	write(t, fx.ws, map[string]string{"a.txt": "one\nTWO\nthree\n"})
	call2 := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindCall, Tool: "bash"})
	sh(t, fx.ws, func(d string) error { return os.Remove(filepath.Join(d, "gone")) })
	end := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindEnd})
	chs, err := fx.store.Changes(t.Context(), turn, end)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := fx.store.List("s")
	fx.store.Attribute(t.Context(), Turn(list, "s", 1), chs)
	if len(chs) != 2 || chs[0].Path != "a.txt" || chs[0].Action != Modified || chs[1].Path != "gone" || chs[1].Action != Deleted {
		t.Fatalf("changes %+v", chs)
	}
	if !slices.Equal(chs[0].Tools, []string{"edit_file"}) || !slices.Equal(chs[1].Tools, []string{"bash"}) {
		t.Errorf("tools %v and %v, want edit_file and bash", chs[0].Tools, chs[1].Tools)
	}
	patch, err := fx.store.Patch(t.Context(), chs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
	if patch != want {
		t.Errorf("patch:\n%s\nwant:\n%s", patch, want)
	}
	patch, _ = fx.store.Patch(t.Context(), chs[1])
	if !strings.Contains(patch, "+++ /dev/null") || !strings.Contains(patch, "-bye") {
		t.Errorf("deletion patch:\n%s", patch)
	}
	_ = call1
	_ = call2
}

func TestPruneKeepsTheLastTurnsAndSweeps(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{KeepTurns: 2})
	var first Checkpoint
	for i := 1; i <= 3; i++ {
		write(t, fx.ws, map[string]string{"f": strings.Repeat("x", i)})
		c := fx.record(t, Meta{Session: "s", Turn: i, Kind: KindTurn})
		if i == 1 {
			first = c
		}
	}
	list, _ := fx.store.List("")
	if len(list) != 2 || list[0].Turn != 2 {
		t.Fatalf("after 3 turns with KeepTurns 2: %+v", list)
	}
	blob := fx.store.index.Files["f"].Hash // the live content stays
	tree, err := fx.store.tree(first.Tree)
	if err != nil {
		t.Fatal(err)
	}
	oldBlob := tree.Entries[0].Hash
	fx.now = fx.now.Add(2 * sweepGrace)
	// Make the old objects look old to the sweep.
	objs := filepath.Join(fx.store.Dir(), "objects")
	past := time.Now().Add(-2 * sweepGrace)
	filepath.WalkDir(objs, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			os.Chtimes(p, past, past)
		}
		return nil
	})
	if err := fx.store.Close(); err != nil {
		t.Fatal(err)
	}
	if fx.store.objs.HasEncodedObject(oldBlob) == nil {
		t.Error("the pruned turn's content is still stored")
	}
	if fx.store.objs.HasEncodedObject(blob) != nil {
		t.Error("the live content was swept")
	}
	// Age prunes too.
	fx.now = fx.now.Add(DefaultKeepAge + time.Hour)
	fx.record(t, Meta{Session: "s", Turn: 4, Kind: KindTurn})
	list, _ = fx.store.List("")
	if len(list) != 1 || list[0].Turn != 4 {
		t.Errorf("after a week: %+v", list)
	}
	if n, err := Size(filepath.Dir(fx.store.Dir())); err != nil || n == 0 {
		t.Errorf("Size = %d, %v", n, err)
	}
}

// TestUndoNeverWritesThroughAPlantedSymlink: a turn replaces a directory
// with a symlink to a place outside the workspace (as a command in the
// sandbox can); undoing the turn puts files back inside the workspace
// only, and the place outside is left as it was.
func TestUndoNeverWritesThroughAPlantedSymlink(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{})
	outside := t.TempDir()
	write(t, outside, map[string]string{"keep": "host file\n"})
	hostBefore := state(t, outside)
	write(t, fx.ws, map[string]string{"src/x.go": "package x\n", "a.txt": "alpha\n"})
	cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})

	sh(t, fx.ws,
		func(d string) error { return os.RemoveAll(filepath.Join(d, "src")) },
		func(d string) error { return os.Symlink(outside, filepath.Join(d, "src")) },
		func(d string) error { return os.Remove(filepath.Join(d, "a.txt")) },
		func(d string) error { return os.Symlink(filepath.Join(outside, "keep"), filepath.Join(d, "a.txt")) },
	)
	end := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindEnd})
	plan, err := fx.store.Plan(t.Context(), cp, &end)
	if err != nil {
		t.Fatal(err)
	}
	_, applyErr := fx.store.Apply(t.Context(), plan, nil)
	if got := state(t, outside); fmt.Sprint(got) != fmt.Sprint(hostBefore) {
		t.Errorf("the undo changed a directory outside the workspace (apply error %v):\n got %v\nwant %v", applyErr, got, hostBefore)
	}
	if applyErr == nil {
		if got := state(t, fx.ws); got["src/x.go"] != "-rw-r--r-- package x\n" || got["a.txt"] != "-rw-r--r-- alpha\n" {
			t.Errorf("the undo did not put the files back in the workspace: %v", got)
		}
	}
}
