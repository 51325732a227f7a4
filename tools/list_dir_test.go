package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListDir(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{
		".gitignore":           "build/\n*.log\n",
		"readme.md":            "hi",
		"big.bin":              strings.Repeat("b", 1572864),
		"src/app.ts":           strings.Repeat("a", 2048),
		"src/lib/util.ts":      "u",
		"src/lib/deep/x/y.ts":  "y",
		"build/out.js":         "o",
		"debug.log":            "d",
		"node_modules/m/i.js":  "m",
		"empty/":               "",
		"ignored-only/a.log":   "l",
		"Zeta.md":              "z",
		"alpha.md":             "a",
		"src/lib/deep/x/z.log": "z",
	})
	tool := NewListDir()
	tests := []struct {
		name    string
		input   string
		want    string
		wantErr bool
	}{
		{"default depth 2 from the root", `{}`, strings.Join([]string{
			".",
			".gitignore  13B",
			"alpha.md  1B",
			"big.bin  1.5M",
			"readme.md  2B",
			"src/",
			"  app.ts  2K",
			"  lib/",
			"Zeta.md  1B",
		}, "\n"), false},
		{"no input at all takes the defaults", ``, strings.Join([]string{
			".", ".gitignore  13B", "alpha.md  1B", "big.bin  1.5M", "readme.md  2B", "src/", "  app.ts  2K", "  lib/", "Zeta.md  1B",
		}, "\n"), false},
		{"depth 1 still names directories", `{"path":".","depth":1}`, strings.Join([]string{
			".", ".gitignore  13B", "alpha.md  1B", "big.bin  1.5M", "readme.md  2B", "src/", "Zeta.md  1B",
		}, "\n"), false},
		{"deep directories are shown down to depth", `{"path":"src","depth":4}`, strings.Join([]string{
			"src/", "app.ts  2K", "lib/", "  deep/", "    x/", "      y.ts  1B", "  util.ts  1B",
		}, "\n"), false},
		{"includeIgnored shows ignored files but never node_modules", `{"depth":1,"includeIgnored":true}`, strings.Join([]string{
			".", ".gitignore  13B", "alpha.md  1B", "big.bin  1.5M", "build/", "debug.log  1B", "ignored-only/", "readme.md  2B", "src/", "Zeta.md  1B",
		}, "\n"), false},
		{"subdirectory scope with a trailing slash", `{"path":"src/lib/"}`, "src/lib/\ndeep/\n  x/\nutil.ts  1B", false},
		{"absolute path inside the workspace", jsonInput(t, map[string]any{"path": filepath.Join(env.Workspace, "src", "lib"), "depth": 1}), "src/lib/\ndeep/\nutil.ts  1B", false},
		{"an ignored directory listed directly shows its files", `{"path":"build"}`, "build/\nout.js  1B", false},
		{"empty directory", `{"path":"empty"}`, "empty/ is empty (or everything in it is ignored).", false},
		{"directory holding only ignored files", `{"path":"ignored-only"}`, "ignored-only/ is empty (or everything in it is ignored).", false},
		{"a file is refused", `{"path":"readme.md"}`, "Not a directory: readme.md", true},
		{"a missing path is refused", `{"path":"nope"}`, "Not a directory: nope", true},
		{"escape", `{"path":"../"}`, "Path escapes workspace: ../", true},
		{"depth above 6", `{"depth":7}`, "Invalid input for list_dir: depth must be at most 6, got 7", true},
		{"depth below 1", `{"depth":0}`, "Invalid input for list_dir: depth must be at least 1, got 0", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkResult(t, call(t, tool, env, tt.input), tt.want, tt.wantErr)
		})
	}
}

func TestListDirEmptyRoot(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{".gitignore": "*\n"})
	checkResult(t, call(t, NewListDir(), env, `{}`), ". is empty (or everything in it is ignored).", false)
}

func TestListDirEntryCap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files int
		note  bool
	}{
		{"exactly 300 entries, no note", 300, false},
		{"301 entries are cut at 300 with a note", 301, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{}
			for i := range tt.files {
				files[fmt.Sprintf("f%03d.txt", i)] = ""
			}
			env := newTestEnv(t, files)
			res := call(t, NewListDir(), env, `{}`)
			lines := strings.Split(res.Text, "\n")
			rows := len(lines) - 1
			hasNote := lines[len(lines)-1] == "... [300-entry limit reached]"
			if hasNote {
				rows--
			}
			if rows != 300 || hasNote != tt.note {
				t.Errorf("%d rows, note %v; tail %q", rows, hasNote, lines[len(lines)-1])
			}
		})
	}
}

func TestListDirSymlinks(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{"real/a.txt": "aaa"})
	os.Symlink("real", filepath.Join(env.Workspace, "dirlink"))
	os.Symlink("real/a.txt", filepath.Join(env.Workspace, "filelink"))
	// The directory symlink is neither entered nor listed; the file symlink
	// shows its target's size.
	checkResult(t, call(t, NewListDir(), env, `{}`), ".\nfilelink  3B\nreal/\n  a.txt  3B", false)
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0B"}, {2, "2B"}, {1023, "1023B"}, {1024, "1K"}, {1535, "1K"}, {1536, "2K"},
		{2048, "2K"}, {1048575, "1024K"}, {1048576, "1.0M"}, {1310720, "1.3M"},
		{1572864, "1.5M"}, {1101004, "1.0M"}, {1101005, "1.1M"}, {10 << 30, "10240.0M"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			t.Parallel()
			if got := formatSize(tt.n); got != tt.want {
				t.Errorf("formatSize(%d) = %q, want %q", tt.n, got, tt.want)
			}
		})
	}
}

func TestLocaleCompare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"a", "b", -1},
		{"B", "a", 1},
		{"a", "A", -1},
		{"readme.md", "README.md", -1},
		{".gitignore", "a", -1},
		{"_x", "-x", -1},
		{"x9", "xa", -1},
		{"src/", "src/a", -1},
		{"src.go", "src/", -1},
		{"same", "same", 0},
	}
	for _, tt := range tests {
		t.Run(tt.a+" vs "+tt.b, func(t *testing.T) {
			t.Parallel()
			if got := localeCompare(tt.a, tt.b); got != tt.want {
				t.Errorf("localeCompare(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}
