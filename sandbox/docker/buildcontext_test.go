package docker

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeTree makes files (name → content; a content starting with "->" is a
// symlink to the rest) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func entryNames(entries []contextEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.name)
	}
	return out
}

func TestScanContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		files      map[string]string
		dockerfile string
		want       []string
	}{
		{
			name:       "everything without a .dockerignore",
			files:      map[string]string{"Dockerfile": "FROM x", "a.txt": "a", "src/b.go": "b"},
			dockerfile: "Dockerfile",
			want:       []string{"Dockerfile", "a.txt", "src", "src/b.go"},
		},
		{
			name: ".dockerignore patterns, with an exception inside an ignored directory",
			files: map[string]string{"Dockerfile": "FROM x", ".dockerignore": "node_modules\n*.log\n# comment\nbuild/**\n!build/keep.txt\n",
				"app.js": "x", "debug.log": "x", "node_modules/m/index.js": "x", "build/out.o": "x", "build/keep.txt": "k"},
			dockerfile: "Dockerfile",
			// build/** matches what is in build, not build itself (as for
			// the docker CLI).
			want: []string{".dockerignore", "Dockerfile", "app.js", "build", "build/keep.txt"},
		},
		{
			name:       "the Dockerfile and .dockerignore are sent even when ignored",
			files:      map[string]string{"Dockerfile": "FROM x", ".dockerignore": "*\n", "secret.env": "x"},
			dockerfile: "Dockerfile",
			want:       []string{".dockerignore", "Dockerfile"},
		},
		{
			name:       "a nested Dockerfile under an ignored directory is sent",
			files:      map[string]string{".devcontainer/Dockerfile": "FROM x", ".dockerignore": ".devcontainer\n", "a": "a"},
			dockerfile: ".devcontainer/Dockerfile",
			want:       []string{".devcontainer/Dockerfile", ".dockerignore", "a"},
		},
		{
			name:       "symlinks are sent as symlinks, never followed",
			files:      map[string]string{"Dockerfile": "FROM x", "link": "->/etc", "rel": "->Dockerfile"},
			dockerfile: "Dockerfile",
			want:       []string{"Dockerfile", "link", "rel"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			entries, err := scanContext(openRoot(t, dir), tc.dockerfile)
			if err != nil {
				t.Fatal(err)
			}
			got := entryNames(entries)
			if !slices.Equal(got, tc.want) {
				t.Errorf("context %q, want %q", got, tc.want)
			}
			for _, e := range entries {
				if e.name == "link" && e.link != "/etc" {
					t.Errorf("link target %q", e.link)
				}
			}
		})
	}
}

func TestContextHash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"Dockerfile": "FROM x\nCOPY . /src\n", "a.txt": "one", ".dockerignore": "tmp\n"})
	hash := func(args map[string]*string, target string) string {
		t.Helper()
		root := openRoot(t, dir)
		entries, err := scanContext(root, "Dockerfile")
		if err != nil {
			t.Fatal(err)
		}
		bc := &buildContext{root: root, entries: entries, dockerfile: "Dockerfile"}
		h, err := bc.hashContext(args, target)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	v := "1"
	base := hash(nil, "")
	if hash(nil, "") != base {
		t.Fatal("the hash is not stable")
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "a.txt"), later, later); err != nil {
		t.Fatal(err)
	}
	if hash(nil, "") != base {
		t.Error("touching a file changed the hash")
	}
	writeTree(t, dir, map[string]string{"tmp/scratch": "ignored"})
	if hash(nil, "") != base {
		t.Error("an ignored file changed the hash")
	}
	if hash(map[string]*string{"A": &v}, "") == base || hash(nil, "dev") == base {
		t.Error("build args or target do not change the hash")
	}
	if hash(map[string]*string{"A": &v}, "") == hash(map[string]*string{"A": nil}, "") {
		t.Error("an empty arg and an unset one hash the same")
	}
	writeTree(t, dir, map[string]string{"b.txt": "two"})
	if hash(nil, "") == base {
		t.Error("a new file did not change the hash")
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("ONE"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "b.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if h := hash(nil, ""); h == base {
		t.Error("changed content did not change the hash")
	}
}

func TestContextTar(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a/b.txt": "bee", "l": "->a/b.txt"})
	if err := os.Chmod(filepath.Join(dir, "a", "b.txt"), 0o750); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	entries, err := scanContext(root, "")
	if err != nil {
		t.Fatal(err)
	}
	df := []byte("FROM scratch\n")
	bc := &buildContext{root: root, entries: entries, extra: df, dockerfile: contextFileName(df)}
	var buf bytes.Buffer
	if err := bc.writeTar(&buf, root); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got[h.Name] = fmt.Sprintf("%c %o %s%s", h.Typeflag, h.Mode, h.Linkname, body)
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
		}
	}
	want := map[string]string{
		"a/":                "5 755 ",
		"a/b.txt":           "0 750 bee",
		"l":                 "2 777 a/b.txt",
		contextFileName(df): "0 644 FROM scratch\n",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("archive holds %v", got)
	}
}
