package tui

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/shiroagent/shiro/agent"
)

// hostileWorkspace is a workspace beside a secret, with the entries a
// repository or the sandbox can plant to make a host-side read leak or
// hang.
func hostileWorkspace(t *testing.T) (ws, secret string) {
	t.Helper()
	outside := t.TempDir()
	secret = "SECRET-MARKER-91c2"
	write := func(p, data string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "id_rsa"), secret+"\n")
	write(filepath.Join(outside, "ignore"), "*.go\n")
	ws = t.TempDir()
	write(filepath.Join(ws, "main.go"), "package main\n")
	write(filepath.Join(ws, "docs", "real.md"), "real\n")
	write(filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	links := map[string]string{
		"outside.txt":  filepath.Join(outside, "id_rsa"),
		"environ.txt":  "/proc/self/environ",
		"hop.txt":      "chain.txt",
		"chain.txt":    "../" + filepath.Base(outside) + "/id_rsa",
		"inside.md":    "docs/real.md",
		".shiroignore": filepath.Join(outside, "ignore"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"fifo.txt", ".gitignore", ".git/info/exclude", "docs/.gitignore"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(ws, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws, secret
}

func TestPreviewStaysInTheWorkspace(t *testing.T) {
	t.Parallel()
	ws, secret := hostileWorkspace(t)
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	tests := []struct {
		path, problem string
	}{
		{"outside.txt", "the path leads outside the workspace"},
		{"environ.txt", "the path leads outside the workspace"},
		{"hop.txt", "the path leads outside the workspace"},
		{"fifo.txt", "not a regular file"},
		{"docs", "not a regular file"},
		{"inside.md", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			input := `{"path":"` + tt.path + `","oldString":"real","newString":"REAL"}`
			p := buildPreview(hostReader(root, ws), agent.ApprovalRequest{Tool: "edit_file", Input: []byte(input)})
			if p.problem != tt.problem {
				t.Errorf("problem %q, want %q", p.problem, tt.problem)
			}
			for _, r := range p.rows {
				if strings.Contains(r.text, secret) || strings.Contains(r.text, "PATH=") {
					t.Errorf("the preview shows %q", r.text)
				}
			}
			if tt.problem == "" && (p.added != 1 || p.removed != 1) {
				t.Errorf("the edit inside was not previewed: %+v", p)
			}
		})
	}
}

func TestFilePickerIndexStaysInTheWorkspace(t *testing.T) {
	t.Parallel()
	ws, _ := hostileWorkspace(t)
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	files, err := indexFiles(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	// The ignore files that are FIFOs or symlinks are not read (the
	// symlinked .shiroignore would hide main.go); links are listed by
	// name, as git lists them, and never read.
	want := []string{".shiroignore", "chain.txt", "environ.txt", "hop.txt", "inside.md", "main.go", "outside.txt", "docs/real.md"}
	if !slices.Equal(files, want) {
		t.Errorf("files %q, want %q", files, want)
	}
}

func TestContextListsReadAndRefusedInstructions(t *testing.T) {
	t.Parallel()
	refused := "AGENTS.md is a symlink that leaves the repository; not read"
	f := newFixture(t, 100, func(o *Options) {
		o.Instructions = []string{"CLAUDE.md"}
		o.InstructionsRefused = []string{refused}
	})
	f.m.cmdContext("")
	if f.m.info == nil || !strings.Contains(f.m.info.body, "instructions: CLAUDE.md\nrefused: "+refused+"\n") {
		t.Errorf("/context: %+v", f.m.info)
	}
	f = newFixture(t, 100, func(o *Options) { o.Instructions = nil })
	f.m.cmdContext("")
	if f.m.info == nil || !strings.HasPrefix(f.m.info.body, "no AGENTS.md found (nor CLAUDE.md, .shiro.md) - /init writes one\ncontext: ") {
		t.Errorf("/context without instructions: %+v", f.m.info)
	}
}
