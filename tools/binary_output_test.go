package tools

import (
	"strings"
	"testing"
)

func TestTextOrBinary(t *testing.T) {
	t.Parallel()
	junk := "\x00\x01\x02\xff\xfe" + strings.Repeat("\x10", 20)
	tests := []struct {
		name, in, want string
	}{
		{"text passes as it is", "hello\n\tworld\r\n\x1b[31mred\x1b[0m\n", "hello\n\tworld\r\n\x1b[31mred\x1b[0m\n"},
		{"UTF-8 is text", "naïve 日本語 🙂\n", "naïve 日本語 🙂\n"},
		{"all binary", junk, "<binary output, 25 bytes>"},
		{"binary between text", "start\n" + junk + "\nend\n", "start\n<binary output, 26 bytes>\nend\n"},
		{"short text inside binary is binary", junk + "\nab\n" + junk + "\ntail line that is long\n", "<binary output, 55 bytes>\ntail line that is long\n"},
		{"long text inside binary stays", junk + "\na line of real text here\n" + junk, "<binary output, 26 bytes>\na line of real text here\n<binary output, 25 bytes>"},
		{"a C1 control is binary", "x\u0085y\n", "<binary output, 5 bytes>"},
		{"DEL is binary", "a\x7fb\nok\n", "<binary output, 4 bytes>\nok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := TextOrBinary([]byte(tt.in)); got != tt.want {
				t.Errorf("TextOrBinary(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEditToolsCheckBeforeAnyoneIsAsked(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, map[string]string{"a.go": "package a\n\nvar x = 1\nvar y = 1\n"})
	tests := []struct {
		name  string
		tool  Tool
		input string
		want  string // "" = the call can apply
	}{
		{"edit applies", NewEditFile(), `{"path":"a.go","oldString":"x = 1","newString":"x = 2"}`, ""},
		{"edit text not found", NewEditFile(), `{"path":"a.go","oldString":"z = 1","newString":"z = 2"}`, "oldString not found in a.go"},
		{"edit ambiguous", NewEditFile(), `{"path":"a.go","oldString":"= 1","newString":"= 2"}`, "oldString appears 2 times in a.go"},
		{"edit missing file", NewEditFile(), `{"path":"b.go","oldString":"a","newString":"b"}`, "b.go"},
		{"edit invalid input", NewEditFile(), `{"path":"a.go"}`, "Invalid input for edit_file"},
		{"multi edit applies", NewMultiEdit(), `{"path":"a.go","edits":[{"oldString":"x = 1","newString":"x = 2"},{"oldString":"y = 1","newString":"y = 2"}]}`, ""},
		{"multi edit second fails", NewMultiEdit(), `{"path":"a.go","edits":[{"oldString":"x = 1","newString":"x = 2"},{"oldString":"q","newString":"r"}]}`, "edit 2: oldString not found in a.go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.tool.(Checker).Check(t.Context(), env, []byte(tt.input))
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("Check = %q, want %q", got, tt.want)
			}
		})
	}
	// Checking changes nothing.
	if res := call(t, NewReadFile(), env, `{"path":"a.go"}`); !strings.Contains(res.Text, "var x = 1") {
		t.Errorf("the file changed:\n%s", res.Text)
	}
}
