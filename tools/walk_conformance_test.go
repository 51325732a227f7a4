package tools

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/internal/treegen"
)

// gitListing is what git says a walk of dir should yield: `git ls-files
// --cached --others --exclude-standard` in a fresh repository holding a
// copy of dir in which every .shiroignore is appended to the .gitignore
// beside it (the walker reads .shiroignore after .gitignore, so its rules
// win, exactly as later lines of one file do). dir's .git/info/exclude is
// copied too. node_modules is left out: the walker always skips it.
func gitListing(t *testing.T, dir string) []string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed for the conformance tests: %v", err)
	}
	oracle := t.TempDir()
	synthetic := map[string]bool{} // .gitignore files only the oracle has
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		dst := filepath.Join(oracle, rel)
		switch {
		case d.Name() == ".git" && d.IsDir():
			return fs.SkipDir
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if d.Name() == ".gitignore" || d.Name() == ".shiroignore" {
			gi, err := os.ReadFile(filepath.Join(filepath.Dir(p), ".gitignore"))
			if err != nil {
				synthetic[filepath.ToSlash(filepath.Join(filepath.Dir(rel), ".gitignore"))] = true
			}
			si, _ := os.ReadFile(filepath.Join(filepath.Dir(p), ".shiroignore"))
			if len(si) > 0 {
				gi = append(append(gi, '\n'), si...)
			}
			if err := os.WriteFile(filepath.Join(filepath.Dir(dst), ".gitignore"), gi, 0o644); err != nil {
				return err
			}
			if d.Name() == ".gitignore" {
				return nil
			}
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	git := func(args ...string) []byte {
		cmd := exec.Command("git", append([]string{"-C", oracle}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home,
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return out
	}
	git("init", "-q")
	if data, err := os.ReadFile(filepath.Join(dir, ".git", "info", "exclude")); err == nil {
		if err := os.WriteFile(filepath.Join(oracle, ".git", "info", "exclude"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for p := range strings.SplitSeq(string(git("ls-files", "-z", "--cached", "--others", "--exclude-standard")), "\x00") {
		if p != "" && !synthetic[p] && !slices.Contains(strings.Split(p, "/"), "node_modules") {
			want = append(want, p)
		}
	}
	slices.Sort(want)
	return want
}

func walkAll(t *testing.T, root *os.Root, opts WalkOptions, slow bool) []string {
	t.Helper()
	var got []string
	err := walk(t.Context(), root, opts, func(p string, _ fs.FileMode, _ func() (FileStat, error)) error {
		got = append(got, p)
		return nil
	}, walkConfig{slow: slow})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func diffSets(want, got []string) string {
	var b strings.Builder
	for _, p := range want {
		if _, ok := slices.BinarySearch(got, p); !ok {
			fmt.Fprintf(&b, "  missing %q\n", p)
		}
	}
	for _, p := range got {
		if _, ok := slices.BinarySearch(want, p); !ok {
			fmt.Fprintf(&b, "  extra   %q\n", p)
		}
	}
	return b.String()
}

func checkAgainstGit(t *testing.T, dir string) {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	got := walkAll(t, root, WalkOptions{}, false)
	slow := walkAll(t, root, WalkOptions{}, false)
	if !slices.Equal(got, slow) {
		t.Fatalf("openat2 and os.Root walks differ:\n%v\n%v", got, slow)
	}
	sorted := slices.Sorted(slices.Values(got))
	if d := diffSets(gitListing(t, dir), sorted); d != "" {
		t.Fatalf("walker and git disagree on %s:\n%s", dir, d)
	}
}

// TestWalkMatchesGitOnGeneratedTrees compares the walker with git on many
// random trees with nested .gitignore and .shiroignore files and a
// .git/info/exclude, and checks that walking a subdirectory yields exactly
// the part of the full walk below it.
func TestWalkMatchesGitOnGeneratedTrees(t *testing.T) {
	t.Parallel()
	for seed := range int64(48) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := treegen.Generate(dir, 80+int(seed%5)*30, seed); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(seed), 7))
			if err := os.MkdirAll(filepath.Join(dir, ".git", "info"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, ".git", "info", "exclude"), []byte(treegen.Rules(r, r.IntN(3))), 0o644); err != nil {
				t.Fatal(err)
			}
			checkAgainstGit(t, dir)
			checkSubdirWalks(t, dir)
		})
	}
}

// checkSubdirWalks walks every directory of dir on its own: one that a full
// walk enters yields exactly the full walk's files below it, in the same
// order.
func checkSubdirWalks(t *testing.T, dir string) {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	full := walkAll(t, root, WalkOptions{}, false)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == dir {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, dir+string(filepath.Separator)))
		if excluded, err := Excluded(t.Context(), root, rel, false); err != nil || excluded {
			return nil
		}
		var want []string
		for _, f := range full {
			if strings.HasPrefix(f, rel+"/") {
				want = append(want, f)
			}
		}
		if got := walkAll(t, root, WalkOptions{Dir: rel}, false); !slices.Equal(got, want) {
			t.Errorf("walk of %s:\n got %q\nwant %q", rel, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWalkMatchesGitOnRealTrees runs the comparison on copies of modules
// from the module cache that carry their own .gitignore files.
func TestWalkMatchesGitOnRealTrees(t *testing.T) {
	t.Parallel()
	for _, mod := range []string{"golang.org/x/sys", "github.com/bmatcuk/doublestar/v4"} {
		t.Run(mod, func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
			if err != nil {
				t.Fatalf("go list -m %s: %v", mod, err)
			}
			src := strings.TrimSpace(string(out))
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			// Module cache files are read-only; make the copy writable.
			err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					return os.Chmod(p, 0o755)
				}
				return os.Chmod(p, 0o644)
			})
			if err != nil {
				t.Fatal(err)
			}
			var rules bytes.Buffer
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && (d.Name() == ".gitignore" || d.Name() == ".shiroignore") {
					rules.WriteString(p + "\n")
				}
				return nil
			})
			if rules.Len() == 0 {
				t.Fatalf("%s has no ignore files: pick another module", mod)
			}
			// Add a .shiroignore so it is exercised on real content as well.
			if err := os.WriteFile(filepath.Join(dir, ".shiroignore"), []byte("*_test.go\n!*linux*_test.go\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			checkAgainstGit(t, dir)
		})
	}
}
