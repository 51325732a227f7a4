package checkpoint

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestTreesFromFilesAreTheScansTrees: a tree composed from a flat list of
// files is the one a scan of the same files records, and listing it gives
// the list back.
func TestTreesFromFilesAreTheScansTrees(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{})
	write(t, fx.ws, map[string]string{"a.txt": "alpha\n", "a-b/c.txt": "c\n", "a/b/c/d.txt": "deep\n", "z": "z\n"})
	if err := os.Chmod(filepath.Join(fx.ws, "z"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(fx.ws, "link")); err != nil {
		t.Fatal(err)
	}
	cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
	files, err := fx.store.Files(t.Context(), cp.Tree)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{"a.txt": 0o644, "a-b/c.txt": 0o644, "a/b/c/d.txt": 0o644, "z": 0o755, "link": fs.ModeSymlink}
	if len(files) != len(want) {
		t.Fatalf("files = %v", files)
	}
	for _, f := range files {
		if m, ok := want[f.Path]; !ok || m != f.Mode {
			t.Errorf("file %+v not expected", f)
		}
	}
	tree, err := fx.store.PutTree(files)
	if err != nil || tree != cp.Tree {
		t.Errorf("PutTree = %s, %v; the scan recorded %s", tree, err, cp.Tree)
	}
	// A changed list is another tree, whose blob reads back.
	h, err := fx.store.PutBlob([]byte("new content\n"))
	if err != nil {
		t.Fatal(err)
	}
	files[0].Hash = h
	other, err := fx.store.PutTree(files)
	if err != nil || other == cp.Tree {
		t.Fatalf("PutTree after a change = %s, %v", other, err)
	}
	chs, err := fx.store.Changes(t.Context(), cp, Checkpoint{Tree: other})
	if err != nil || len(chs) != 1 || chs[0].Path != files[0].Path || chs[0].Action != Modified {
		t.Errorf("changes = %+v, %v", chs, err)
	}
	if data, err := fx.store.Blob(h); err != nil || string(data) != "new content\n" {
		t.Errorf("Blob = %q, %v", data, err)
	}
	for _, bad := range [][]TreeFile{
		{{Path: "../x", Mode: 0o644, Hash: h}},
		{{Path: "a", Mode: 0o644, Hash: h}, {Path: "a/b", Mode: 0o644, Hash: h}},
	} {
		if _, err := fx.store.PutTree(bad); err == nil {
			t.Errorf("PutTree(%v) made a tree", bad)
		}
	}
}

// TestEditTreeIsPutTreeOfTheEditedList: editing a tree by paths gives the
// tree of the edited list, and Lookup reads single paths of it.
func TestEditTreeIsPutTreeOfTheEditedList(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{})
	h1, _ := fx.store.PutBlob([]byte("one\n"))
	h2, _ := fx.store.PutBlob([]byte("two\n"))
	base := []TreeFile{{Path: "a", Mode: 0o644, Hash: h1}, {Path: "d/x", Mode: 0o644, Hash: h1}, {Path: "d/e/y", Mode: 0o755, Hash: h1}, {Path: "z", Mode: fs.ModeSymlink, Hash: h2}}
	tree, err := fx.store.PutTree(base)
	if err != nil {
		t.Fatal(err)
	}
	edited, err := fx.store.EditTree(tree,
		[]TreeFile{{Path: "a", Mode: 0o755, Hash: h2}, {Path: "new/deep/f", Mode: 0o644, Hash: h2}, {Path: "z/now-a-dir", Mode: 0o644, Hash: h1}},
		[]string{"d/e/y", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := fx.store.PutTree([]TreeFile{{Path: "a", Mode: 0o755, Hash: h2}, {Path: "d/x", Mode: 0o644, Hash: h1}, {Path: "new/deep/f", Mode: 0o644, Hash: h2}, {Path: "z/now-a-dir", Mode: 0o644, Hash: h1}})
	if err != nil || edited != want {
		t.Fatalf("EditTree = %s, want %s (%v)", edited, want, err)
	}
	got, err := fx.store.Lookup(t.Context(), edited, []string{"a", "d/x", "d", "d/e/y", "new/deep/f", "nope/x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["a"].Hash != h2 || got["a"].Mode != 0o755 || got["d/x"].Hash != h1 || got["new/deep/f"].Hash != h2 {
		t.Errorf("Lookup = %v", got)
	}
	if empty, err := fx.store.EditTree(tree, nil, []string{"a", "d/x", "d/e/y", "z"}); err != nil || empty != "" {
		t.Errorf("removing everything = %q, %v", empty, err)
	}
}
