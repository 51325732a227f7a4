package tools

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestReadManyFiles(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"a.txt":   "alpha\n",
		"b.txt":   "b1\nb2\nb3\nb4\n",
		"bin.dat": "\x00\x01",
		"big.txt": strings.Repeat("y", 20000),
	}
	for i := range 21 {
		files[fmt.Sprintf("n/%02d.txt", i)] = fmt.Sprintf("file %d", i)
	}
	env := newTestEnv(t, files)
	tool := NewReadManyFiles()
	many := func(n int) string {
		var specs []map[string]string
		for i := range n {
			specs = append(specs, map[string]string{"path": fmt.Sprintf("n/%02d.txt", i)})
		}
		return jsonInput(t, map[string]any{"files": specs})
	}
	var twenty []string
	for i := range 20 {
		twenty = append(twenty, fmt.Sprintf("===== n/%02d.txt =====\n1: file %d", i, i))
	}
	tests := []struct {
		name    string
		input   string
		want    string
		wantErr bool
	}{
		{"blocks in the given order", `{"files":[{"path":"b.txt"},{"path":"a.txt"}]}`,
			"===== b.txt =====\n1: b1\n2: b2\n3: b3\n4: b4\n5: \n\n===== a.txt =====\n1: alpha\n2: ", false},
		{"per-file window", `{"files":[{"path":"b.txt","offset":2,"limit":2},{"path":"a.txt","limit":1}]}`,
			"===== b.txt =====\n2: b2\n3: b3\n\n===== a.txt =====\n1: alpha", false},
		{"unreadable entries are reported in place", `{"files":[{"path":"a.txt","limit":1},{"path":"gone.txt"},{"path":"bin.dat"},{"path":"../x"},{"path":"b.txt","limit":1}]}`,
			"===== a.txt =====\n1: alpha\n\n" +
				"===== gone.txt =====\n[unreadable: No such file: gone.txt]\n\n" +
				"===== bin.dat =====\n[unreadable: bin.dat is a binary file, not text. Use bash if you need to inspect it.]\n\n" +
				"===== ../x =====\n[unreadable: Path escapes workspace: ../x]\n\n" +
				"===== b.txt =====\n1: b1", false},
		{"the same file twice", `{"files":[{"path":"a.txt","limit":1},{"path":"a.txt","offset":2}]}`,
			"===== a.txt =====\n1: alpha\n\n===== a.txt =====\n2: ", false},
		{"twenty files are allowed", many(20), strings.Join(twenty, "\n\n"), false},
		{"more than twenty are refused", many(21), "Invalid input for read_many_files: files must have at most 20 items, got 21", true},
		{"at least one file", `{"files":[]}`, "Invalid input for read_many_files: files must have at least 1 item(s), got 0", true},
		{"files is required", `{}`, `Invalid input for read_many_files: missing required parameter "files"`, true},
		{"each entry needs a path", `{"files":[{"path":"a.txt"},{"offset":2}]}`, `Invalid input for read_many_files: missing required parameter "files[1].path"`, true},
		{"entry limits are checked", `{"files":[{"path":"a.txt","limit":0}]}`, "Invalid input for read_many_files: files[0].limit must be at least 1, got 0", true},
		{"files must be an array", `{"files":"a.txt"}`, "Invalid input for read_many_files: files must be an array", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkResult(t, call(t, tool, env, tt.input), tt.want, tt.wantErr)
		})
	}

	t.Run("the whole result is capped", func(t *testing.T) {
		t.Parallel()
		res := call(t, tool, env, `{"files":[{"path":"big.txt"},{"path":"big.txt"}]}`)
		// Two blocks of header (17) + "1: " + 20000, joined by a blank line.
		total := 2*(len("===== big.txt =====\n")+3+20000) + 2
		want := truncationNote(total - MaxOutput)
		if res.IsError || !strings.HasSuffix(res.Text, want) || len(res.Text) != MaxOutput+len(want) {
			t.Errorf("tail %q, length %d", res.Text[len(res.Text)-40:], len(res.Text))
		}
	})
}

// Not parallel: goleak must see only this test's goroutines.
func TestReadManyFilesLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	env := newTestEnv(t, map[string]string{"a.txt": "a", "b.txt": "b"})
	call(t, NewReadManyFiles(), env, `{"files":[{"path":"a.txt"},{"path":"missing"},{"path":"b.txt"}]}`)
}
