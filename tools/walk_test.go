package tools

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func TestWalk(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		opts  WalkOptions
		want  []string // in walk order
	}{
		{"posix relative paths, breadth first, names in byte order",
			map[string]string{"b/c/d.txt": "", "a.txt": "", "b/a.txt": "", "B.txt": "", "a/z.txt": ""},
			WalkOptions{}, []string{"B.txt", "a.txt", "a/z.txt", "b/a.txt", "b/c/d.txt"}},
		{".git and node_modules are always skipped",
			map[string]string{".git/config": "", "node_modules/x/i.js": "", "a/node_modules/y.js": "", "a/.git": "", "k.txt": ""},
			WalkOptions{IncludeIgnored: true}, []string{"k.txt"}},
		{"plain rule", map[string]string{".gitignore": "secret.txt\n", "secret.txt": "", "a/secret.txt": "", "ok.txt": ""},
			WalkOptions{}, []string{".gitignore", "ok.txt"}},
		{"directory rule matches directories only", map[string]string{".gitignore": "out/\n", "out/x": "", "a/out/y": "", "b/out": ""},
			WalkOptions{}, []string{".gitignore", "b/out"}},
		{"unanchored name at any depth", map[string]string{".gitignore": "*.log\n", "a.log": "", "x/y/z.log": "", "x/keep.txt": ""},
			WalkOptions{}, []string{".gitignore", "x/keep.txt"}},
		{"a leading slash anchors", map[string]string{".gitignore": "/top.txt\n", "top.txt": "", "sub/top.txt": ""},
			WalkOptions{}, []string{".gitignore", "sub/top.txt"}},
		{"a middle slash anchors", map[string]string{".gitignore": "a/b.txt\n", "a/b.txt": "", "x/a/b.txt": ""},
			WalkOptions{}, []string{".gitignore", "x/a/b.txt"}},
		{"negation re-includes; last match wins", map[string]string{".gitignore": "*.log\n!keep.log\n", "a.log": "", "keep.log": ""},
			WalkOptions{}, []string{".gitignore", "keep.log"}},
		{"negation cannot reach into an ignored directory", map[string]string{".gitignore": "d/\n!d/keep.txt\n", "d/keep.txt": ""},
			WalkOptions{}, []string{".gitignore"}},
		{"** spans directories", map[string]string{".gitignore": "a/**/z.txt\n", "a/z.txt": "", "a/b/c/z.txt": "", "a/b/y.txt": ""},
			WalkOptions{}, []string{".gitignore", "a/b/y.txt"}},
		{"nested .gitignore is scoped to its directory", map[string]string{"a/.gitignore": "x.txt\n/y.txt\n", "a/x.txt": "", "a/b/x.txt": "", "a/b/y.txt": "", "x.txt": "", "c/x.txt": ""},
			WalkOptions{}, []string{"x.txt", "a/.gitignore", "c/x.txt", "a/b/y.txt"}},
		{"a nested file overrides its parent", map[string]string{".gitignore": "*.gen\n", "a/.gitignore": "!*.gen\n", "x.gen": "", "a/y.gen": ""},
			WalkOptions{}, []string{".gitignore", "a/.gitignore", "a/y.gen"}},
		{".shiroignore is honoured and read after .gitignore", map[string]string{".gitignore": "*.tmp\n", ".shiroignore": "!keep.tmp\nfixtures/\n", "a.tmp": "", "keep.tmp": "", "fixtures/big.json": ""},
			WalkOptions{}, []string{".gitignore", ".shiroignore", "keep.tmp"}},
		{".git/info/exclude applies, below every .gitignore", map[string]string{".git/info/exclude": "*.bak\nsecret\n", ".gitignore": "!keep.bak\n", "a.bak": "", "keep.bak": "", "d/secret": ""},
			WalkOptions{}, []string{".gitignore", "keep.bak"}},
		{"comments, blank lines and trailing spaces", map[string]string{".gitignore": "# *.txt\n\n   \nx.txt   \n\\#y.txt\n", "a.txt": "", "x.txt": "", "#y.txt": ""},
			WalkOptions{}, []string{".gitignore", "a.txt"}},
		{"includeIgnored returns everything but .git and node_modules", map[string]string{".gitignore": "*\n", "a.txt": "", "d/b.txt": "", ".git/HEAD": ""},
			WalkOptions{IncludeIgnored: true}, []string{".gitignore", "a.txt", "d/b.txt"}},
		{"limit stops early", map[string]string{"a": "", "b": "", "c/d": "", "e": ""},
			WalkOptions{Limit: 2}, []string{"a", "b"}},
		{"a subdirectory with its ancestors' rules", map[string]string{".gitignore": "*.log\n", "a/.gitignore": "/b/skip.txt\n", "a/b/x.log": "", "a/b/skip.txt": "", "a/b/ok.txt": "", "a/c.txt": ""},
			WalkOptions{Dir: "a/b"}, []string{"a/b/ok.txt"}},
		{"a subdirectory that is itself ignored is walked", map[string]string{".gitignore": "build/\n*.map\n", "build/out.js": "", "build/out.js.map": ""},
			WalkOptions{Dir: "./build/"}, []string{"build/out.js"}},
		{"node_modules walked directly", map[string]string{"node_modules/m/i.js": "", "node_modules/m/node_modules/n.js": ""},
			WalkOptions{Dir: "node_modules"}, []string{"node_modules/m/i.js"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, tt.files)
			for _, slow := range []bool{false, true} {
				if got := walkAll(t, env.Root, tt.opts, slow); !slices.Equal(got, tt.want) {
					t.Errorf("slow=%v: got %q\n want %q", slow, got, tt.want)
				}
			}
		})
	}
}

