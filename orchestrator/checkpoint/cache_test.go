package checkpoint

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/shiroagent/shiro/tools"
)

// fullTree is the tree a new store (a new process: no events, no stat
// index) records for the workspace ws.
func fullTree(t *testing.T, ws string, opts ...Options) string {
	t.Helper()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	st, err := Open(filepath.Join(t.TempDir(), "store"), root, nil, o) // it only reads
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.noEvents = true
	c, err := st.Current(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c.Tree
}

func mtime(t *testing.T, p string) time.Time {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

// TestIncrementalScansSeeEveryChange changes the workspace in the ways a
// stat cache or an event can miss, and checks after each that the
// checkpoint is the one a full scan by a new process takes: with events
// (the scan reads only what changed) and without (every scan walks, the
// stat index spares the reading).
func TestIncrementalScansSeeEveryChange(t *testing.T) {
	for _, mode := range []struct {
		name     string
		noEvents bool
	}{{"events", false}, {"stat index", true}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t, Options{MaxFileSize: 64})
			fx.store.noEvents = mode.noEvents
			ws := fx.ws
			write(t, ws, map[string]string{
				"same.txt": "aaaa", "inode.txt": "cccc", "tolink.txt": "link me",
				"mode.sh": "echo\n", "gone/a": "1", "gone/deep/b": "2", "keep/x": "x",
				"dirfile/y": "y", "moved/z": "z", "big": "small", "ign/i.log": "log",
			})
			// Old mtimes, as files the user had for a while.
			old := time.Now().Add(-time.Hour).Truncate(time.Second)
			filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					os.Chtimes(p, old, old)
				}
				return nil
			})
			fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
			if !mode.noEvents && runtime.GOOS == "linux" && (fx.store.scan == nil || fx.store.scan.ev == nil) {
				t.Fatal("the store watches nothing: the scans below would all be full ones")
			}
			steps := []struct {
				name string
				do   func(string) error
			}{
				{"same size, content changed, mtime put back", func(d string) error {
					p := filepath.Join(d, "same.txt")
					if err := os.WriteFile(p, []byte("bbbb"), 0o644); err != nil {
						return err
					}
					return os.Chtimes(p, old, old)
				}},
				{"same size and mtime, another inode", func(d string) error {
					p := filepath.Join(d, "inode.txt")
					tmp := filepath.Join(d, "inode.tmp")
					if err := os.WriteFile(tmp, []byte("dddd"), 0o644); err != nil {
						return err
					}
					if err := os.Chtimes(tmp, old, old); err != nil {
						return err
					}
					return os.Rename(tmp, p)
				}},
				{"file replaced by a symlink", func(d string) error {
					p := filepath.Join(d, "tolink.txt")
					if err := os.Remove(p); err != nil {
						return err
					}
					return os.Symlink("same.txt", p)
				}},
				{"mode only", func(d string) error { return os.Chmod(filepath.Join(d, "mode.sh"), 0o755) }},
				{"deleted directory", func(d string) error { return os.RemoveAll(filepath.Join(d, "gone")) }},
				{"new nested directory", func(d string) error {
					write(t, d, map[string]string{"new/a/b/c.txt": "c", "keep/new.txt": "n"})
					return nil
				}},
				{"directory replaced by a file", func(d string) error {
					if err := os.RemoveAll(filepath.Join(d, "dirfile")); err != nil {
						return err
					}
					return os.WriteFile(filepath.Join(d, "dirfile"), []byte("now a file"), 0o644)
				}},
				{"directory moved", func(d string) error {
					return os.Rename(filepath.Join(d, "moved"), filepath.Join(d, "keep", "moved"))
				}},
				{"file grown past the size limit", func(d string) error {
					return os.WriteFile(filepath.Join(d, "big"), make([]byte, 100), 0o644)
				}},
				{"ignore file added", func(d string) error {
					return os.WriteFile(filepath.Join(d, ".gitignore"), []byte("*.log\nkeep/\n"), 0o644)
				}},
				{"ignore file changed", func(d string) error {
					return os.WriteFile(filepath.Join(d, ".gitignore"), []byte("*.txt\n"), 0o644)
				}},
				{"ignore file removed", func(d string) error { return os.Remove(filepath.Join(d, ".gitignore")) }},
				{"symlink replaced by a directory", func(d string) error {
					p := filepath.Join(d, "tolink.txt")
					if err := os.Remove(p); err != nil {
						return err
					}
					write(t, d, map[string]string{"tolink.txt/inner": "i"})
					return nil
				}},
			}
			prev := ""
			for _, step := range steps {
				if err := step.do(ws); err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				c := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindCall})
				if want := fullTree(t, ws, Options{MaxFileSize: 64}); c.Tree != want {
					chs, _ := fx.store.changes(t.Context(), c.Tree, want)
					t.Errorf("%s: the checkpoint differs from a full scan: %+v", step.name, chs)
				}
				if c.Tree == prev {
					t.Errorf("%s: the checkpoint did not change", step.name)
				}
				prev = c.Tree
				if !mode.noEvents && runtime.GOOS == "linux" && fx.store.scan.ev == nil {
					t.Fatalf("%s: the store stopped watching", step.name)
				}
			}
		})
	}
}

