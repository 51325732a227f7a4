package tools

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gitLsFiles is what git lists in dir: `git ls-files -co --exclude-standard`,
// less the tracked files that are not there.
func gitLsFiles(t *testing.T, dir string) []string {
	t.Helper()
	out := gitCmd(t, dir, "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "ls-files", "-co", "--exclude-standard")
	var files []string
	for _, p := range strings.Split(out, "\n") {
		if _, err := os.Lstat(filepath.Join(dir, p)); p != "" && err == nil {
			files = append(files, p)
		}
	}
	slices.Sort(files)
	return slices.Compact(files)
}

func walkSorted(t *testing.T, env *Env, opts WalkOptions) []string {
	t.Helper()
	var got []string
	err := Walk(t.Context(), env.Root, opts, func(p string, _ fs.FileMode) error {
		got = append(got, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

// trackedIgnoredEnv is a repository in which ignore rules cover tracked
// files: a nested `test-*` over test fixtures, and an ignored directory
// holding one tracked file.
func trackedIgnoredEnv(t *testing.T) *Env {
	t.Helper()
	env := gitEnvFor(t, map[string]string{
		".gitignore":                      "build/\n*.log\n",
		"src/main.go":                     "package main // needle\n",
		"src/fixtures/.gitignore":         "test-*\n",
		"src/fixtures/test-tracked.txt":   "needle\n",
		"src/fixtures/test-untracked.txt": "needle\n",
		"src/fixtures/ok.txt":             "needle\n",
		"build/keep.txt":                  "needle\n",
		"build/out.o":                     "needle\n",
		"build/deep/keep.txt":             "needle\n",
		"build/deep/tmp.txt":              "needle\n",
		"build/empty/tmp.txt":             "needle\n",
		"app.log":                         "needle\n",
		"debug.log":                       "needle\n",
	}, true)
	ws := env.Workspace
	gitCmd(t, ws, "add", ".gitignore", "src")
	gitCmd(t, ws, "add", "-f", "src/fixtures/test-tracked.txt", "build/keep.txt", "build/deep/keep.txt", "app.log")
	return env
}

func TestWalkListsTrackedFilesTheRulesIgnore(t *testing.T) {
	t.Parallel()
	env := trackedIgnoredEnv(t)
	want := []string{".gitignore", "app.log", "build/deep/keep.txt", "build/keep.txt", "src/fixtures/.gitignore",
		"src/fixtures/ok.txt", "src/fixtures/test-tracked.txt", "src/main.go"}
	if git := gitLsFiles(t, env.Workspace); !slices.Equal(git, want) {
		t.Fatalf("git lists %q; the test expects %q", git, want)
	}
	t.Run("Walk", func(t *testing.T) {
		t.Parallel()
		if got := walkSorted(t, env, WalkOptions{}); !slices.Equal(got, want) {
			t.Errorf("Walk = %q\n want %q", got, want)
		}
	})
	t.Run("Walk of an ignored directory lists its tracked files only", func(t *testing.T) {
		t.Parallel()
		got := walkSorted(t, env, WalkOptions{Dir: "build"})
		if want := []string{"build/deep/keep.txt", "build/keep.txt"}; !slices.Equal(got, want) {
			t.Errorf("Walk(build) = %q, want %q", got, want)
		}
		if ex, _ := Excluded(t.Context(), env.Root, "build/deep", false); ex {
			t.Error("Excluded(build/deep) = true; it holds a tracked file")
		}
		if ex, _ := Excluded(t.Context(), env.Root, "build/empty", false); !ex {
			t.Error("Excluded(build/empty) = false; it is ignored and holds nothing tracked")
		}
	})
	t.Run("WalkStat", func(t *testing.T) {
		t.Parallel()
		var got []string
		err := WalkStat(t.Context(), env.Root, WalkOptions{}, func(p string, st FileStat) error {
			if !st.Mode.IsRegular() {
				t.Errorf("%s: mode %v", p, st.Mode)
			}
			got = append(got, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("WalkStat = %q\n want %q", got, want)
		}
	})
	t.Run("glob", func(t *testing.T) {
		t.Parallel()
		res := call(t, NewGlob(), env, `{"pattern":"**/*.{txt,log}"}`)
		got := strings.Split(res.Text, "\n")
		slices.Sort(got)
		if want := []string{"app.log", "build/deep/keep.txt", "build/keep.txt", "src/fixtures/ok.txt", "src/fixtures/test-tracked.txt"}; !slices.Equal(got, want) {
			t.Errorf("glob = %q\n want %q", got, want)
		}
		checkResult(t, call(t, NewGlob(), env, `{"pattern":"build/deep/*"}`), "build/deep/keep.txt", false)
	})
	t.Run("grep", func(t *testing.T) {
		t.Parallel()
		res := call(t, NewGrep(), env, `{"pattern":"needle"}`)
		for _, p := range []string{"src/fixtures/test-tracked.txt:1:", "build/keep.txt:1:", "build/deep/keep.txt:1:", "app.log:1:"} {
			if !strings.Contains(res.Text, p) {
				t.Errorf("grep misses %s:\n%s", p, res.Text)
			}
		}
		for _, p := range []string{"test-untracked", "out.o", "tmp.txt", "debug.log"} {
			if strings.Contains(res.Text, p) {
				t.Errorf("grep searched the ignored %s:\n%s", p, res.Text)
			}
		}
	})
	t.Run("list_dir", func(t *testing.T) {
		t.Parallel()
		res := call(t, NewListDir(), env, `{"depth":3}`)
		want := ".\n.gitignore  13B\napp.log  7B\nbuild/\n  deep/\n    keep.txt  7B\n  keep.txt  7B\nsrc/\n  fixtures/\n" +
			"    .gitignore  7B\n    ok.txt  7B\n    test-tracked.txt  7B\n  main.go  23B"
		checkResult(t, res, want, false)
	})
}

func TestWalkSubmodules(t *testing.T) {
	t.Parallel()
	env := gitEnvFor(t, map[string]string{
		"a.txt":          "a\n",
		"lib/lib.go":     "package lib\n",
		"vendor/x/":      "",
		"vendor/x/stray": "planted\n",
	}, true)
	ws := env.Workspace
	// lib: a checked-out repository of its own, recorded as a gitlink.
	gitCmd(t, filepath.Join(ws, "lib"), "init", "-q", "-b", "main")
	commit(t, filepath.Join(ws, "lib"), "lib")
	gitCmd(t, ws, "add", "a.txt", "lib")
	// vendor/x: a gitlink that is not checked out.
	head := gitCmd(t, filepath.Join(ws, "lib"), "rev-parse", "HEAD")
	gitCmd(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+head+",vendor/x")

	git := gitLsFiles(t, ws)
	if want := []string{"a.txt", "lib", "vendor/x"}; !slices.Equal(git, want) {
		t.Fatalf("git lists %q; the test expects %q", git, want)
	}
	t.Run("Walk yields each gitlink once and nothing in one not checked out", func(t *testing.T) {
		t.Parallel()
		got := walkSorted(t, env, WalkOptions{Gitlinks: true})
		if want := []string{"a.txt", "lib", "lib/lib.go", "vendor/x"}; !slices.Equal(got, want) {
			t.Errorf("Walk = %q, want %q", got, want)
		}
	})
	t.Run("WalkStat yields no directory", func(t *testing.T) {
		t.Parallel()
		var got []string
		err := WalkStat(t.Context(), env.Root, WalkOptions{Gitlinks: true, DirLinks: true}, func(p string, st FileStat) error {
			got = append(got, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if want := []string{"a.txt", "lib/lib.go"}; !slices.Equal(got, want) {
			t.Errorf("WalkStat = %q, want %q", got, want)
		}
	})
	t.Run("glob", func(t *testing.T) {
		t.Parallel()
		checkResult(t, call(t, NewGlob(), env, `{"pattern":"vendor/**"}`), "vendor/x", false)
		checkResult(t, call(t, NewGlob(), env, `{"pattern":"*"}`), "a.txt\nlib", false)
	})
	t.Run("list_dir", func(t *testing.T) {
		t.Parallel()
		checkResult(t, call(t, NewListDir(), env, `{"depth":3}`), ".\na.txt  2B\nlib/\n  lib.go  12B\nvendor/\n  x/", false)
	})
}

func TestListDirCaseDifferentSiblings(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{
		"Foo/upper.txt":  "1",
		"Foo/Bar/in.txt": "1",
		"foo/lower.txt":  "1",
		"foo/bar/in.txt": "1",
		"foo.txt":        "1",
	})
	want := ".\nfoo.txt  1B\nfoo/\n  bar/\n    in.txt  1B\n  lower.txt  1B\nFoo/\n  Bar/\n    in.txt  1B\n  upper.txt  1B"
	checkResult(t, call(t, NewListDir(), env, `{"depth":3}`), want, false)
}

func TestNodeModulesFileIsListed(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{
		"node_modules":          "a file, not the directory",
		"pkg/node_modules/m.js": "",
		"pkg/index.js":          "",
	})
	got := walkSorted(t, env, WalkOptions{})
	if want := []string{"node_modules", "pkg/index.js"}; !slices.Equal(got, want) {
		t.Errorf("Walk = %q, want %q", got, want)
	}
	checkResult(t, call(t, NewGlob(), env, `{"pattern":"**/node_modules*"}`), "node_modules", false)
	checkResult(t, call(t, NewListDir(), env, `{}`), ".\nnode_modules  25B\npkg/\n  index.js  0B", false)
}

func TestGlobCapEndsOnAWholePath(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	long := strings.Repeat("administration-", 8)
	for i := range 300 {
		files[fmt.Sprintf("d%02d/%s%03d.txt", i%7, long, i)] = ""
	}
	env := newTestEnv(t, files)
	res := call(t, NewGlob(), env, `{"pattern":"**/*.txt","limit":1000}`)
	if res.IsError || charCount(res.Text) > MaxOutput {
		t.Fatalf("result of %d chars (error %v)", charCount(res.Text), res.IsError)
	}
	lines := strings.Split(res.Text, "\n")
	note := lines[len(lines)-1]
	kept := lines[:len(lines)-1]
	if want := fmt.Sprintf("... [%d more paths not shown; narrow the pattern to see them]", 300-len(kept)); note != want {
		t.Errorf("last line %q, want %q", note, want)
	}
	if len(kept) < 150 || len(kept) >= 300 {
		t.Errorf("%d paths kept", len(kept))
	}
	for _, p := range kept {
		if _, ok := files[p]; !ok {
			t.Errorf("line %q is not a whole path", p)
		}
	}
	if strings.Contains(res.Text, "truncated") {
		t.Error("the result was cut by the character cap")
	}
}

// appendIndexEntry writes one version 2 or 3 index entry for name.
func appendIndexEntry(b []byte, mode uint32, name string) []byte {
	start := len(b)
	b = append(b, make([]byte, 24)...)
	b = binary.BigEndian.AppendUint32(b, mode)
	b = append(b, make([]byte, 12+20)...)
	b = binary.BigEndian.AppendUint16(b, uint16(min(len(name), 0xfff)))
	b = append(b, name...)
	b = append(b, 0)
	for (len(b)-start)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// rawIndex makes a version 2 index of names (sorted here) with a correct
// checksum; count overrides the header's entry count when not negative.
func rawIndex(names []string, count int) []byte {
	slices.Sort(names)
	b := []byte("DIRC\x00\x00\x00\x02")
	if count < 0 {
		count = len(names)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(count))
	for _, n := range names {
		b = appendIndexEntry(b, 0o100644, n)
	}
	sum := sha1.Sum(b)
	return append(b, sum[:]...)
}

func TestHostileIndex(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret": "s", "ws-sibling": "s"})
	hostile := []string{
		"../" + filepath.Base(outside) + "/secret",
		"/etc/passwd",
		outside + "/secret",
		".git/config",
		".GIT/config",
		"sub/.git/config",
		"link/secret",
		"linkfile",
		"a//b",
		"./ok.txt",
		"sub/../../secret",
		"ignored.txt",
		"ok.txt",
	}
	mk := func(t *testing.T, index []byte) *Env {
		t.Helper()
		env := newTestEnv(t, map[string]string{
			".gitignore":    "*\n!.gitignore\n",
			"ok.txt":        "ok",
			"ignored.txt":   "i",
			"sub/x":         "x",
			".git/HEAD":     "ref: refs/heads/main\n",
			".git/config":   "[core]\n",
			".git/objects/": "",
			".git/refs/":    "",
		})
		if err := os.Symlink(outside, filepath.Join(env.Workspace, "link")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(env.Workspace, "linkfile")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(env.Workspace, ".git/index"), index, 0o644); err != nil {
			t.Fatal(err)
		}
		return env
	}
	good := rawIndex(slices.Clone(hostile), -1)
	t.Run("entries that leave the workspace or enter a git directory are not listed", func(t *testing.T) {
		t.Parallel()
		env := mk(t, good)
		got := walkSorted(t, env, WalkOptions{DirLinks: true})
		// linkfile is a tracked symlink: listed as the link, as git lists it.
		if want := []string{".gitignore", "ignored.txt", "linkfile", "ok.txt"}; !slices.Equal(got, want) {
			t.Errorf("Walk = %q, want %q", got, want)
		}
	})
	fallback := []string{".gitignore"}
	cases := map[string][]byte{
		"a count far beyond the file": rawIndex([]string{"ok.txt"}, 1<<30),
		"a count one beyond the file": rawIndex([]string{"ok.txt"}, 2),
		"an unsorted index":           append(appendIndexEntry(appendIndexEntry([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x02"), 0o100644, "z"), 0o100644, "ok.txt"), make([]byte, 20)...),
		"version 5":                   append([]byte("DIRC\x00\x00\x00\x05"), good[8:]...),
		"a directory entry (sparse)":  append(appendIndexEntry([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"), 0o040000, "ok.txt"), make([]byte, 20)...),
		"a split index":               append(append(good[:len(good)-20:len(good)-20], "link\x00\x00\x00\x14"+strings.Repeat("x", 20)...), make([]byte, 20)...),
		"an extension past the end":   append(append(good[:len(good)-20:len(good)-20], "TREE\x00\x10\x00\x00"...), make([]byte, 20)...),
		"an empty file":               {},
		"no header":                   []byte("not an index at all, just some text"),
	}
	for name, index := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := walkSorted(t, mk(t, index), WalkOptions{}); !slices.Equal(got, fallback) {
				t.Errorf("Walk = %q, want the rules alone: %q", got, fallback)
			}
		})
	}
	t.Run("every truncation and random damage: no crash, nothing outside", func(t *testing.T) {
		t.Parallel()
		allowed := map[string]bool{".gitignore": true, "ignored.txt": true, "ok.txt": true}
		for n := range len(good) {
			if x, ok := parseIndex(good[:n], ""); ok && x != nil {
				checkNames(t, x, allowed, "linkfile")
			}
		}
		r := rand.New(rand.NewPCG(1, 2))
		for range 3000 {
			b := slices.Clone(good)
			for range 1 + r.IntN(4) {
				b[r.IntN(len(b))] = byte(r.IntN(256))
			}
			if x, ok := parseIndex(b, ""); ok && x != nil {
				checkNames(t, x, nil, "")
			}
		}
	})
}

// checkNames fails when x holds a path that could leave the worktree or
// enter a git directory (or, with allowed set, one not in it but extra).
func checkNames(t *testing.T, x *trackedIndex, allowed map[string]bool, extra string) {
	t.Helper()
	for i := range x.entries {
		p := x.name(i)
		if !worktreePath([]byte(p)) || strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") {
			t.Fatalf("index kept %q", p)
		}
		if allowed != nil && !allowed[p] && p != extra && !strings.HasPrefix(p, "link") && !strings.HasPrefix(p, "sub/") && !strings.HasPrefix(p, "a") {
			t.Fatalf("index kept %q", p)
		}
	}
}

func TestIndexVersions(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2", "3", "4"} {
		t.Run("version "+version, func(t *testing.T) {
			t.Parallel()
			env := trackedIgnoredEnv(t)
			ws := env.Workspace
			if version == "3" {
				// An intent-to-add entry has extended flags: version 3.
				write(t, ws, "build/new.txt", "n")
				gitCmd(t, ws, "add", "-f", "-N", "build/new.txt")
			}
			gitCmd(t, ws, "update-index", "--index-version", version)
			data, err := os.ReadFile(filepath.Join(ws, ".git/index"))
			if err != nil {
				t.Fatal(err)
			}
			if got := binary.BigEndian.Uint32(data[4:8]); fmt.Sprint(got) != version {
				t.Fatalf("git wrote version %d", got)
			}
			if got, want := walkSorted(t, env, WalkOptions{}), gitLsFiles(t, ws); !slices.Equal(got, want) {
				t.Errorf("Walk = %q\n git %q", got, want)
			}
		})
	}
	t.Run("a workspace below the repository's top", func(t *testing.T) {
		t.Parallel()
		env := trackedIgnoredEnv(t)
		root, err := os.OpenRoot(filepath.Join(env.Workspace, "src"))
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		got := walkSorted(t, &Env{Root: root}, WalkOptions{})
		if want := []string{"fixtures/.gitignore", "fixtures/ok.txt", "fixtures/test-tracked.txt", "main.go"}; !slices.Equal(got, want) {
			t.Errorf("Walk = %q, want %q", got, want)
		}
	})
	t.Run("a split index falls back to the rules", func(t *testing.T) {
		t.Parallel()
		env := trackedIgnoredEnv(t)
		gitCmd(t, env.Workspace, "update-index", "--split-index")
		got := walkSorted(t, env, WalkOptions{})
		if slices.Contains(got, "build/out.o") || slices.Contains(got, "src/fixtures/test-untracked.txt") || !slices.Contains(got, "src/main.go") {
			t.Errorf("Walk = %q", got)
		}
	})
	t.Run("a symlinked .git is not read", func(t *testing.T) {
		t.Parallel()
		env := trackedIgnoredEnv(t)
		real := filepath.Join(t.TempDir(), "gitdir")
		if err := os.Rename(filepath.Join(env.Workspace, ".git"), real); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(env.Workspace, ".git")); err != nil {
			t.Fatal(err)
		}
		got := walkSorted(t, env, WalkOptions{})
		if slices.Contains(got, "build/keep.txt") {
			t.Errorf("Walk read the index behind a symlinked .git: %q", got)
		}
	})
}
