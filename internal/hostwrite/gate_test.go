//go:build unix

package hostwrite

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shiroagent/shiro/internal/dirstate"
)

// fixture is a temporary directory holding the workspace ws (a repository
// whose .git is made by hand: HEAD, config, objects, refs, hooks) and a
// directory beside it, outside.
type fixture struct {
	t            *testing.T
	top, ws, out string
}

func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	top := t.TempDir()
	f := &fixture{t: t, top: top, ws: filepath.Join(top, "ws"), out: filepath.Join(top, "outside")}
	base := map[string]string{
		"ws/.git/HEAD":        "ref: refs/heads/main\n",
		"ws/.git/config":      "[core]\n\tbare = false\n",
		"ws/.git/objects/":    "",
		"ws/.git/refs/heads/": "",
		"ws/.git/hooks/":      "",
		"ws/README":           "hello\n",
		"outside/keep":        "outside\n",
	}
	for k, v := range files {
		base["ws/"+k] = v
	}
	f.write(base)
	return f
}

// write makes files under top: a name ending in "/" is a directory, a
// content starting with "-> " a symlink.
func (f *fixture) write(files map[string]string) {
	f.t.Helper()
	for name, content := range files {
		p := filepath.Join(f.top, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				f.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			if err := os.Symlink(target, p); err != nil {
				f.t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) gate() *Gate {
	f.t.Helper()
	root, err := os.OpenRoot(f.ws)
	if err != nil {
		f.t.Fatal(err)
	}
	defer root.Close()
	g, err := New(root, f.ws)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { g.Close() })
	return g
}

// state describes everything under top (the workspace, its .git, and the
// directory outside it).
func (f *fixture) state() map[string]string {
	f.t.Helper()
	s, err := dirstate.Describe(f.top)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func sameState(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed: %q, was %q", k, after[k], v)
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s appeared: %q", k, v)
		}
	}
}

func wantRefusal(t *testing.T, err error, path, reason string) {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("err = %v, want a refusal of %s", err, path)
	}
	if r.Path != path || !strings.Contains(r.Reason, reason) {
		t.Errorf("refusal = %q, want %s: …%s…", r.Error(), path, reason)
	}
}

func TestWriteFileRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		// prepare runs after the gate is made.
		prepare func(f *fixture)
		path    string
		want    string // the refusal's whole text
	}{
		{
			name:  "a symlink as the first component leading into .git",
			files: map[string]string{"d": "-> .git"},
			path:  "d/hooks/pre-commit",
			want:  "d/hooks/pre-commit: d is a symlink; shiro writes only through real directories",
		},
		{
			name:  "a symlink in the middle",
			files: map[string]string{"a/b": "-> ../.git", "a/keep": "x"},
			path:  "a/b/config",
			want:  "a/b/config: a/b is a symlink; shiro writes only through real directories",
		},
		{
			name:  "a symlink to a harmless directory is refused too",
			files: map[string]string{"real/x": "x", "a/link": "-> ../real"},
			path:  "a/link/new.txt",
			want:  "a/link/new.txt: a/link is a symlink; shiro writes only through real directories",
		},
		{
			name:  "a symlink leading out of the workspace",
			files: map[string]string{"out": "-> ../outside"},
			path:  "out/keep",
			want:  "out/keep: out is a symlink; shiro writes only through real directories",
		},
		{
			name: "the repository's git directory",
			path: ".git/config",
			want: ".git/config: it is inside the repository's git directory; shiro never writes git metadata on your machine",
		},
		{
			name: "a hook",
			path: ".git/hooks/pre-commit",
			want: ".git/hooks/pre-commit: it is inside the repository's git directory; shiro never writes git metadata on your machine",
		},
		{
			name: ".git in capitals",
			path: ".GIT/config",
			want: ".GIT/config: it is inside a .git directory (.GIT); shiro never writes git metadata on your machine",
		},
		{
			name: ".git with a trailing dot, deeper",
			path: "sub/.git./hooks/post-checkout",
			want: "sub/.git./hooks/post-checkout: it is inside a .git directory (sub/.git.); shiro never writes git metadata on your machine",
		},
		{
			name: "the 8.3 short name",
			path: "git~1/config",
			want: "git~1/config: it is inside a .git directory (git~1); shiro never writes git metadata on your machine",
		},
		{
			name: "a code point HFS+ ignores",
			path: ".g\u200cit/config",
			// A name a terminal would not show as it is comes quoted.
			want: `".g\u200cit/config": it is inside a .git directory (".g\u200cit"); shiro never writes git metadata on your machine`,
		},
		{
			name: "a gitfile as the final name",
			path: "sub/.Git",
			want: "sub/.Git: git takes an entry of that name for a repository; shiro never writes git metadata on your machine",
		},
		{
			name: "the renamed git directory, known by identity alone",
			prepare: func(f *fixture) {
				if err := os.Rename(filepath.Join(f.ws, ".git"), filepath.Join(f.ws, "renamed")); err != nil {
					f.t.Fatal(err)
				}
				// Without HEAD its shape no longer gives it away.
				if err := os.Remove(filepath.Join(f.ws, "renamed", "HEAD")); err != nil {
					f.t.Fatal(err)
				}
			},
			path: "renamed/hooks/pre-commit",
			want: "renamed/hooks/pre-commit: it is inside the repository's git directory (renamed); shiro never writes git metadata on your machine",
		},
		{
			name:  "a bare repository, by its shape",
			files: map[string]string{"bare.git/HEAD": "ref: refs/heads/main\n", "bare.git/objects/": "", "bare.git/refs/": "", "bare.git/config": ""},
			path:  "bare.git/config",
			want:  "bare.git/config: it is inside bare.git, a git directory (HEAD beside objects and refs); shiro never writes git metadata on your machine",
		},
		{
			name:  "a linked worktree's git directory, by its shape",
			files: map[string]string{"wt/HEAD": "x\n", "wt/commondir": "../.git\n"},
			path:  "wt/hooks/x",
			want:  "wt/hooks/x: it is inside wt, a git directory (HEAD beside commondir); shiro never writes git metadata on your machine",
		},
		{
			name:  "a HEAD that completes a git directory",
			files: map[string]string{"x/objects/": "", "x/refs/": ""},
			path:  "x/HEAD",
			want:  "x/HEAD: it would make x a git directory; shiro never writes git metadata on your machine",
		},
		{
			name:  "an objects directory that completes a git directory",
			files: map[string]string{"y/HEAD": "ref: refs/heads/main\n", "y/refs/": ""},
			path:  "y/objects/info/alternates",
			want:  "y/objects/info/alternates: it would make y a git directory; shiro never writes git metadata on your machine",
		},
		{
			name:  "a commondir beside a HEAD",
			files: map[string]string{"z/HEAD": "ref: refs/heads/main\n"},
			path:  "z/commondir",
			want:  "z/commondir: it would make z a git directory; shiro never writes git metadata on your machine",
		},
		{
			name:  "the workspace itself made a git directory",
			files: map[string]string{"objects/": "", "refs/": ""},
			path:  "HEAD",
			want:  "HEAD: it would make the workspace a git directory; shiro never writes git metadata on your machine",
		},
		{
			name: "a climb out of the workspace",
			path: "../outside/keep",
			want: "../outside/keep: it is outside the workspace",
		},
		{
			name: "a climb hidden in the middle",
			path: "a/../../outside/keep",
			want: "a/../../outside/keep: it is outside the workspace",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.files)
			g := f.gate()
			if tt.prepare != nil {
				tt.prepare(f)
			}
			before := f.state()
			err := g.WriteFile(tt.path, []byte("#!/bin/sh\ntouch /tmp/planted\n"))
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("WriteFile(%q) = %v, want a refusal", tt.path, err)
			}
			if r.Error() != tt.want {
				t.Errorf("refusal:\n got %q\nwant %q", r.Error(), tt.want)
			}
			sameState(t, before, f.state())
			// A batch check refuses it the same way, and changes nothing.
			if err := g.Check([]Op{{Path: tt.path}}); err == nil || !strings.Contains(err.Error(), tt.want[strings.Index(tt.want, ": ")+2:]) {
				t.Errorf("Check = %v, want the same refusal", err)
			}
			sameState(t, before, f.state())
		})
	}
}