func toStat(e entry) tools.FileStat {
	return tools.FileStat{Mode: e.Mode, Size: e.Size, MTime: e.MTime, CTime: e.CTime, Ino: e.Ino, Dev: e.Dev}
}

// TestRacyFilesAreReadAgain: a file whose mtime is within the racy window
// of the scan that read it is read again by the next scan even though its
// stat data did not change, since a write in the same clock tick keeps
// the mtime; and a same-size change whose mtime is put back (touch -d) in
// that window is recorded, by content or by a new inode.
func TestRacyFilesAreReadAgain(t *testing.T) {
	t.Parallel()
	m := time.Unix(1_700_000_000, 0)
	e := entry{Size: 4, MTime: m.UnixNano(), CTime: m.UnixNano(), Ino: 7, Dev: 1}
	e.At = m.Add(racyWindow / 2).UnixNano()
	if e.matches(toStat(e)) {
		t.Error("an entry recorded in the mtime's racy window is trusted")
	}
	e.At = m.Add(time.Second).UnixNano()
	if !e.matches(toStat(e)) {
		t.Error("an entry recorded well after its mtime is not trusted")
	}

	// The stat index alone (no events): poison a racy entry's hash; scans
	// inside the window read the file again, the first one after it trusts
	// the entry.
	fx := newFixture(t, Options{})
	fx.store.noEvents = true
	write(t, fx.ws, map[string]string{"f": "aaaa"})
	mt := mtime(t, filepath.Join(fx.ws, "f"))
	record := func(at time.Duration) Checkpoint {
		t.Helper()
		fx.now = mt.Add(at)
		c, err := fx.store.Record(t.Context(), Meta{Session: "s", Turn: 1, Kind: KindCall})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	poison := func() {
		e := fx.store.index.Files["f"]
		e.Hash = plumbing.ComputeHash(plumbing.BlobObject, []byte("poison"))
		fx.store.index.Files["f"] = e
	}
	good := record(5 * time.Millisecond)
	poison()
	if c := record(10 * time.Millisecond); c.Tree != good.Tree {
		t.Error("a racy index entry was trusted")
	}
	poison()
	if c := record(time.Second); c.Tree != good.Tree {
		t.Error("a racy index entry was trusted (the scan one second later)")
	}
	poison()
	if c := record(2 * time.Second); c.Tree == good.Tree {
		t.Error("an index entry recorded past the racy window was not trusted (the test cannot see the rule)")
	}

	// Same size, the mtime put back, inside the window: by content and by
	// inode, with events and without.
	for _, noEvents := range []bool{false, true} {
		for _, how := range []string{"content", "inode"} {
			fx := newFixture(t, Options{})
			fx.store.noEvents = noEvents
			p := filepath.Join(fx.ws, "f")
			write(t, fx.ws, map[string]string{"f": "aaaa"})
			mt := mtime(t, p)
			fx.now = mt.Add(time.Millisecond)
			first, err := fx.store.Record(t.Context(), Meta{Session: "s", Turn: 1, Kind: KindTurn})
			if err != nil {
				t.Fatal(err)
			}
			if how == "content" {
				write(t, fx.ws, map[string]string{"f": "bbbb"})
			} else {
				write(t, fx.ws, map[string]string{"g": "bbbb"})
				if err := os.Rename(filepath.Join(fx.ws, "g"), p); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chtimes(p, mt, mt); err != nil {
				t.Fatal(err)
			}
			fx.now = mt.Add(2 * time.Millisecond)
			second, err := fx.store.Record(t.Context(), Meta{Session: "s", Turn: 1, Kind: KindCall})
			if err != nil {
				t.Fatal(err)
			}
			if second.Tree == first.Tree || second.Tree != fullTree(t, fx.ws) {
				t.Errorf("noEvents=%v, new %s: a same-size change with the mtime put back was not recorded", noEvents, how)
			}
		}
	}
}

// TestObjectsReadByGoGit: the objects the store writes itself are git
// loose objects go-git reads.
func TestObjectsReadByGoGit(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{})
	write(t, fx.ws, map[string]string{"a/b.txt": "hello\n", "c": "world"})
	c := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
	tree, err := object.GetTree(fx.store.objs, plumbing.NewHash(c.Tree))
	if err != nil {
		t.Fatal(err)
	}
	f, err := tree.File("a/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := f.Contents(); s != "hello\n" {
		t.Errorf("a/b.txt through go-git: %q", s)
	}
}
