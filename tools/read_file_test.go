package tools

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	var long strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	files := map[string]string{
		"three.txt":    "one\ntwo\nthree\n",
		"nonl.txt":     "a\nb",
		"empty.txt":    "",
		"ten.txt":      "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n",
		"long.txt":     long.String(),
		"crlf.txt":     "a\r\nb\r\n",
		"utf8.txt":     "héllo ✓\n",
		"bin.dat":      "ab\x00cd",
		"late-nul.txt": strings.Repeat("a", BinarySniff) + "\x00",
		"edge-nul.dat": strings.Repeat("a", BinarySniff-1) + "\x00",
		"wide.txt":     strings.Repeat("x", 40000),
		"accents.txt":  strings.Repeat("é", 40000),
		"dir/a.txt":    "in dir\n",
	}
	env := newTestEnv(t, files)
	if err := syscall.Mkfifo(filepath.Join(env.Workspace, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := NewReadFile()
	tests := []struct {
		name    string
		input   string
		want    string
		wantErr bool
	}{
		{"numbers lines and shows the empty line after a final newline", `{"path":"three.txt"}`, "1: one\n2: two\n3: three\n4: ", false},
		{"last line without newline", `{"path":"nonl.txt"}`, "1: a\n2: b", false},
		{"empty file is one empty line", `{"path":"empty.txt"}`, "1: ", false},
		{"offset and limit give absolute numbers", `{"path":"ten.txt","offset":3,"limit":2}`, "3: l3\n4: l4", false},
		{"offset alone reads to the end", `{"path":"ten.txt","offset":10}`, "10: l10\n11: ", false},
		{"offset past the end is empty", `{"path":"ten.txt","offset":50}`, "", false},
		{"carriage returns are kept", `{"path":"crlf.txt"}`, "1: a\r\n2: b\r\n3: ", false},
		{"utf-8 is text", `{"path":"utf8.txt"}`, "1: héllo ✓\n2: ", false},
		{"null offset and limit take the defaults", `{"path":"nonl.txt","offset":null,"limit":null}`, "1: a\n2: b", false},
		{"absolute path inside the workspace", jsonInput(t, map[string]string{"path": filepath.Join(env.Workspace, "nonl.txt")}), "1: a\n2: b", false},
		{"dot segments that stay inside", `{"path":"dir/../nonl.txt"}`, "1: a\n2: b", false},
		{"missing file", `{"path":"nope.txt"}`, "No such file: nope.txt", true},
		{"missing directory", `{"path":"no/such/file.txt"}`, "No such file: no/such/file.txt", true},
		{"file used as a directory", `{"path":"nonl.txt/x"}`, "No such file: nonl.txt/x", true},
		{"binary file", `{"path":"bin.dat"}`, "bin.dat is a binary file, not text. Use bash if you need to inspect it.", true},
		{"NUL at the last sniffed byte is binary", `{"path":"edge-nul.dat"}`, "edge-nul.dat is a binary file, not text. Use bash if you need to inspect it.", true},
		{"directory", `{"path":"dir"}`, "dir is a directory, not a file. Use list_dir to see what it holds.", true},
		{"fifo is refused without blocking", `{"path":"fifo"}`, "fifo is not a regular file.", true},
		{"offset 0 is invalid", `{"path":"ten.txt","offset":0}`, "Invalid input for read_file: offset must be at least 1, got 0", true},
		{"limit 0 is invalid", `{"path":"ten.txt","limit":0}`, "Invalid input for read_file: limit must be at least 1, got 0", true},
		{"fractional offset is invalid", `{"path":"ten.txt","offset":1.5}`, "Invalid input for read_file: offset must be an integer, got 1.5", true},
		{"path is required", `{}`, `Invalid input for read_file: missing required parameter "path"`, true},
		{"path must be a string", `{"path":3}`, "Invalid input for read_file: path must be a string", true},
		{"unknown parameters are refused", `{"path":"ten.txt","lines":3}`, `Invalid input for read_file: unknown parameter "lines"`, true},
		{"malformed JSON", `{"path":`, "Invalid input for read_file: malformed JSON: unexpected EOF", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkResult(t, call(t, tool, env, tt.input), tt.want, tt.wantErr)
		})
	}

	t.Run("default limit is 2000 lines", func(t *testing.T) {
		t.Parallel()
		res := call(t, tool, env, `{"path":"long.txt"}`)
		lines := strings.Split(res.Text, "\n")
		if len(lines) != 2000 || lines[0] != "1: line 1" || lines[1999] != "2000: line 2000" {
			t.Errorf("got %d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
		}
	})
	t.Run("NUL after the first 8 KiB is text", func(t *testing.T) {
		t.Parallel()
		if res := call(t, tool, env, `{"path":"late-nul.txt"}`); res.IsError {
			t.Errorf("refused: %q", res.Text)
		}
	})
	for _, tc := range []struct{ name, path string }{
		{"output is capped at 30000 characters", "wide.txt"},
		{"the cap counts characters and never splits one", "accents.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := call(t, tool, env, jsonInput(t, map[string]string{"path": tc.path}))
			body, note, ok := strings.Cut(res.Text, "\n... [truncated ")
			// One line: "1: " and 40000 characters, of which 30000 are kept.
			if !ok || note != "10003 chars]" {
				t.Fatalf("note = %q", note)
			}
			if n := utf8.RuneCountInString(body); n != MaxOutput || !utf8.ValidString(body) {
				t.Errorf("kept %d characters (valid UTF-8: %v)", n, utf8.ValidString(body))
			}
		})
	}
}