func TestAbsolutePaths(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := f.gate()
	before := f.state()
	wantRefusal(t, g.WriteFile(filepath.Join(f.out, "keep"), []byte("x")), filepath.Join(f.out, "keep"), "it is outside the workspace")
	wantRefusal(t, g.WriteFile(filepath.Join(f.ws, ".git", "config"), []byte("x")), ".git/config", "it is inside the repository's git directory")
	sameState(t, before, f.state())
	if err := g.WriteFile(filepath.Join(f.ws, "abs.txt"), []byte("inside\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "abs.txt")); string(b) != "inside\n" {
		t.Errorf("abs.txt = %q", b)
	}
}

func TestWriteFileKeepsTodaysBehaviour(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"secret.txt": "old\n", "run.sh": "#!/bin/sh\n", "last": "-> README"})
	os.Chmod(filepath.Join(f.ws, "secret.txt"), 0o600)
	os.Chmod(filepath.Join(f.ws, "run.sh"), 0o750)
	g := f.gate()
	for name, data := range map[string]string{"secret.txt": "new\n", "run.sh": "#!/bin/sh\necho\n", "deep/er/new.txt": "made\n", "last": "replaced\n"} {
		if err := g.WriteFile(name, []byte(data)); err != nil {
			t.Fatalf("WriteFile(%s): %v", name, err)
		}
	}
	s := f.state()
	umask := syscall.Umask(0)
	syscall.Umask(umask)
	newMode := fs.FileMode(0o644 &^ umask)
	for name, want := range map[string]string{
		"ws/secret.txt":      "-rw------- new\n",
		"ws/run.sh":          "-rwxr-x--- #!/bin/sh\necho\n",
		"ws/deep/er/new.txt": newMode.String() + " made\n",
		// The gate replaces a final symlink rather than following it.
		"ws/last":   newMode.String() + " replaced\n",
		"ws/README": "-rw-r--r-- hello\n",
	} {
		if s[name] != want {
			t.Errorf("%s = %q, want %q", name, s[name], want)
		}
	}
	for name := range s {
		if strings.Contains(name, ".shiro-tmp") {
			t.Errorf("a temporary file was left: %s", name)
		}
	}
	if err := g.WriteFile("deep", []byte("x")); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a write over a directory: %v", err)
	}
	if err := g.WriteFile("README/x", []byte("x")); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("a write below a file: %v", err)
	}
}

func TestWriteFileReplacesAHardLinkedEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"a": "shared\n"})
	if err := os.Link(filepath.Join(f.ws, "a"), filepath.Join(f.ws, "b")); err != nil {
		t.Fatal(err)
	}
	fiB, _ := os.Stat(filepath.Join(f.ws, "b"))
	g := f.gate()
	if err := g.WriteFile("a", []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "b")); string(b) != "shared\n" {
		t.Errorf("the other name's content changed: %q", b)
	}
	fiA, _ := os.Stat(filepath.Join(f.ws, "a"))
	after, _ := os.Stat(filepath.Join(f.ws, "b"))
	if os.SameFile(fiA, fiB) || !os.SameFile(after, fiB) {
		t.Error("the write went through the shared inode instead of replacing the entry")
	}
	if n := after.Sys().(*syscall.Stat_t).Nlink; n != 1 {
		t.Errorf("the old inode has %d links, want 1", n)
	}
}

// A directory swapped for a symlink after the walk and before the write
// cannot redirect the write: it lands in the directory the walk checked.
func TestSwapBetweenWalkAndWrite(t *testing.T) {
	t.Parallel()
	for _, target := range []string{".git/hooks", "../outside"} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, map[string]string{"dir/old": "x"})
			g := f.gate()
			g.afterWalk = func(string) {
				if err := os.Rename(filepath.Join(f.ws, "dir"), filepath.Join(f.ws, "moved")); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(target, filepath.Join(f.ws, "dir")); err != nil {
					t.Error(err)
				}
			}
			before := f.state()
			if err := g.WriteFile("dir/pre-commit", []byte("planted\n")); err != nil {
				t.Fatal(err)
			}
			after := f.state()
			if after["ws/moved/pre-commit"] == "" {
				t.Errorf("the write did not land in the directory walked: %v", after)
			}
			for k, v := range after {
				if strings.HasPrefix(k, "ws/.git") || strings.HasPrefix(k, "outside") {
					if before[k] != v {
						t.Errorf("%s changed through the swapped symlink: %q", k, v)
					}
				}
			}
			// The next write through the symlink is refused.
			g.afterWalk = nil
			wantRefusal(t, g.WriteFile("dir/pre-commit", []byte("again\n")), "dir/pre-commit", "dir is a symlink")
			wantRefusal(t, g.Remove("dir/keep"), "dir/keep", "dir is a symlink")
		})
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"f": "x", "link": "-> .git", "empty/": "", "full/x": "x", "d": "-> .git"})
	g := f.gate()
	for _, p := range []string{"f", "link", "empty"} {
		if err := g.Remove(p); err != nil {
			t.Errorf("Remove(%s): %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.ws, ".git", "HEAD")); err != nil {
		t.Error("removing a symlink removed what it points at")
	}
	if err := g.Remove("full"); !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		t.Errorf("Remove(full) = %v", err)
	}
	if err := g.RemoveEmptyDir("full/x"); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("RemoveEmptyDir of a file = %v", err)
	}
	if err := g.Remove("gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove(gone) = %v", err)
	}
	before := f.state()
	wantRefusal(t, g.Remove(".git/HEAD"), ".git/HEAD", "it is inside the repository's git directory")
	wantRefusal(t, g.Remove(".git"), ".git", "git takes an entry of that name")
	wantRefusal(t, g.Remove("d/HEAD"), "d/HEAD", "d is a symlink")
	wantRefusal(t, g.RemoveEmptyDir("d/refs/heads"), "d/refs/heads", "d is a symlink")
	sameState(t, before, f.state())
}

