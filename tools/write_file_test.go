package tools

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	t.Parallel()
	tool := NewWriteFile()
	tests := []struct {
		name    string
		files   map[string]string
		input   string
		want    string
		wantErr bool
		check   map[string]string // path -> content afterwards
	}{
		{"creates a new file", nil, `{"path":"new.txt","content":"hello\n"}`, "Wrote 6 chars to new.txt", false, map[string]string{"new.txt": "hello\n"}},
		{"creates parent directories", nil, `{"path":"a/b/c/new.txt","content":"x"}`, "Wrote 1 chars to a/b/c/new.txt", false, map[string]string{"a/b/c/new.txt": "x"}},
		{"overwrites entirely", map[string]string{"f.txt": "old old old"}, `{"path":"f.txt","content":"new"}`, "Wrote 3 chars to f.txt", false, map[string]string{"f.txt": "new"}},
		{"counts characters, not bytes", nil, `{"path":"u.txt","content":"héllo ✓"}`, "Wrote 7 chars to u.txt", false, map[string]string{"u.txt": "héllo ✓"}},
		{"empty content", map[string]string{"f.txt": "x"}, `{"path":"f.txt","content":""}`, "Wrote 0 chars to f.txt", false, map[string]string{"f.txt": ""}},
		{"a directory cannot be overwritten", map[string]string{"d/x": "1"}, `{"path":"d","content":"x"}`, "Cannot write d: d is a directory", true, map[string]string{"d/x": "1"}},
		{"a file in the way of a parent", map[string]string{"f": "1"}, `{"path":"f/x.txt","content":"x"}`, "Cannot write f/x.txt: f is not a directory", true, map[string]string{"f": "1"}},
		{"content is required", nil, `{"path":"f.txt"}`, `Invalid input for write_file: missing required parameter "content"`, true, nil},
		{"escape", nil, `{"path":"../f.txt","content":"x"}`, "Path escapes workspace: ../f.txt", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, tt.files)
			checkResult(t, call(t, tool, env, tt.input), tt.want, tt.wantErr)
			for p, want := range tt.check {
				if got := readWS(t, env, p); got != want {
					t.Errorf("%s = %q, want %q", p, got, want)
				}
			}
			assertNoTempFiles(t, env.Workspace)
		})
	}
}

func TestWriteFileModes(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, nil)
	ref := filepath.Join(env.Workspace, "ref")
	if err := os.WriteFile(ref, nil, 0o644); err != nil { // 0644 less this process's umask
		t.Fatal(err)
	}
	exe := filepath.Join(env.Workspace, "run.sh")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(exe, 0o751); err != nil {
		t.Fatal(err)
	}
	tool := NewWriteFile()
	call(t, tool, env, `{"path":"fresh.txt","content":"x"}`)
	call(t, tool, env, `{"path":"run.sh","content":"#!/bin/sh\necho hi\n"}`)
	mode := func(p string) os.FileMode {
		fi, err := os.Stat(filepath.Join(env.Workspace, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	tests := []struct {
		name string
		path string
		want os.FileMode
	}{
		{"a new file gets 0644 less the umask", "fresh.txt", mode("ref")},
		{"an existing file keeps its mode", "run.sh", 0o751},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := mode(tt.path); got != tt.want {
				t.Errorf("mode = %o, want %o", got, tt.want)
			}
		})
	}
}

func TestWriteFileThroughSymlinkInside(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{"real/target.txt": "old"})
	if err := os.Symlink("real/target.txt", filepath.Join(env.Workspace, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(env.Workspace, "linkdir")); err != nil {
		t.Fatal(err)
	}
	tool := NewWriteFile()
	checkResult(t, call(t, tool, env, `{"path":"link.txt","content":"via link"}`), "Wrote 8 chars to link.txt", false)
	if got := readWS(t, env, "real/target.txt"); got != "via link" {
		t.Errorf("target = %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(env.Workspace, "link.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.txt is no longer a symlink (%v)", err)
	}
	checkResult(t, call(t, tool, env, `{"path":"linkdir/other.txt","content":"x"}`), "Wrote 1 chars to linkdir/other.txt", false)
	if got := readWS(t, env, "real/other.txt"); got != "x" {
		t.Errorf("real/other.txt = %q", got)
	}
}

// assertNoTempFiles fails if a write left a temporary file behind.
func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && filepath.Ext(p) == ".shiro-tmp" {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}
