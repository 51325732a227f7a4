package orchestrator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools"
)

// TestTheOpenedWorkspaceIsTheOneUsed: the session and the tool runner
// (`shiro tool`) given an opened workspace read through its root and write
// through its gate. With the path moved away and another directory put in
// its place after the open, what they read and write is the directory that
// was opened; opening the path again would reach the other one.
func TestTheOpenedWorkspaceIsTheOneUsed(t *testing.T) {
	t.Parallel()
	for _, who := range []string{"the session", "the tool runner"} {
		t.Run(who, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			dir, moved := filepath.Join(base, "ws"), filepath.Join(base, "moved")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("opened"), 0o644); err != nil {
				t.Fatal(err)
			}
			w, err := workspace.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := os.Rename(dir, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("the path's"), 0o644); err != nil {
				t.Fatal(err)
			}

			sc := SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: dir}
			var run func(tools.Tool, string) (tools.Result, error)
			switch who {
			case "the session":
				s, err := NewSession(SessionOptions{Workspace: dir, Opened: w, Model: &summarizer{}, Sandbox: sc})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				run = func(tl tools.Tool, in string) (tools.Result, error) { return tl.Run(t.Context(), s.env, []byte(in)) }
			default:
				r, err := NewToolRunner(sc, "", w, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				run = func(tl tools.Tool, in string) (tools.Result, error) { return r.Run(t.Context(), tl, []byte(in)) }
			}

			res, err := run(tools.NewReadFile(), `{"path": "a.txt"}`)
			if err != nil || res.IsError || !strings.Contains(res.Text, "opened") || strings.Contains(res.Text, "the path's") {
				t.Errorf("read_file a.txt: %q, %v; want the opened directory's file", res.Text, err)
			}
			res, err = run(tools.NewWriteFile(), `{"path": "b.txt", "content": "written"}`)
			if err != nil || res.IsError {
				t.Fatalf("write_file b.txt: %q, %v", res.Text, err)
			}
			if got, err := os.ReadFile(filepath.Join(moved, "b.txt")); err != nil || string(got) != "written" {
				t.Errorf("b.txt in the opened directory: %q, %v; want the write", got, err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "b.txt")); !os.IsNotExist(err) {
				t.Errorf("b.txt at the path: %v; want nothing written there", err)
			}
		})
	}
}