func TestDiscoversAGitfilesDirectories(t *testing.T) {
	t.Parallel()
	// The workspace is a linked worktree whose git directories live
	// inside it, under other names.
	f := newFixture(t, map[string]string{
		"store/main/config":                "[core]\n",
		"store/main/hooks/":                "",
		"store/main/worktrees/w/x":         "",
		"store/main/worktrees/w/commondir": "../..\n",
	})
	os.RemoveAll(filepath.Join(f.ws, ".git"))
	f.write(map[string]string{"ws/.git": "gitdir: store/main/worktrees/w\n"})
	g := f.gate()
	before := f.state()
	wantRefusal(t, g.WriteFile("store/main/hooks/pre-commit", []byte("x")), "store/main/hooks/pre-commit", "it is inside the repository's git directory (store/main)")
	wantRefusal(t, g.WriteFile("store/main/worktrees/w/config.worktree", []byte("x")), "store/main/worktrees/w/config.worktree", "it is inside the repository's git directory (store/main)")
	wantRefusal(t, g.WriteFile(".git", []byte("gitdir: elsewhere\n")), ".git", "git takes an entry of that name")
	sameState(t, before, f.state())
	if err := g.WriteFile("store/notes.txt", []byte("fine\n")); err != nil {
		t.Errorf("a write beside the git directories: %v", err)
	}
}

func TestProtectAddsARepository(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"nested/meta/config": "[core]\n"})
	g := f.gate()
	if err := g.WriteFile("nested/meta/config", []byte("before protect\n")); err != nil {
		t.Fatal(err)
	}
	if err := g.Protect("nested/meta"); err != nil {
		t.Fatal(err)
	}
	before := f.state()
	wantRefusal(t, g.WriteFile("nested/meta/config", []byte("x")), "nested/meta/config", "it is inside a repository's git directory (nested/meta)")
	wantRefusal(t, g.Remove("nested/meta"), "nested/meta", "it is a repository's git directory")
	sameState(t, before, f.state())
	if err := g.Protect("nowhere"); err == nil {
		t.Error("protecting a missing directory succeeded")
	}
}

func TestCheckABatch(t *testing.T) {
	t.Parallel()
	t.Run("a symlink the batch removes makes room for a directory", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, map[string]string{"lib": "-> .git"})
		g := f.gate()
		if err := g.Check([]Op{{Path: "lib", Remove: true}, {Path: "lib/a.go"}, {Path: "lib/sub/b.go"}}); err != nil {
			t.Errorf("Check = %v", err)
		}
	})
	t.Run("a symlink the batch leaves is refused for every write below it", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, map[string]string{"d": "-> .git"})
		g := f.gate()
		before := f.state()
		err := g.Check([]Op{{Path: "README"}, {Path: "d/hooks/pre-commit"}, {Path: "d/config"}})
		for _, want := range []string{"d/hooks/pre-commit: d is a symlink", "d/config: d is a symlink"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Check = %v, want %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "README") {
			t.Errorf("Check refused README: %v", err)
		}
		sameState(t, before, f.state())
	})
	t.Run("a git directory made by the batch as a whole", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		g := f.gate()
		err := g.Check([]Op{{Path: "fresh/HEAD"}, {Path: "fresh/objects/ab/cdef"}, {Path: "fresh/refs/heads/main"}, {Path: "fresh/README"}})
		if err == nil || !strings.Contains(err.Error(), "fresh/HEAD: it would make fresh a git directory") || strings.Contains(err.Error(), "fresh/README") {
			t.Errorf("Check = %v", err)
		}
	})
	t.Run("a removal that undoes a git directory's shape lets the rest through", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, map[string]string{"x/objects/": "", "x/refs": "a file"})
		g := f.gate()
		if err := g.Check([]Op{{Path: "x/refs", Remove: true}, {Path: "x/HEAD"}}); err != nil {
			t.Errorf("Check = %v", err)
		}
		if err := g.Check([]Op{{Path: "x/HEAD"}}); err == nil {
			t.Error("Check let a HEAD beside objects and refs through")
		}
	})
	t.Run("removals inside a git directory", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, map[string]string{"gone/": ""})
		g := f.gate()
		err := g.Check([]Op{{Path: ".git/index", Remove: true}, {Path: "gone/x", Remove: true}, {Path: "never/there", Remove: true}})
		if err == nil || !strings.Contains(err.Error(), ".git/index: it is inside the repository's git directory") || strings.Contains(err.Error(), "gone/x") || strings.Contains(err.Error(), "never/there") {
			t.Errorf("Check = %v", err)
		}
	})
}

