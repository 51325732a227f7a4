package gitshadow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiscover(t *testing.T) {
	requireGit(t)
	t.Parallel()
	t.Run("the workspace's own repository", func(t *testing.T) {
		t.Parallel()
		ws := newRepo(t)
		r, err := Discover(ws)
		if err != nil || r == nil || r.Top != ws || r.CommonDir != filepath.Join(ws, ".git") || r.Gitfile {
			t.Fatalf("Discover: %+v, %v", r, err)
		}
	})
	t.Run("started in a subdirectory", func(t *testing.T) {
		t.Parallel()
		top := newRepo(t)
		sub := filepath.Join(top, "a", "b")
		os.MkdirAll(sub, 0o755)
		r, err := Discover(sub)
		if err != nil || r == nil || r.Top != top {
			t.Fatalf("Discover: %+v, %v", r, err)
		}
	})
	t.Run("a linked worktree", func(t *testing.T) {
		t.Parallel()
		top := newRepo(t)
		wt := filepath.Join(t.TempDir(), "wt")
		gitIn(t, top, nil, "worktree", "add", "-q", wt)
		r, err := Discover(wt)
		if err != nil || r == nil || r.Top != wt || !r.Gitfile || r.CommonDir != filepath.Join(top, ".git") || !strings.HasPrefix(r.Worktree, "worktrees/") {
			t.Fatalf("Discover: %+v, %v", r, err)
		}
	})
	t.Run("a submodule", func(t *testing.T) {
		t.Parallel()
		lib := newRepo(t)
		top := newRepo(t)
		gitIn(t, top, nil, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
		r, err := Discover(filepath.Join(top, "lib"))
		if err != nil || r == nil || !r.Gitfile || r.CommonDir != filepath.Join(top, ".git", "modules", "lib") {
			t.Fatalf("Discover: %+v, %v", r, err)
		}
		outer, err := Discover(top)
		if err != nil || len(outer.Modules) != 1 || outer.Modules[0] != "modules/lib" {
			t.Fatalf("modules of the outer repository: %+v, %v", outer, err)
		}
	})
	t.Run("no repository", func(t *testing.T) {
		t.Parallel()
		if r, err := Discover(t.TempDir()); err != nil || (r != nil && strings.HasPrefix(r.Top, os.TempDir())) {
			t.Fatalf("Discover: %+v, %v", r, err)
		}
	})
	refused := []struct {
		name  string
		setup func(t *testing.T, ws string)
		want  error
	}{
		{".git symlinked to a directory", func(t *testing.T, ws string) {
			other := newRepo(t)
			os.Symlink(filepath.Join(other, ".git"), filepath.Join(ws, ".git"))
		}, ErrGitSymlink},
		{"a gitfile pointing inside the workspace", func(t *testing.T, ws string) {
			gitIn(t, ws, nil, "init", "-q", "--bare", "inside.git")
			os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: inside.git\n"), 0o644)
		}, ErrGitfile},
		{"a gitfile pointing at a secret directory", func(t *testing.T, ws string) {
			secret := t.TempDir()
			os.WriteFile(filepath.Join(secret, "id_rsa"), []byte("key"), 0o600)
			os.WriteFile(filepath.Join(ws, ".git"), []byte("gitdir: "+secret+"\n"), 0o644)
		}, ErrGitfile},
		{"a gitfile pointing at another worktree's git directory", func(t *testing.T, ws string) {
			top := newRepo(t)
			wt := filepath.Join(t.TempDir(), "wt")
			gitIn(t, top, nil, "worktree", "add", "-q", wt)
			b, _ := os.ReadFile(filepath.Join(wt, ".git"))
			os.WriteFile(filepath.Join(ws, ".git"), b, 0o644)
		}, ErrGitfile},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			tc.setup(t, ws)
			_, err := Discover(ws)
			var re *RepoError
			if !errors.Is(err, tc.want) || !errors.As(err, &re) || !strings.Contains(err.Error(), "--no-sandbox") {
				t.Fatalf("err = %v, want %v with the way out", err, tc.want)
			}
		})
	}
	t.Run("a dangling .git symlink is passed by", func(t *testing.T) {
		t.Parallel()
		top := newRepo(t)
		ws := filepath.Join(top, "sub")
		os.MkdirAll(ws, 0o755)
		os.Symlink("/.shiro/state/git/abc", filepath.Join(ws, ".git"))
		r, err := Discover(ws)
		if err != nil || r == nil || r.Top != top {
			t.Fatalf("Discover: %+v, %v", r, err)
		}
	})
}
