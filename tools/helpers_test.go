package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/shiroagent/shiro/internal/hostwrite"
)

// newTestEnv makes a workspace in a temporary directory holding files
// (path -> content; a path ending in "/" makes an empty directory).
func newTestEnv(t *testing.T, files map[string]string) *Env {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	gate, err := hostwrite.New(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gate.Close() })
	return &Env{Workspace: dir, Root: root, Gate: gate}
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if name[len(name)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// call runs tool with input (a JSON text) and fails the test on a Go error.
func call(t *testing.T, tool Tool, env *Env, input string) Result {
	t.Helper()
	res, err := tool.Run(t.Context(), env, json.RawMessage(input))
	if err != nil {
		t.Fatalf("%s(%s): %v", tool.Name(), input, err)
	}
	return res
}

// jsonInput marshals v for call.
func jsonInput(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readWS(t *testing.T, env *Env, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.Workspace, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkResult(t *testing.T, got Result, wantText string, wantErr bool) {
	t.Helper()
	if got.Text != wantText || got.IsError != wantErr {
		t.Errorf("result = %q (error %v)\n     want %q (error %v)", got.Text, got.IsError, wantText, wantErr)
	}
}
