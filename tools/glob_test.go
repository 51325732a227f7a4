package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{
		".gitignore":          "build/\n",
		"top.ts":              "",
		"readme.md":           "",
		"src/app.ts":          "",
		"src/app.test.ts":     "",
		"src/lib/x.ts":        "",
		"src/lib/y.go":        "",
		"build/out.ts":        "",
		"node_modules/m/i.ts": "",
		"docs/a.md":           "",
		"docs/b.md":           "",
		"weird/[x].md":        "",
	})
	os.Symlink("src", filepath.Join(env.Workspace, "srclink"))
	tool := NewGlob()
	tests := []struct {
		name    string
		input   string
		want    string
		wantErr bool
	}{
		{"** spans directories, shallow first", `{"pattern":"**/*.ts"}`, "top.ts\nsrc/app.test.ts\nsrc/app.ts\nsrc/lib/x.ts", false},
		{"a fixed leading directory", `{"pattern":"src/**/*.ts"}`, "src/app.test.ts\nsrc/app.ts\nsrc/lib/x.ts", false},
		{"* stays in one directory", `{"pattern":"*.ts"}`, "top.ts", false},
		{"? and alternatives", `{"pattern":"docs/?.{md,txt}"}`, "docs/a.md\ndocs/b.md", false},
		{"escaped brackets", `{"pattern":"weird/\\[x\\].md"}`, "weird/[x].md", false},
		{"a leading ./ is dropped", `{"pattern":"./src/*.ts"}`, "src/app.test.ts\nsrc/app.ts", false},
		{"an absolute pattern inside the workspace", jsonInput(t, map[string]string{"pattern": filepath.ToSlash(env.Workspace) + "/src/lib/*"}), "src/lib/x.ts\nsrc/lib/y.go", false},
		{"ignored files are left out", `{"pattern":"build/*.ts"}`, "No files matched.", false},
		{"includeIgnored adds them, never node_modules", `{"pattern":"**/*.ts","includeIgnored":true}`, "top.ts\nbuild/out.ts\nsrc/app.test.ts\nsrc/app.ts\nsrc/lib/x.ts", false},
		{"node_modules named directly", `{"pattern":"node_modules/**","includeIgnored":true}`, "No files matched.", false},
		{"symlinked directories are not entered", `{"pattern":"srclink/*.ts"}`, "No files matched.", false},
		{"limit stops early", `{"pattern":"**/*.ts","limit":2}`, "top.ts\nsrc/app.test.ts", false},
		{"no match", `{"pattern":"**/*.rs"}`, "No files matched.", false},
		{"missing base directory", `{"pattern":"nope/**/*.ts"}`, "No files matched.", false},
		{"escape", `{"pattern":"../*.ts"}`, "Path escapes workspace: ../*.ts", true},
		{"absolute outside", `{"pattern":"/etc/*"}`, "Path escapes workspace: /etc/*", true},
		{"invalid pattern", `{"pattern":"src/[a"}`, "Invalid glob pattern: src/[a", true},
		{"limit 0 is invalid", `{"pattern":"*","limit":0}`, "Invalid input for glob: limit must be at least 1, got 0", true},
		{"pattern is required", `{}`, `Invalid input for glob: missing required parameter "pattern"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkResult(t, call(t, tool, env, tt.input), tt.want, tt.wantErr)
		})
	}
}

func TestGlobDefaultLimit(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for i := range 250 {
		files[fmt.Sprintf("f%03d.txt", i)] = ""
	}
	env := newTestEnv(t, files)
	res := call(t, NewGlob(), env, `{"pattern":"*.txt"}`)
	if lines := strings.Split(res.Text, "\n"); len(lines) != 200 || lines[199] != "f199.txt" {
		t.Errorf("%d paths, last %q", len(lines), lines[len(lines)-1])
	}
}

// write_file then glob then read_file, end to end.
func TestWriteGlobRead(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, nil)
	checkResult(t, call(t, NewWriteFile(), env, `{"path":"src/app.ts","content":"export const port = 8080;\n"}`), "Wrote 26 chars to src/app.ts", false)
	checkResult(t, call(t, NewGlob(), env, `{"pattern":"src/**/*.ts"}`), "src/app.ts", false)
	checkResult(t, call(t, NewReadFile(), env, `{"path":"src/app.ts"}`), "1: export const port = 8080;\n2: ", false)
}
