package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// jailEnv is a workspace beside an outside directory holding a sentinel
// file, with symlinks that lead out of the workspace.
func jailEnv(t *testing.T) (env *Env, outside string) {
	t.Helper()
	outside = t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "sentinel.txt"), []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env = newTestEnv(t, map[string]string{"inside.txt": "ok\n", "sub/in.txt": "in\n"})
	for _, l := range []struct{ target, name string }{
		{"/etc", "evil"},    // absolute, to a system directory
		{outside, "parent"}, // a symlinked parent directory
		{filepath.Join(outside, "sentinel.txt"), "file-link"},     // a symlinked file
		{"../" + filepath.Base(outside) + "/sentinel.txt", "rel"}, // relative, climbing out
		{"inside.txt", "good-link"},                               // stays inside
		{"sub", "good-dir"},                                       // stays inside
	} {
		if err := os.Symlink(l.target, filepath.Join(env.Workspace, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	return env, outside
}

// checkOutside fails unless outside still holds only the untouched sentinel.
func checkOutside(t *testing.T, outside string) {
	t.Helper()
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(outside, "sentinel.txt"))
	if len(entries) != 1 || string(data) != "SECRET\n" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("outside directory changed: %v, sentinel %q", names, data)
	}
}

func TestJail(t *testing.T) {
	t.Parallel()
	env, outside := jailEnv(t)
	rel := "../" + filepath.Base(outside) + "/sentinel.txt"
	abs := filepath.Join(outside, "sentinel.txt")
	paths := []string{"../x", "a/../../x", rel, abs, "evil/passwd", "parent/sentinel.txt", "parent/new.txt", "file-link", "rel", "/etc/passwd"}
	type toolCase struct {
		tool  Tool
		input func(p string) map[string]any
	}
	tools := []toolCase{
		{NewReadFile(), func(p string) map[string]any { return map[string]any{"path": p} }},
		{NewWriteFile(), func(p string) map[string]any { return map[string]any{"path": p, "content": "PWNED"} }},
		{NewEditFile(), func(p string) map[string]any {
			return map[string]any{"path": p, "oldString": "SECRET", "newString": "PWNED"}
		}},
		{NewMultiEdit(), func(p string) map[string]any {
			return map[string]any{"path": p, "edits": []map[string]string{{"oldString": "SECRET", "newString": "PWNED"}}}
		}},
	}
	for _, tc := range tools {
		for _, p := range paths {
			if tc.tool.Name() != "read_file" && p == "/etc/passwd" {
				continue // never aim a write at a real system file, even in a test
			}
			t.Run(tc.tool.Name()+" "+p, func(t *testing.T) {
				res := call(t, tc.tool, env, jsonInput(t, tc.input(p)))
				if want := "Path escapes workspace: " + p; res.Text != want || !res.IsError {
					t.Errorf("got %q (error %v), want %q", res.Text, res.IsError, want)
				}
			})
		}
	}
	for _, p := range []string{"../", "/", "evil", "parent", abs} {
		t.Run("list_dir "+p, func(t *testing.T) {
			res := call(t, NewListDir(), env, jsonInput(t, map[string]any{"path": p}))
			checkResult(t, res, "Path escapes workspace: "+p, true)
		})
	}
	t.Run("read_many_files reports each escape in its block", func(t *testing.T) {
		res := call(t, NewReadManyFiles(), env, `{"files":[{"path":"parent/sentinel.txt"},{"path":"inside.txt"},{"path":"evil/passwd"}]}`)
		want := "===== parent/sentinel.txt =====\n[unreadable: Path escapes workspace: parent/sentinel.txt]\n\n" +
			"===== inside.txt =====\n1: ok\n2: \n\n" +
			"===== evil/passwd =====\n[unreadable: Path escapes workspace: evil/passwd]"
		checkResult(t, res, want, false)
	})
	t.Run("glob never leaves the workspace", func(t *testing.T) {
		for _, pattern := range []string{"**", "parent/*", "evil/*", "**/sentinel.txt"} {
			res := call(t, NewGlob(), env, jsonInput(t, map[string]any{"pattern": pattern, "includeIgnored": true}))
			if strings.Contains(res.Text, "sentinel") || strings.Contains(res.Text, "passwd") || strings.Contains(res.Text, "evil/") {
				t.Errorf("%s: %q", pattern, res.Text)
			}
		}
	})
	t.Run("symlinks that stay inside work", func(t *testing.T) {
		checkResult(t, call(t, NewReadFile(), env, `{"path":"good-link"}`), "1: ok\n2: ", false)
		checkResult(t, call(t, NewReadFile(), env, `{"path":"good-dir/in.txt"}`), "1: in\n2: ", false)
		checkResult(t, call(t, NewReadFile(), env, jsonInput(t, map[string]string{"path": filepath.Join(env.Workspace, "sub", "in.txt")})), "1: in\n2: ", false)
	})
	checkOutside(t, outside)
}

// A symlink swapped in after the check must not leak: one goroutine flips
// a path between a real file (or directory) and a symlink to the outside
// while tools read and write through it.
func TestJailSwappedSymlink(t *testing.T) {
	t.Parallel()
	env, outside := jailEnv(t)
	ws := env.Workspace
	if err := os.WriteFile(filepath.Join(ws, "real.txt"), []byte("inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "realdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Prepared links, renamed over "flip" and "flipdir" (rename is atomic).
	mk := func(target, name string) error { return os.Symlink(target, filepath.Join(ws, name)) }
	if err := errors.Join(mk("real.txt", "flip"), mk("realdir", "flipdir")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			fileTarget, dirTarget := "real.txt", "realdir"
			if i%2 == 1 {
				fileTarget, dirTarget = filepath.Join(outside, "sentinel.txt"), outside
			}
			err := errors.Join(
				mk(fileTarget, "flip.tmp"),
				mk(dirTarget, "flipdir.tmp"),
				os.Rename(filepath.Join(ws, "flip.tmp"), filepath.Join(ws, "flip")),
				os.Rename(filepath.Join(ws, "flipdir.tmp"), filepath.Join(ws, "flipdir")))
			if err != nil {
				t.Errorf("swapping: %v", err)
				return
			}
		}
	})
	read, write, edit := NewReadFile(), NewWriteFile(), NewEditFile()
	for i := range 400 {
		res := call(t, read, env, `{"path":"flip"}`)
		if strings.Contains(res.Text, "SECRET") {
			t.Fatalf("read %d leaked the sentinel: %q", i, res.Text)
		}
		res = call(t, read, env, `{"path":"flipdir/sentinel.txt"}`)
		if strings.Contains(res.Text, "SECRET") {
			t.Fatalf("read %d through the directory leaked the sentinel: %q", i, res.Text)
		}
		call(t, write, env, `{"path":"flipdir/new.txt","content":"PWNED"}`)
		call(t, edit, env, `{"path":"flip","oldString":"SECRET","newString":"PWNED"}`)
	}
	close(stop)
	wg.Wait()
	checkOutside(t, outside)
}
