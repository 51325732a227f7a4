package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/internal/dirstate"
	"github.com/shiroagent/shiro/internal/hostwrite"
)

// repoFiles are a workspace whose .git (made by hand) the gate protects,
// and a hostile repository's tracked d/hooks/pre-commit.
var repoFiles = map[string]string{
	".git/HEAD":           "ref: refs/heads/main\n",
	".git/config":         "[core]\n\tbare = false\n",
	".git/objects/info/":  "",
	".git/refs/heads/":    "",
	".git/hooks/":         "",
	"README":              "hello\n",
	"d/hooks/pre-commit*": "#!/bin/sh\ntouch /tmp/planted\n",
	"d/notes":             "notes\n",
}

// newRepoFixture is newFixture for a workspace that holds files before the
// gate is made (so that it finds the workspace's .git).
func newRepoFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	fx := &fixture{ws: t.TempDir(), now: time.Now()}
	for name := range files {
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(filepath.Join(fx.ws, name), 0o755); err != nil {
				t.Fatal(err)
			}
			delete(files, name)
		}
	}
	if err := dirstate.Write(fx.ws, files); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(fx.ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	gate, err := hostwrite.New(root, fx.ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Close() })
	fx.store, err = Open(filepath.Join(t.TempDir(), "store"), root, gate, Options{Now: func() time.Time { return fx.now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fx.store.Close() })
	return fx
}

func copyFiles(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// gitState is everything under the workspace's .git.
func gitState(t *testing.T, ws string) map[string]string {
	t.Helper()
	return state(t, filepath.Join(ws, ".git"))
}

func sameMaps(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %s is %q, was %q", what, k, after[k], v)
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s appeared (%q)", what, k, v)
		}
	}
}

// The turn moves d away, puts a symlink to .git in its place and has the
// walker ignore it: undoing the turn must not restore d/hooks/pre-commit
// into the host's .git/hooks. It refuses, says why, and changes nothing;
// once the symlink is gone the undo puts everything back.
func TestUndoDoesNotWriteThroughASymlinkToGit(t *testing.T) {
	t.Parallel()
	fx := newRepoFixture(t, copyFiles(repoFiles))
	ws := fx.ws
	before := state(t, ws)
	gitBefore := gitState(t, ws)
	cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})

	sh(t, ws,
		func(d string) error { return os.Rename(filepath.Join(d, "d"), filepath.Join(t.TempDir(), "d")) },
		func(d string) error { return os.Symlink(".git", filepath.Join(d, "d")) },
		func(d string) error { return os.WriteFile(filepath.Join(d, ".gitignore"), []byte("/d\n"), 0o644) },
		func(d string) error { return os.WriteFile(filepath.Join(d, "README"), []byte("changed\n"), 0o644) },
	)
	end := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindEnd})
	during := state(t, ws)

	plan, err := fx.store.Plan(t.Context(), cp, &end)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fx.store.Apply(t.Context(), plan, nil)
	var refusal *hostwrite.Refusal
	if !errors.As(err, &refusal) {
		t.Fatalf("Apply = %v, want a refusal", err)
	}
	for _, want := range []string{"nothing was changed", "d/hooks/pre-commit: d is a symlink; shiro writes only through real directories"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Apply's error lacks %q: %v", want, err)
		}
	}
	sameMaps(t, ".git", gitBefore, gitState(t, ws))
	sameMaps(t, "the workspace", during, state(t, ws))

	// The symlink removed, the undo goes through.
	if err := os.Remove(filepath.Join(ws, "d")); err != nil {
		t.Fatal(err)
	}
	plan, err = fx.store.Plan(t.Context(), cp, &end)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fx.store.Apply(t.Context(), plan, nil); err != nil {
		t.Fatal(err)
	}
	sameMaps(t, "the workspace after the undo", before, state(t, ws))
}

// The same turn without the ignore rule: the walker lists d as a symlink,
// so the undo removes it and makes d a real directory again.
func TestUndoReplacesAListedSymlinkWithItsDirectory(t *testing.T) {
	t.Parallel()
	fx := newRepoFixture(t, copyFiles(repoFiles))
	ws := fx.ws
	before := state(t, ws)
	gitBefore := gitState(t, ws)
	cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
	sh(t, ws,
		func(d string) error { return os.Rename(filepath.Join(d, "d"), filepath.Join(t.TempDir(), "d")) },
		func(d string) error { return os.Symlink(".git", filepath.Join(d, "d")) },
	)
	end := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindEnd})
	plan, err := fx.store.Plan(t.Context(), cp, &end)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fx.store.Apply(t.Context(), plan, nil); err != nil {
		t.Fatal(err)
	}
	sameMaps(t, ".git", gitBefore, gitState(t, ws))
	sameMaps(t, "the workspace after the undo", before, state(t, ws))
}

