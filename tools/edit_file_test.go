package tools

import (
	"testing"
)

func TestEditFile(t *testing.T) {
	t.Parallel()
	const src = "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"
	tool := NewEditFile()
	tests := []struct {
		name    string
		input   string
		want    string
		wantErr bool
		after   string // content of f.go afterwards
	}{
		{"unique replace", `{"path":"f.go","oldString":"func a() {\n\treturn 1","newString":"func a() {\n\treturn 2"}`,
			"Replaced 1 occurrence(s) in f.go", false, "func a() {\n\treturn 2\n}\n\nfunc b() {\n\treturn 1\n}\n"},
		{"replaceAll replaces every occurrence", `{"path":"f.go","oldString":"return 1","newString":"return 3","replaceAll":true}`,
			"Replaced 2 occurrence(s) in f.go", false, "func a() {\n\treturn 3\n}\n\nfunc b() {\n\treturn 3\n}\n"},
		{"replaceAll with one occurrence", `{"path":"f.go","oldString":"func b","newString":"func c","replaceAll":true}`,
			"Replaced 1 occurrence(s) in f.go", false, "func a() {\n\treturn 1\n}\n\nfunc c() {\n\treturn 1\n}\n"},
		{"identical strings come first, even for a missing file", `{"path":"gone.go","oldString":"x","newString":"x"}`,
			"oldString and newString are identical", true, src},
		{"missing file", `{"path":"gone.go","oldString":"x","newString":"y"}`,
			"No such file: gone.go", true, src},
		{"no match", `{"path":"f.go","oldString":"return 9","newString":"return 1"}`,
			"oldString not found in f.go", true, src},
		{"whitespace must match exactly", `{"path":"f.go","oldString":"    return 1","newString":"return 2"}`,
			"oldString not found in f.go", true, src},
		{"ambiguous without replaceAll", `{"path":"f.go","oldString":"return 1","newString":"return 2"}`,
			"oldString appears 2 times in f.go. Add surrounding context or set replaceAll.", true, src},
		{"empty oldString is invalid", `{"path":"f.go","oldString":"","newString":"x"}`,
			"Invalid input for edit_file: oldString must not be empty", true, src},
		{"newString is required", `{"path":"f.go","oldString":"x"}`,
			`Invalid input for edit_file: missing required parameter "newString"`, true, src},
		{"escape", `{"path":"../f.go","oldString":"x","newString":"y"}`,
			"Path escapes workspace: ../f.go", true, src},
		{"deleting text", `{"path":"f.go","oldString":"\nfunc b() {\n\treturn 1\n}\n","newString":""}`,
			"Replaced 1 occurrence(s) in f.go", false, "func a() {\n\treturn 1\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, map[string]string{"f.go": src})
			checkResult(t, call(t, tool, env, tt.input), tt.want, tt.wantErr)
			if got := readWS(t, env, "f.go"); got != tt.after {
				t.Errorf("f.go = %q, want %q", got, tt.after)
			}
			assertNoTempFiles(t, env.Workspace)
		})
	}
}