func TestReplaceWithSymlink(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{
		"made/.git":      "gitdir: ../evil\n",
		"repo/HEAD":      "ref: refs/heads/main\n",
		"repo/objects/":  "",
		"repo/refs/":     "",
		"link":           "-> made",
		"adir/.git/HEAD": "x",
	})
	g := f.gate()
	for _, rel := range []string{"made/.git", "repo/HEAD"} {
		if err := g.ReplaceWithSymlink(rel, "/.shiro/state/git/1"); err != nil {
			t.Fatalf("ReplaceWithSymlink(%s): %v", rel, err)
		}
		if got, err := os.Readlink(filepath.Join(f.ws, rel)); err != nil || got != "/.shiro/state/git/1" {
			t.Errorf("%s -> %q (%v)", rel, got, err)
		}
	}
	before := f.state()
	wantRefusal(t, g.ReplaceWithSymlink("link/.git", "x"), "link/.git", "link is a symlink")
	wantRefusal(t, g.ReplaceWithSymlink(".git/HEAD", "x"), ".git/HEAD", "it is inside the repository's git directory")
	wantRefusal(t, g.ReplaceWithSymlink(".git", "x"), ".git", "it is the repository's git directory")
	if err := g.ReplaceWithSymlink("adir/.git", "x"); err == nil || !strings.Contains(err.Error(), "it is a directory now") {
		t.Errorf("replacing a directory: %v", err)
	}
	if err := g.ReplaceWithSymlink("nothing/.git", "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("replacing nothing: %v", err)
	}
	sameState(t, before, f.state())
}

func TestDirOperations(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"x/objects/": "", "x/refs/": "", "x/file": "x"})
	g := f.gate()
	d, err := g.OpenDir("x")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before := f.state()
	if _, err := d.Create("HEAD", 0o644); err == nil {
		t.Error("Create(HEAD) beside objects and refs succeeded")
	}
	if err := d.Symlink("anything", ".git"); err == nil {
		t.Error("Symlink(.git) succeeded")
	}
	if err := d.Replace("file", "HEAD"); err == nil {
		t.Error("Replace(file, HEAD) succeeded")
	}
	sameState(t, before, f.state())
	if _, err := g.OpenDir("nothing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenDir(nothing) = %v", err)
	}
	if _, err := g.MkdirAll(".git/hooks/new"); err == nil {
		t.Error("MkdirAll inside .git succeeded")
	}
}

func TestIsDotGit(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		".git": true, ".GIT": true, ".Git": true, ".git.": true, ".git ": true, ".git. . ": true,
		"git~1": true, "GIT~1": true, "git~4": true, "gi7eba~9": true, ".git::$INDEX_ALLOCATION": true,
		".g\u200cit": true, "\ufeff.git": true,
		"git": false, ".gitignore": false, ".github": false, "git~5": false, ".git-old": false, "x.git": false, "": false,
	} {
		if got := IsDotGit(name); got != want {
			t.Errorf("IsDotGit(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestGitDirShape(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		names []string
		want  string
	}{
		{[]string{"HEAD", "objects", "refs"}, "HEAD beside objects and refs"},
		{[]string{"HEAD", "commondir"}, "HEAD beside commondir"},
		{[]string{"HEAD", "objects"}, ""},
		{[]string{"objects", "refs", "commondir"}, ""},
		{nil, ""},
	} {
		has := func(n string) bool {
			for _, x := range tt.names {
				if x == n {
					return true
				}
			}
			return false
		}
		if got := GitDirShape(has); got != tt.want {
			t.Errorf("GitDirShape(%v) = %q, want %q", tt.names, got, tt.want)
		}
	}
}
