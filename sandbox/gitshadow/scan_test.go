package gitshadow

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const testStore = "/.shiro/state/git/"

func scanner(t testing.TB, ws string) *Scanner {
	t.Helper()
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return NewScanner(ws, root, testStore)
}

func paths(fs []Finding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Kind+" "+f.Path)
	}
	return out
}

func mustScan(t *testing.T, s *Scanner) []string {
	t.Helper()
	fs, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	return paths(fs)
}

// scanModes runs a scanner test with kernel events (where there are any)
// and with the change-time walk alone.
func scanModes(t *testing.T, test func(t *testing.T, newScanner func(ws string) *Scanner)) {
	t.Run("events", func(t *testing.T) {
		t.Parallel()
		test(t, func(ws string) *Scanner { return scanner(t, ws) })
	})
	t.Run("walk", func(t *testing.T) {
		t.Parallel()
		test(t, func(ws string) *Scanner {
			s := scanner(t, ws)
			s.Close()
			return s
		})
	})
}

func TestScannerFindsWhatGitTakesForARepository(t *testing.T) {
	requireGit(t)
	scanModes(t, testScannerFinds)
}

func testScannerFinds(t *testing.T, newScanner func(string) *Scanner) {
	ws := newRepo(t)
	s := newScanner(ws)
	s.Protect(".git")
	if got := mustScan(t, s); len(got) != 0 {
		t.Fatalf("a fresh repository: %v", got)
	}
	gitIn(t, ws, nil, "init", "-q", "sub")                        // git init in a subdirectory
	gitIn(t, ws, nil, "init", "-q", "--bare", "deep/er/bare.git") // a bare repository
	os.MkdirAll(filepath.Join(ws, "gf"), 0o755)                   // a hand-made gitfile
	os.WriteFile(filepath.Join(ws, "gf", ".git"), []byte("gitdir: ../deep/er/bare.git\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "ln"), 0o755) // a .git symlink
	os.Symlink("/somewhere/else", filepath.Join(ws, "ln", ".git"))
	os.MkdirAll(filepath.Join(ws, "node_modules", "x"), 0o755) // inside an ignored tree too
	gitIn(t, ws, nil, "init", "-q", "node_modules/x")
	os.MkdirAll(filepath.Join(ws, "notrepo"), 0o755) // a HEAD alone is not a repository
	os.WriteFile(filepath.Join(ws, "notrepo", "HEAD"), []byte("x"), 0o644)

	want := []string{
		"HEAD deep/er/bare.git/HEAD",
		"gitfile gf/.git",
		"symlink ln/.git",
		"HEAD node_modules/x/.git/HEAD",
		"HEAD sub/.git/HEAD",
	}
	if got := mustScan(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("findings:\n got %q\nwant %q", got, want)
	}

	// Replaced by a symlink into the sandbox's storage, a finding is gone;
	// anything else in its place is found again.
	os.Remove(filepath.Join(ws, "sub", ".git", "HEAD"))
	os.Symlink(testStore+"abc", filepath.Join(ws, "sub", ".git", "HEAD"))
	if got := mustScan(t, s); len(got) != 4 {
		t.Errorf("after moving sub's HEAD: %q", got)
	}
	os.Remove(filepath.Join(ws, "sub", ".git", "HEAD"))
	os.Symlink("refs/heads/main", filepath.Join(ws, "sub", ".git", "HEAD"))
	if got := mustScan(t, s); len(got) != 5 {
		t.Errorf("after a HEAD symlink into refs: %q", got)
	}
}

func TestScannerRereadsOnlyWhatChanged(t *testing.T) {
	scanModes(t, testScannerRereads)
}

func testScannerRereads(t *testing.T, newScanner func(string) *Scanner) {
	ws := t.TempDir()
	for i := range 50 {
		os.MkdirAll(filepath.Join(ws, fmt.Sprintf("d%d/e/f", i)), 0o755)
	}
	s := newScanner(ws)
	mustScan(t, s)
	// Make every directory old enough to be trusted, as a real tree is.
	for _, st := range s.cache {
		st.racy = false
	}
	before := snapshotCache(s)
	mustScan(t, s)
	if changed := diffCache(before, s); len(changed) != 0 {
		t.Errorf("an unchanged tree was re-read: %v", changed)
	}
	os.MkdirAll(filepath.Join(ws, "d7", "e", "f", ".git"), 0o755)
	for _, n := range []string{"objects", "refs"} {
		os.MkdirAll(filepath.Join(ws, "d7", "e", "f", ".git", n), 0o755)
	}
	os.WriteFile(filepath.Join(ws, "d7", "e", "f", ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	before = snapshotCache(s)
	got := mustScan(t, s)
	if !reflect.DeepEqual(got, []string{"HEAD d7/e/f/.git/HEAD"}) {
		t.Errorf("findings: %q", got)
	}
	if changed := diffCache(before, s); !reflect.DeepEqual(changed, []string{"d7/e/f", "d7/e/f/.git", "d7/e/f/.git/objects", "d7/e/f/.git/refs"}) {
		t.Errorf("re-read %v", changed)
	}
}

func snapshotCache(s *Scanner) map[string]*dirState {
	out := map[string]*dirState{}
	for k, v := range s.cache {
		out[k] = v
	}
	return out
}

// diffCache lists the directories whose cached state was replaced.
func diffCache(before map[string]*dirState, s *Scanner) []string {
	var out []string
	for k, v := range s.cache {
		if before[k] != v {
			out = append(out, k)
		}
	}
	sortStrings(out)
	return out
}

func TestProtectAppliesToWhatWasAlreadyScanned(t *testing.T) {
	requireGit(t)
	scanModes(t, func(t *testing.T, newScanner func(string) *Scanner) {
		ws := t.TempDir()
		gitIn(t, ws, nil, "init", "-q", "user-repo")
		os.MkdirAll(filepath.Join(ws, "lib"), 0o755)
		os.WriteFile(filepath.Join(ws, "lib", ".git"), []byte("gitdir: ../x\n"), 0o644)
		s := newScanner(ws)
		if got := mustScan(t, s); len(got) != 2 {
			t.Fatalf("first scan: %q", got)
		}
		s.Protect("user-repo/.git", "lib/.git")
		if got := mustScan(t, s); len(got) != 0 {
			t.Errorf("after Protect: %q", got)
		}
	})
}

// A protected repository is known by its identity: moved with its parent
// it stays protected, and what is made at its old path is not (the
// read-only mount moves with a renamed parent, so `mv sub sub.orig; git
// init sub` put a new repository where a path-protected one used to be).
func TestScannerKnowsProtectedRepositoriesByIdentity(t *testing.T) {
	requireGit(t)
	scanModes(t, func(t *testing.T, newScanner func(string) *Scanner) {
		ws := t.TempDir()
		gitIn(t, ws, nil, "init", "-q", "clone")
		os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
		os.WriteFile(filepath.Join(ws, "sub", ".git"), []byte("gitdir: ../x\n"), 0o644)
		s := newScanner(ws)
		if got := mustScan(t, s); len(got) != 2 {
			t.Fatalf("first scan: %q", got)
		}
		s.Protect("clone/.git", "sub/.git")
		if got := mustScan(t, s); len(got) != 0 {
			t.Fatalf("after Protect: %q", got)
		}
		for _, mv := range [][2]string{{"sub", "sub.orig"}, {"clone", "clone.orig"}} {
			if err := os.Rename(filepath.Join(ws, mv[0]), filepath.Join(ws, mv[1])); err != nil {
				t.Fatal(err)
			}
		}
		gitIn(t, ws, nil, "init", "-q", "sub")
		gitIn(t, ws, nil, "init", "-q", "clone")
		want := []string{"HEAD clone/.git/HEAD", "HEAD sub/.git/HEAD"}
		if got := mustScan(t, s); !reflect.DeepEqual(got, want) {
			t.Errorf("after the renames and the new repositories:\n got %q\nwant %q", got, want)
		}
		keys := s.ProtectedKeys()
		if len(keys) != 2 {
			t.Errorf("protected keys: %v", keys)
		}
	})
}

// A directory the scanner cannot read is not skipped: the user owns it,
// so the scanner makes it readable and looks inside, and says so; one it
// cannot make readable is a finding of its own. The scan runs as a normal
// user (root reads anything).
func TestScannerFailsClosedOnUnreadableDirectories(t *testing.T) {
	requireGit(t)
	asNormalUser(t, func(t *testing.T) {
		scanModes(t, func(t *testing.T, newScanner func(string) *Scanner) {
			ws := t.TempDir()
			gitIn(t, ws, nil, "init", "-q", "a/b")
			t.Cleanup(func() { os.Chmod(filepath.Join(ws, "a"), 0o755) })
			if err := os.Chmod(filepath.Join(ws, "a"), 0o300); err != nil {
				t.Fatal(err)
			}
			s := newScanner(ws)
			if got, want := mustScan(t, s), []string{"HEAD a/b/.git/HEAD"}; !reflect.DeepEqual(got, want) {
				t.Errorf("findings: %q, want %q", got, want)
			}
			notes := s.TakeNotes()
			if len(notes) != 1 || !strings.Contains(notes[0], "a/ was not readable (mode 0300)") {
				t.Errorf("notes: %q", notes)
			}
			// Made unreadable after the first scan, with a repository
			// made inside since: found again.
			gitIn(t, ws, nil, "init", "-q", "a/c")
			os.Chmod(filepath.Join(ws, "a"), 0o100)
			if got, want := mustScan(t, s), []string{"HEAD a/b/.git/HEAD", "HEAD a/c/.git/HEAD"}; !reflect.DeepEqual(got, want) {
				t.Errorf("findings after a second chmod: %q, want %q", got, want)
			}
		})
	})
}

// lockedWorkspaceEnv hands the workspace root made to the test run as a
// normal user.
const lockedWorkspaceEnv = "GITSHADOW_LOCKED_WORKSPACE"

// A directory made searchable but unreadable after a scan, with nothing
// changing in it but something below it, is read again (its mode is an
// event of its own) and made readable before what is below: the root's
// walk opens every directory on the way for reading.
func TestScannerSeesAModeChangeAboveAChange(t *testing.T) {
	requireGit(t)
	asNormalUser(t, func(t *testing.T) {
		scanModes(t, func(t *testing.T, newScanner func(string) *Scanner) {
			ws := t.TempDir()
			gitIn(t, ws, nil, "init", "-q", "a/b")
			t.Cleanup(func() { os.Chmod(filepath.Join(ws, "a"), 0o755) })
			s := newScanner(ws)
			want := []string{"HEAD a/b/.git/HEAD"}
			if got := mustScan(t, s); !reflect.DeepEqual(got, want) {
				t.Fatalf("first scan: %q", got)
			}
			if err := os.Chmod(filepath.Join(ws, "a"), 0o300); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(ws, "a", "b", ".git", "refs", "extra"), 0o755); err != nil {
				t.Fatal(err)
			}
			if got := mustScan(t, s); !reflect.DeepEqual(got, want) {
				t.Errorf("after the chmod above a change: %q, want %q", got, want)
			}
			if notes := s.TakeNotes(); len(notes) != 1 || !strings.Contains(notes[0], "a/ was not readable (mode 0300)") {
				t.Errorf("notes: %q", notes)
			}
		})
	})
}

// A directory owned by another user that the scanner cannot read is a
// finding of its own (KindUnreadable).
//
// Root makes the workspace and the directory; the scan runs as a normal
// user (asNormalUser runs the test again as one, which finds the
// workspace in lockedWorkspaceEnv).
func TestScannerReportsWhatItCannotMakeReadable(t *testing.T) {
	ws := os.Getenv(lockedWorkspaceEnv)
	if os.Getenv(normalUserEnv) != "1" {
		if os.Geteuid() != 0 {
			if os.Getenv("CI") == "true" {
				t.Fatal("CI runs as root: this test needs root to make a directory another user owns")
			}
			t.Skip("needs root to make a directory another user owns")
		}
		var err error
		if ws, err = os.MkdirTemp("", "gitshadow-locked-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(ws) })
		os.Chmod(ws, 0o755)
		if err := os.Mkdir(filepath.Join(ws, "locked"), 0o711); err != nil {
			t.Fatal(err)
		}
		t.Setenv(lockedWorkspaceEnv, ws)
	}
	asNormalUser(t, func(t *testing.T) {
		s := scanner(t, ws)
		fs, err := s.Scan()
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 1 || fs[0].Kind != KindUnreadable || fs[0].Path != "locked" {
			t.Errorf("findings: %+v", fs)
		}
	})
}

// The workspace itself made unreadable is made readable again (it is the
// user's) and scanned.
func TestScannerMakesTheWorkspaceReadable(t *testing.T) {
	requireGit(t)
	asNormalUser(t, func(t *testing.T) {
		ws := t.TempDir()
		gitIn(t, ws, nil, "init", "-q", "a")
		t.Cleanup(func() { os.Chmod(ws, 0o755) })
		s := scanner(t, ws) // opened while readable, as a session's root is
		if err := os.Chmod(ws, 0o300); err != nil {
			t.Fatal(err)
		}
		if got, want := mustScan(t, s), []string{"HEAD a/.git/HEAD"}; !reflect.DeepEqual(got, want) {
			t.Errorf("findings: %q, want %q", got, want)
		}
		if n := s.TakeNotes(); len(n) != 1 || !strings.Contains(n[0], "the workspace was not readable (mode 0300)") {
			t.Errorf("notes: %q", n)
		}
	})
}