func TestWalkSymlinksAndSpecialFiles(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{"real/a.txt": "", "f.txt": "", ".gitignore": "flink/\n"})
	ws := env.Workspace
	for _, l := range []struct{ target, name string }{
		{"real", "dlink"},       // to a directory: a directory, not entered
		{"f.txt", "flink"},      // to a file: a file, so the "flink/" rule does not apply
		{"/etc", "outside"},     // to a directory outside: never entered
		{"missing", "dangling"}, // dangling: yielded like git does
	} {
		if err := os.Symlink(l.target, filepath.Join(ws, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	var modes []fs.FileMode
	err := Walk(t.Context(), env.Root, WalkOptions{}, func(p string, m fs.FileMode) error {
		got = append(got, p)
		modes = append(modes, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".gitignore", "dangling", "f.txt", "flink", "outside", "real/a.txt"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if i := slices.Index(got, "flink"); i < 0 || modes[i] != fs.ModeSymlink {
		t.Errorf("flink mode = %v", modes)
	}

}

func TestWalkSkipsUnreadableDirectories(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{"a/x.txt": "", "b/y.txt": "", "b/c/z.txt": "", "d.txt": "", "e/w.txt": "", "e/f/v.txt": ""})
	var got []string
	err := walk(t.Context(), env.Root, WalkOptions{}, func(p string, _ fs.FileMode, _ func() (FileStat, error)) error {
		got = append(got, p)
		return nil
	}, walkConfig{failOpen: func(rel string) error {
		if rel == "b" {
			return &os.PathError{Op: "open", Path: rel, Err: syscall.EACCES}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"d.txt", "a/x.txt", "e/w.txt", "e/f/v.txt"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if !slices.Contains(walkAll(t, env.Root, WalkOptions{}, false), "b/c/z.txt") {
		t.Error("the hook leaked into other walks")
	}
}

func TestWalkStops(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{"a": "", "b": "", "c": ""})
	boom := errors.New("boom")
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		opts    WalkOptions
		fn      func(n int) error
		wantErr error
		wantN   int
	}{
		{"fs.SkipAll stops without an error", t.Context(), WalkOptions{}, func(n int) error {
			if n == 2 {
				return fs.SkipAll
			}
			return nil
		}, nil, 2},
		{"another error stops and is returned", t.Context(), WalkOptions{}, func(int) error { return boom }, boom, 1},
		{"a cancelled context stops before any file", cancelled, WalkOptions{}, func(int) error { return nil }, context.Canceled, 0},
		{"a missing directory is an error", t.Context(), WalkOptions{Dir: "nope"}, func(int) error { return nil }, fs.ErrNotExist, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := 0
			err := Walk(tt.ctx, env.Root, tt.opts, func(string, fs.FileMode) error {
				n++
				return tt.fn(n)
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) || n != tt.wantN {
				t.Errorf("err = %v, n = %d; want %v, %d", err, n, tt.wantErr, tt.wantN)
			}
		})
	}
}

func TestExcluded(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{
		".gitignore":   "build/\n",
		"a/.gitignore": "gen/\n",
		"build/x/y":    "", "a/gen/z": "", "a/src/w": "", "node_modules/m/i": "",
	})
	tests := []struct {
		dir            string
		includeIgnored bool
		want           bool
	}{
		{"a/src", false, false},
		{"build", false, true},
		{"build/x", false, true},
		{"a/gen", false, true},
		{"a/gen", true, false},
		{"node_modules/m", true, true},
		{"", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			t.Parallel()
			if got, err := Excluded(t.Context(), env.Root, tt.dir, tt.includeIgnored); err != nil || got != tt.want {
				t.Errorf("Excluded(%q, %v) = %v", tt.dir, tt.includeIgnored, got)
			}
		})
	}
}

func TestWalkStat(t *testing.T) {
	t.Parallel()
	for _, slow := range []bool{false, true} {
		env := newTestEnv(t, map[string]string{"a.txt": "hello", "d/b.sh": "#!/bin/sh\n", "d/sub/c": ""})
		ws := env.Workspace
		if err := os.Chmod(filepath.Join(ws, "d/b.sh"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("d", filepath.Join(ws, "dirlink")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("a.txt", filepath.Join(ws, "filelink")); err != nil {
			t.Fatal(err)
		}
		got := map[string]FileStat{}
		err := walk(t.Context(), env.Root, WalkOptions{DirLinks: true}, func(p string, _ fs.FileMode, stat func() (FileStat, error)) error {
			st, err := stat()
			got[p] = st
			return err
		}, walkConfig{slow: slow})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"a.txt", "d/b.sh", "d/sub/c", "dirlink", "filelink"}
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, want) {
			t.Fatalf("slow=%v: walked %v, want %v (a symlink to a directory is yielded with DirLinks)", slow, keys, want)
		}
		for _, p := range want {
			fi, err := os.Lstat(filepath.Join(ws, p))
			if err != nil {
				t.Fatal(err)
			}
			sys := fi.Sys().(*syscall.Stat_t)
			st := got[p]
			if st.Mode != fi.Mode() || st.Size != fi.Size() || st.MTime != fi.ModTime().UnixNano() || st.Ino != sys.Ino {
				t.Errorf("slow=%v: %s: stat %+v, lstat says mode %v size %d mtime %d ino %d", slow, p, st, fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), sys.Ino)
			}
		}
	}
}

// TestWalkEnterDir: EnterDir is asked about each directory the walk would
// enter (listed, not ignored, not the start), and false leaves it unread.
func TestWalkEnterDir(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{
		".gitignore": "out/\n", "a/x": "", "a/b/y": "", "c/z": "", "out/o": "", "top": "",
	})
	var asked []string
	opts := WalkOptions{EnterDir: func(rel string) bool {
		asked = append(asked, rel)
		return rel != "a"
	}}
	for _, slow := range []bool{false, true} {
		asked = nil
		got := walkAll(t, env.Root, opts, slow)
		if want := []string{".gitignore", "top", "c/z"}; !slices.Equal(got, want) {
			t.Errorf("slow=%v: got %q, want %q", slow, got, want)
		}
		if want := []string{"a", "c"}; !slices.Equal(asked, want) {
			t.Errorf("slow=%v: EnterDir asked about %q, want %q", slow, asked, want)
		}
	}
}
