package tools

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFIFOsNeverBlock puts FIFOs where the host-side tools read: a file the
// model names, and every ignore file the walker reads. Opening a FIFO for
// reading waits for a writer, so a tool that opens one plainly never
// returns (the test then fails by its timeout).
func TestFIFOsNeverBlock(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{"a.txt": "hello\n", "sub/b.txt": "hello\n", ".git/info/": ""})
	for _, p := range []string{"fifo.txt", ".gitignore", ".shiroignore", ".git/info/exclude", "sub/.gitignore"} {
		if err := syscall.Mkfifo(filepath.Join(env.Workspace, filepath.FromSlash(p)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// grep without rg: the Go search reads the files on the host.
	env.Sandbox = noRg(localSandbox(t, env.Workspace), new(int))
	tests := []struct {
		tool  Tool
		input string
		want  func(Result) bool
	}{
		{NewReadFile(), `{"path":"fifo.txt"}`, func(r Result) bool { return r.IsError && r.Text == "fifo.txt is not a regular file." }},
		{NewReadManyFiles(), `{"files":[{"path":"fifo.txt"},{"path":"a.txt"}]}`, func(r Result) bool { return strings.Contains(r.Text, "hello") }},
		{NewEditFile(), `{"path":"fifo.txt","oldString":"a","newString":"b"}`, func(r Result) bool {
			return r.IsError && r.Text == "fifo.txt is not a regular file."
		}},
		{NewMultiEdit(), `{"path":"fifo.txt","edits":[{"oldString":"a","newString":"b"}]}`, func(r Result) bool {
			return r.IsError && r.Text == "fifo.txt is not a regular file."
		}},
		{NewGlob(), `{"pattern":"**/*.txt"}`, func(r Result) bool { return strings.Contains(r.Text, "sub/b.txt") }},
		{NewListDir(), `{"path":"."}`, func(r Result) bool { return strings.Contains(r.Text, "a.txt") }},
		{NewGrep(), `{"pattern":"hello"}`, func(r Result) bool { return strings.Contains(r.Text, "sub/b.txt") }},
	}
	for _, tt := range tests {
		t.Run(tt.tool.Name(), func(t *testing.T) {
			t.Parallel()
			if res := call(t, tt.tool, env, tt.input); !tt.want(res) {
				t.Errorf("%s: %q (error %v)", tt.tool.Name(), res.Text, res.IsError)
			}
		})
	}
}
