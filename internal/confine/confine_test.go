package confine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// hostile is a tree beside a secret file, with every kind of entry a
// repository or the sandbox can plant.
func hostile(t *testing.T) (Tree, string) {
	t.Helper()
	outside := t.TempDir()
	secret := filepath.Join(outside, "id_rsa")
	if err := os.WriteFile(secret, []byte("SECRET-KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, data string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	write("plain.md", "plain")
	write("docs/real.md", "real")
	link("docs/real.md", "inside.md")
	link("inside.md", "inside-chain.md")
	link(secret, "outside.md")
	link("/proc/self/environ", "environ.md")
	rel, err := filepath.Rel(dir, secret)
	if err != nil {
		t.Fatal(err)
	}
	link(rel, "climb.md")
	link("hop2.md", "hop1.md")
	link("climb.md", "hop2.md")
	link(filepath.Join(dir, "docs", "real.md"), "absolute-inside.md")
	link(outside, "outdir")
	link("loop-b.md", "loop-a.md")
	link("loop-a.md", "loop-b.md")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	link("fifo.md", "to-fifo.md")
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return Tree{Root: root, Name: "the workspace"}, outside
}

func TestTreeReadFile(t *testing.T) {
	t.Parallel()
	tree, _ := hostile(t)
	tests := []struct {
		name, path string
		want       string // the content read
		refusal    string // or the refusal's message
		missing    bool
	}{
		{name: "a regular file", path: "plain.md", want: "plain"},
		{name: "a symlink that stays inside is followed", path: "inside.md", want: "real"},
		{name: "a chain that stays inside is followed", path: "inside-chain.md", want: "real"},
		{name: "a symlink to a file outside", path: "outside.md", refusal: "outside.md is a symlink that leaves the workspace; not read"},
		{name: "a symlink to /proc/self/environ", path: "environ.md", refusal: "environ.md is a symlink that leaves the workspace; not read"},
		{name: "a relative symlink that climbs out", path: "climb.md", refusal: "climb.md is a symlink that leaves the workspace; not read"},
		{name: "a chain that ends outside", path: "hop1.md", refusal: "hop1.md is a symlink that leaves the workspace; not read"},
		{name: "a file behind a symlinked directory", path: "outdir/id_rsa", refusal: "outdir/id_rsa is behind a symlink that leaves the workspace; not read"},
		{name: "an absolute symlink to a file inside", path: "absolute-inside.md", refusal: "absolute-inside.md is an absolute symlink (only relative links that stay inside the workspace are followed); not read"},
		{name: "a FIFO does not block", path: "fifo.md", refusal: "fifo.md is a FIFO; not read"},
		{name: "a symlink to a FIFO does not block", path: "to-fifo.md", refusal: "to-fifo.md is a FIFO; not read"},
		{name: "a directory", path: "docs", refusal: "docs is a directory; not read"},
		{name: "a symlink loop", path: "loop-a.md", refusal: "loop-a.md is a symlink loop; not read"},
		{name: "a missing file", path: "nope.md", missing: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data, err := tree.ReadFile(tt.path, 1<<20)
			switch {
			case tt.missing:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("got %q, %v; want a missing file", data, err)
				}
			case tt.refusal != "":
				r, ok := AsRefusal(err)
				if !ok || r.Error() != tt.refusal {
					t.Fatalf("got %q, %v; want the refusal %q", data, err, tt.refusal)
				}
			case err != nil || string(data) != tt.want:
				t.Fatalf("got %q, %v; want %q", data, err, tt.want)
			}
		})
	}
}

func TestTreeReadFileIsCapped(t *testing.T) {
	t.Parallel()
	tree, _ := hostile(t)
	data, err := tree.ReadFile("plain.md", 3)
	if err != nil || string(data) != "pla" {
		t.Fatalf("got %q, %v", data, err)
	}
}