// A directory swapped for a symlink to .git after the new contents were
// written beside their files: the renames happen in the directory the gate
// passed (held open), never through the symlink; a directory opened again
// for its renames is refused.
func TestRestoreSurvivesASymlinkSwappedInMidRestore(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		keepOpen int
	}{
		{"the directory held open", 0},
		{"the directory opened again", -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newRepoFixture(t, copyFiles(map[string]string{
				".git/HEAD": "ref: refs/heads/main\n", ".git/objects/": "", ".git/refs/": "", ".git/hooks/": "",
				"hooks/pre-commit*": "#!/bin/sh\necho fine\n", "README": "hello\n",
			}))
			ws := fx.ws
			gitBefore := gitState(t, ws)
			cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
			write(t, ws, map[string]string{"hooks/pre-commit": "#!/bin/sh\ntouch /tmp/planted\n", "README": "changed\n"})
			end := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindEnd})
			plan, err := fx.store.Plan(t.Context(), cp, &end)
			if err != nil {
				t.Fatal(err)
			}
			fx.store.keepOpen = tt.keepOpen
			moved := filepath.Join(ws, "moved")
			fx.store.afterTemps = func() {
				if err := os.Rename(filepath.Join(ws, "hooks"), moved); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(".git/hooks", filepath.Join(ws, "hooks")); err != nil {
					t.Error(err)
				}
			}
			_, err = fx.store.Apply(t.Context(), plan, nil)
			sameMaps(t, ".git", gitBefore, gitState(t, ws))
			if b, _ := os.ReadFile(filepath.Join(ws, "README")); string(b) != "hello\n" {
				t.Errorf("README = %q: the other directory was not restored", b)
			}
			got, _ := os.ReadFile(filepath.Join(moved, "pre-commit"))
			if tt.keepOpen == 0 {
				if err != nil {
					t.Errorf("Apply = %v", err)
				}
				if string(got) != "#!/bin/sh\necho fine\n" {
					t.Errorf("the held directory's file = %q, want the restored content", got)
				}
				entries, _ := os.ReadDir(moved)
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), ".shiro-undo-") {
						t.Errorf("a temporary file was left: %s", e.Name())
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "hooks/pre-commit: hooks is a symlink; shiro writes only through real directories") {
				t.Errorf("Apply = %v, want the refusal of hooks/pre-commit", err)
			}
			if string(got) != "#!/bin/sh\ntouch /tmp/planted\n" {
				t.Errorf("the moved file = %q, want it left as the turn made it", got)
			}
		})
	}
}

// A symlink is put back only into a directory the walker lists: not into
// one the turn had the walker ignore. One in a directory the undo makes
// again is put back.
func TestUndoPutsSymlinksBackOnlyWhereTheyAreListed(t *testing.T) {
	t.Parallel()
	t.Run("into a directory the turn ignored", func(t *testing.T) {
		t.Parallel()
		fx := newRepoFixture(t, map[string]string{"lib/link": "->../README", "lib/x": "x\n", "README": "hello\n"})
		ws := fx.ws
		cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
		sh(t, ws,
			func(d string) error { return os.Remove(filepath.Join(d, "lib", "link")) },
			func(d string) error { return os.WriteFile(filepath.Join(d, ".gitignore"), []byte("lib/\n"), 0o644) },
		)
		end := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindEnd})
		during := state(t, ws)
		plan, err := fx.store.Plan(t.Context(), cp, &end)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fx.store.Apply(t.Context(), plan, nil)
		if err == nil || !strings.Contains(err.Error(), "lib/link: lib is not a directory shiro lists") {
			t.Errorf("Apply = %v, want the symlink refused", err)
		}
		sameMaps(t, "the workspace", during, state(t, ws))
	})
	t.Run("into a directory the undo makes again", func(t *testing.T) {
		t.Parallel()
		fx := newRepoFixture(t, map[string]string{"src/deep/link": "->../x.go", "src/x.go": "package x\n"})
		ws := fx.ws
		before := state(t, ws)
		cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
		sh(t, ws, func(d string) error { return os.RemoveAll(filepath.Join(d, "src")) })
		end := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindEnd})
		plan, err := fx.store.Plan(t.Context(), cp, &end)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fx.store.Apply(t.Context(), plan, nil); err != nil {
			t.Fatal(err)
		}
		sameMaps(t, "the workspace after the undo", before, state(t, ws))
	})
}

func TestRestoreWithoutAGateWritesNothing(t *testing.T) {
	t.Parallel()
	fx := newFixture(t, Options{})
	write(t, fx.ws, map[string]string{"a": "a\n"})
	cp := fx.record(t, Meta{Session: "s", Turn: 1, Kind: KindTurn})
	write(t, fx.ws, map[string]string{"a": "A\n"})
	plan, err := fx.store.Plan(t.Context(), cp, nil)
	if err != nil {
		t.Fatal(err)
	}
	fx.store.gate = nil
	if _, err := fx.store.Apply(t.Context(), plan, nil); !errors.Is(err, errNoGate) {
		t.Errorf("Apply = %v, want %v", err, errNoGate)
	}
	if b, _ := os.ReadFile(filepath.Join(fx.ws, "a")); string(b) != "A\n" {
		t.Errorf("a = %q", b)
	}
}
