package tools

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMultiEdit(t *testing.T) {
	t.Parallel()
	const src = "alpha beta\nbeta gamma\nbeta delta\n"
	tool := NewMultiEdit()
	tests := []struct {
		name    string
		input   string
		want    string
		wantErr bool
		after   string
	}{
		{"edits apply in order, each to the previous result", `{"path":"f.txt","edits":[{"oldString":"alpha","newString":"ALPHA"},{"oldString":"ALPHA beta","newString":"one"}]}`,
			"Applied 2 edit(s) to f.txt (1x, 1x)", false, "one\nbeta gamma\nbeta delta\n"},
		{"counts show replaceAll", `{"path":"f.txt","edits":[{"oldString":"gamma","newString":"G"},{"oldString":"beta","newString":"B","replaceAll":true}]}`,
			"Applied 2 edit(s) to f.txt (1x, 3x)", false, "alpha B\nB G\nB delta\n"},
		{"a failing third edit writes nothing", `{"path":"f.txt","edits":[{"oldString":"alpha","newString":"A"},{"oldString":"gamma","newString":"G"},{"oldString":"omega","newString":"O"}]}`,
			"edit 3: oldString not found in f.txt. No edits were applied.", true, src},
		{"an ambiguous edit writes nothing", `{"path":"f.txt","edits":[{"oldString":"alpha","newString":"A"},{"oldString":"beta","newString":"B"}]}`,
			"edit 2: oldString appears 3 times in f.txt. Add surrounding context or set replaceAll. No edits were applied.", true, src},
		{"an edit can fail on text an earlier edit removed", `{"path":"f.txt","edits":[{"oldString":"alpha","newString":"A"},{"oldString":"alpha","newString":"B"}]}`,
			"edit 2: oldString not found in f.txt. No edits were applied.", true, src},
		{"identical strings", `{"path":"f.txt","edits":[{"oldString":"alpha","newString":"A"},{"oldString":"x","newString":"x"}]}`,
			"edit 2: oldString and newString are identical", true, src},
		{"edits that cancel out", `{"path":"f.txt","edits":[{"oldString":"alpha","newString":"A"},{"oldString":"A beta","newString":"alpha beta"}]}`,
			"No change to f.txt: the edits cancel out.", true, src},
		{"at least one edit", `{"path":"f.txt","edits":[]}`,
			"Invalid input for multi_edit: edits must have at least 1 item(s), got 0", true, src},
		{"each edit needs oldString", `{"path":"f.txt","edits":[{"newString":"x"}]}`,
			`Invalid input for multi_edit: missing required parameter "edits[0].oldString"`, true, src},
		{"escape", `{"path":"../f.txt","edits":[{"oldString":"a","newString":"b"}]}`,
			"Path escapes workspace: ../f.txt", true, src},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, map[string]string{"f.txt": src})
			checkResult(t, call(t, tool, env, tt.input), tt.want, tt.wantErr)
			if got := readWS(t, env, "f.txt"); got != tt.after {
				t.Errorf("f.txt = %q, want %q", got, tt.after)
			}
			assertNoTempFiles(t, env.Workspace)
		})
	}

	t.Run("a missing file is not created", func(t *testing.T) {
		t.Parallel()
		env := newTestEnv(t, nil)
		checkResult(t, call(t, tool, env, `{"path":"new.txt","edits":[{"oldString":"a","newString":"b"}]}`), "No such file: new.txt", true)
		if _, err := os.Stat(filepath.Join(env.Workspace, "new.txt")); !os.IsNotExist(err) {
			t.Errorf("new.txt exists: %v", err)
		}
	})

	t.Run("a failed edit leaves the file byte-for-byte and inode unchanged", func(t *testing.T) {
		t.Parallel()
		orig := "x\r\n\ty \x00 z\xff\n"
		env := newTestEnv(t, map[string]string{"f.bin": orig})
		before, err := os.Stat(filepath.Join(env.Workspace, "f.bin"))
		if err != nil {
			t.Fatal(err)
		}
		res := call(t, tool, env, `{"path":"f.bin","edits":[{"oldString":"x","newString":"X"},{"oldString":"y","newString":"Y"},{"oldString":"nope","newString":"N"}]}`)
		if !res.IsError {
			t.Fatalf("succeeded: %q", res.Text)
		}
		after, err := os.Stat(filepath.Join(env.Workspace, "f.bin"))
		if err != nil {
			t.Fatal(err)
		}
		if got := readWS(t, env, "f.bin"); got != orig || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
			t.Errorf("file changed: %q (same file %v)", got, os.SameFile(before, after))
		}
	})
}