func TestTreeFS(t *testing.T) {
	t.Parallel()
	tree, _ := hostile(t)
	fsys := tree.FS(".", 1<<20)
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil || len(ents) == 0 || ents[0].Name() != "absolute-inside.md" {
		t.Fatalf("ReadDir: %v, %v", ents, err)
	}
	if data, err := fs.ReadFile(fsys, "inside.md"); err != nil || string(data) != "real" {
		t.Errorf("inside.md: %q, %v", data, err)
	}
	for _, name := range []string{"outside.md", "environ.md", "hop1.md", "fifo.md"} {
		if data, err := fs.ReadFile(fsys, name); err == nil {
			t.Errorf("%s read: %q", name, data)
		} else if _, ok := AsRefusal(err); !ok {
			t.Errorf("%s: %v is not a refusal", name, err)
		}
		if f, err := fsys.Open(name); err == nil {
			f.Close()
			t.Errorf("%s opened", name)
		} else if _, ok := AsRefusal(err); !ok {
			t.Errorf("open %s: %v is not a refusal", name, err)
		}
	}
	if f, err := fsys.Open("docs"); err != nil {
		t.Errorf("a directory does not open: %v", err)
	} else {
		f.Close()
	}
	if _, err := fs.ReadDir(fsys, "outdir"); err == nil {
		t.Error("a symlinked directory outside was listed")
	} else if r, ok := AsRefusal(err); !ok || !strings.Contains(r.Reason, "leaves the workspace") {
		t.Errorf("outdir: %v", err)
	}
	if _, err := fs.ReadDir(tree.FS("docs", 10), "../plain.md"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("an invalid path: %v", err)
	}
	if _, err := tree.ReadDir("fifo.md"); err == nil {
		t.Error("a FIFO was listed")
	} else if r, ok := AsRefusal(err); !ok || r.Reason != "a FIFO, not a directory" {
		t.Errorf("fifo.md as a directory: %v", err)
	}
}

func TestOpenRegularKeepsRootErrors(t *testing.T) {
	t.Parallel()
	tree, _ := hostile(t)
	_, err := OpenRegular(tree.Root, "outside.md")
	if !IsEscape(tree.Root, err) {
		t.Errorf("escape: %v", err)
	}
	_, err = OpenRegular(tree.Root, "fifo.md")
	if !errors.Is(err, ErrNotRegular) || err.Error() != "fifo.md: not a regular file (a FIFO)" {
		t.Errorf("fifo: %v", err)
	}
	if IsEscape(tree.Root, err) || IsEscape(tree.Root, nil) {
		t.Error("a FIFO or no error counted as an escape")
	}
}

func TestTreeOpenRoot(t *testing.T) {
	t.Parallel()
	tree, _ := hostile(t)
	r, err := tree.OpenRoot("docs")
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	for name, want := range map[string]string{
		"outdir":   "outdir is a symlink that leaves the workspace; not read",
		"fifo.md":  "fifo.md is a FIFO, not a directory; not read",
		"plain.md": "plain.md is a regular file, not a directory; not read",
	} {
		r, err := tree.OpenRoot(name)
		if err == nil {
			r.Close()
		}
		if rf, ok := AsRefusal(err); !ok || rf.Error() != want {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

// TestOpen: a directory opened with Open is a Tree of that name, whose
// symlinks out of it are refused as the workspace's are.
func TestOpen(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "out.md")); err != nil {
		t.Fatal(err)
	}
	tree, err := Open(dir, "the repository")
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Root.Close()
	if got, err := tree.ReadFile("AGENTS.md", 1<<10); err != nil || string(got) != "mine" {
		t.Errorf("read AGENTS.md: %q, %v", got, err)
	}
	want := "out.md is a symlink that leaves the repository; not read"
	if _, err := tree.ReadFile("out.md", 1<<10); err == nil || err.Error() != want {
		t.Errorf("read out.md: %v; want %q", err, want)
	}
	if _, err := Open(filepath.Join(dir, "missing"), "the repository"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open a missing directory: %v; want it missing", err)
	}
}
