package tools

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/shiroagent/shiro/internal/dirstate"
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
	// A symlinked directory is not written through, even one that stays
	// inside.
	checkResult(t, call(t, tool, env, `{"path":"linkdir/other.txt","content":"x"}`),
		"Cannot write linkdir/other.txt: linkdir is a symlink; shiro writes only through real directories", true)
	if _, err := os.Stat(filepath.Join(env.Workspace, "real", "other.txt")); err == nil {
		t.Error("real/other.txt was written through linkdir")
	}
}

// The file tools write through the workspace's gate: never through a
// symlinked directory, never into a git directory, whatever the spelling,
// and a final symlink's target passes the gate too. Nothing is written
// when a write is refused.
func TestFileToolsWriteThroughTheGate(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n\tbare = false\n", ".git/objects/": "", ".git/refs/": "", ".git/hooks/": "",
		"src/main.go": "package main\n",
	}
	links := map[string]string{"d": ".git", "cfg": ".git/config", "hooklink": "d/hooks/pre-commit", "srclink": "src"}
	tests := []struct {
		name, tool, input, want string
	}{
		{"write_file into .git", "write_file", `{"path":".git/hooks/pre-commit","content":"#!/bin/sh\n"}`,
			"Cannot write .git/hooks/pre-commit: it is inside the repository's git directory; shiro never writes git metadata on your machine"},
		{"edit_file of .git/config", "edit_file", `{"path":".git/config","oldString":"bare = false","newString":"fsmonitor = touch /tmp/planted"}`,
			"Cannot write .git/config: it is inside the repository's git directory; shiro never writes git metadata on your machine"},
		{"multi_edit of .git/config", "multi_edit", `{"path":".git/config","edits":[{"oldString":"bare = false","newString":"fsmonitor = x"}]}`,
			"Cannot write .git/config: it is inside the repository's git directory; shiro never writes git metadata on your machine"},
		{"write_file through d -> .git", "write_file", `{"path":"d/hooks/pre-commit","content":"#!/bin/sh\n"}`,
			"Cannot write d/hooks/pre-commit: d is a symlink; shiro writes only through real directories"},
		{"edit_file through d -> .git", "edit_file", `{"path":"d/config","oldString":"bare = false","newString":"fsmonitor = x"}`,
			"Cannot write d/config: d is a symlink; shiro writes only through real directories"},
		{"write_file of a final link to .git/config", "write_file", `{"path":"cfg","content":"[core]\\n\\tfsmonitor = touch /tmp/planted\\n"}`,
			"Cannot write cfg (it leads to .git/config): it is inside the repository's git directory; shiro never writes git metadata on your machine"},
		{"write_file of a final link through a symlinked directory", "write_file", `{"path":"hooklink","content":"#!/bin/sh\n"}`,
			"Cannot write hooklink (it leads to d/hooks/pre-commit): d is a symlink; shiro writes only through real directories"},
		{"write_file of .GIT in capitals", "write_file", `{"path":"sub/.GIT/config","content":"x"}`,
			"Cannot write sub/.GIT/config: it is inside a .git directory (sub/.GIT); shiro never writes git metadata on your machine"},
		{"write_file of a gitfile", "write_file", `{"path":"lib/.git","content":"gitdir: ../evil\n"}`,
			"Cannot write lib/.git: git takes an entry of that name for a repository; shiro never writes git metadata on your machine"},
		{"edit_file through a symlinked source directory", "edit_file", `{"path":"srclink/main.go","oldString":"main","newString":"evil"}`,
			"Cannot write srclink/main.go: srclink is a symlink; shiro writes only through real directories"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, files)
			for name, target := range links {
				if err := os.Symlink(target, filepath.Join(env.Workspace, name)); err != nil {
					t.Fatal(err)
				}
			}
			before, err := dirstate.Describe(env.Workspace)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, call(t, Find(Builtins(), tt.tool), env, tt.input), tt.want, true)
			after, err := dirstate.Describe(env.Workspace)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(before, after) {
				t.Errorf("the refused write changed the workspace:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
	t.Run("an Env without a gate writes nothing", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t, nil)
		env.Gate = nil
		checkResult(t, call(t, NewWriteFile(), env, `{"path":"x.txt","content":"x"}`), "Cannot write x.txt: no write gate for this workspace", true)
		if _, err := os.Stat(filepath.Join(env.Workspace, "x.txt")); err == nil {
			t.Error("x.txt was written")
		}
	})
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
