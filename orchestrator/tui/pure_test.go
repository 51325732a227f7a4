package tui

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/shiroagent/shiro/agent"
)

func TestRankFiles(t *testing.T) {
	t.Parallel()
	files := []string{"README.md", "lib/src/other.go", "src/main.go", "src/util/strings.go", "docs/src-notes.md", "go.mod", "SRC.txt", "a/b/c/deep.go"}
	tests := []struct {
		name, query string
		limit       int
		want        []string
	}{
		{"prefix matches rank above substring matches", "src/", 8, []string{"src/main.go", "src/util/strings.go", "lib/src/other.go"}},
		{"case does not matter and shorter paths come first", "src", 8, []string{"SRC.txt", "src/main.go", "src/util/strings.go", "lib/src/other.go", "docs/src-notes.md"}},
		{"shorter paths first, then alphabetical", ".go", 8, []string{"src/main.go", "a/b/c/deep.go", "lib/src/other.go", "src/util/strings.go"}},
		{"an empty query lists the shallowest paths", "", 3, []string{"go.mod", "SRC.txt", "README.md"}},
		{"the limit applies", "o", 2, []string{"go.mod", "src/main.go"}},
		{"no match is empty", "zzz", 8, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := rankFiles(files, tt.query, tt.limit)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("rankFiles(%q) = %q, want %q", tt.query, got, tt.want)
			}
		})
	}
}

func TestAtToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, before string
		ok           bool
		start        int
		query        string
	}{
		{"at the start", "@src", true, 0, "src"},
		{"after a space", "look at @src/ma", true, 8, "src/ma"},
		{"a bare @", "see @", true, 4, ""},
		{"an e-mail address does not open it", "mail me@host", false, 0, ""},
		{"a space after the token closes it", "@src/main.go ", false, 0, ""},
		{"the nearest @ wins", "@a and @b", true, 7, "b"},
		{"no @", "hello", false, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start, q, ok := atToken([]rune(tt.before))
			if ok != tt.ok || (ok && (start != tt.start || q != tt.query)) {
				t.Errorf("atToken(%q) = %d %q %v, want %d %q %v", tt.before, start, q, ok, tt.start, tt.query, tt.ok)
			}
		})
	}
}

func TestDiffRows(t *testing.T) {
	t.Parallel()
	lines := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(f(i) + "\n")
		}
		return b.String()
	}
	num := func(i int) string { return "line " + string(rune('a'+i%26)) + strings.Repeat("x", i/26) }
	tests := []struct {
		name           string
		old, new       string
		added, removed int
		wantRows       []string // kind+text
		rowCount       int
	}{
		{"a new file is all additions", "", "a\nb\n", 2, 0, []string{"+a", "+b"}, 2},
		{"a change keeps two lines of context and collapses the rest", lines(10, num), strings.Replace(lines(10, num), "line f\n", "line F\n", 1), 1, 1,
			[]string{".... 3 unchanged line(s)", " line d", " line e", "-line f", "+line F", " line g", " line h", ".... 2 unchanged line(s)"}, 8},
		{"identical text has no change", "a\n", "a\n", 0, 0, []string{".... 1 unchanged line(s)"}, 1},
		{"every row is kept (the prompt scrolls)", "", lines(60, num), 60, 0, nil, 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rows, added, removed := diffRows(lineDiff(tt.old, tt.new))
			if added != tt.added || removed != tt.removed {
				t.Errorf("+%d -%d, want +%d -%d", added, removed, tt.added, tt.removed)
			}
			if len(rows) != tt.rowCount {
				t.Errorf("%d rows, want %d: %v", len(rows), tt.rowCount, rows)
			}
			if tt.wantRows != nil {
				var got []string
				for _, r := range rows {
					got = append(got, string(r.kind)+r.text)
				}
				if !reflect.DeepEqual(got, tt.wantRows) {
					t.Errorf("rows\n%q\nwant\n%q", got, tt.wantRows)
				}
			}
		})
	}
}

func TestLineDiffIsMinimal(t *testing.T) {
	t.Parallel()
	ops := lineDiff("a\nb\nc\nd\n", "a\nx\nc\nd\ny\n")
	var got []string
	for _, op := range ops {
		got = append(got, string(op.kind)+op.text)
	}
	want := []string{" a", "-b", "+x", " c", " d", "+y"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestBuildPreview(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	tests := []struct {
		name, tool, input string
		check             func(t *testing.T, p preview)
	}{
		{"bash shows the command", "bash", `{"command":"go test ./..."}`, func(t *testing.T, p preview) {
			if p.command != "go test ./..." {
				t.Errorf("command %q", p.command)
			}
		}},
		{"publish_port shows the session's sentence", "publish_port", `{"approval":"publish port 3000 of the sandbox at 127.0.0.1:3000 (nothing listens there yet)","container_port":3000}`, func(t *testing.T, p preview) {
			if p.command != "publish port 3000 of the sandbox at 127.0.0.1:3000 (nothing listens there yet)" || p.json != "" {
				t.Errorf("%+v", p)
			}
		}},
		{"write_file of a new file", "write_file", `{"path":"b.txt","content":"x\ny\n"}`, func(t *testing.T, p preview) {
			if p.label != "b.txt (new file)" || p.added != 2 || p.removed != 0 {
				t.Errorf("%+v", p)
			}
		}},
		{"write_file over a file diffs against it", "write_file", `{"path":"a.txt","content":"one\n2\nthree\n"}`, func(t *testing.T, p preview) {
			if p.label != "a.txt" || p.added != 1 || p.removed != 1 {
				t.Errorf("%+v", p)
			}
		}},
		{"edit_file applies the edit in memory", "edit_file", `{"path":"a.txt","oldString":"two","newString":"TWO"}`, func(t *testing.T, p preview) {
			if p.added != 1 || p.removed != 1 || p.problem != "" {
				t.Errorf("%+v", p)
			}
		}},
		{"edit_file that would fail says why", "edit_file", `{"path":"a.txt","oldString":"four","newString":"4"}`, func(t *testing.T, p preview) {
			if p.problem != "oldString not found in a.txt" {
				t.Errorf("problem %q", p.problem)
			}
		}},
		{"multi_edit applies the edits in order", "multi_edit", `{"path":"a.txt","edits":[{"oldString":"one","newString":"1"},{"oldString":"1\ntwo","newString":"1\n2"}]}`, func(t *testing.T, p preview) {
			if p.added != 2 || p.removed != 2 || p.problem != "" {
				t.Errorf("%+v", p)
			}
		}},
		{"a path outside the workspace is not read", "edit_file", `{"path":"../x","oldString":"a","newString":"b"}`, func(t *testing.T, p preview) {
			if !strings.Contains(p.problem, "outside the workspace") {
				t.Errorf("problem %q", p.problem)
			}
		}},
		{"other tools show pretty JSON", "mcp__x__y", `{"a":1}`, func(t *testing.T, p preview) {
			if p.json != "{\n  \"a\": 1\n}" {
				t.Errorf("json %q", p.json)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t, buildPreview(hostReader(root, ws), agent.ApprovalRequest{Tool: tt.tool, Input: []byte(tt.input)}))
		})
	}
}

func TestEditorKeys(t *testing.T) {
	t.Parallel()
	k := func(t tea.KeyType) tea.KeyMsg { return tea.KeyMsg{Type: t} }
	tests := []struct {
		name       string
		text       string
		cursor     int
		keys       []tea.KeyMsg
		want       string
		wantCursor int
	}{
		{"ctrl-a goes home, typing inserts", "world", 5, []tea.KeyMsg{k(tea.KeyCtrlA), runes("hello ")}, "hello world", 6},
		{"ctrl-e goes to the end", "ab", 0, []tea.KeyMsg{k(tea.KeyCtrlE), runes("c")}, "abc", 3},
		{"ctrl-k kills to the end", "hello world", 5, []tea.KeyMsg{k(tea.KeyCtrlK)}, "hello", 5},
		{"ctrl-u kills to the start", "hello world", 6, []tea.KeyMsg{k(tea.KeyCtrlU)}, "world", 0},
		{"ctrl-w kills the previous word", "go test ./...", 7, []tea.KeyMsg{k(tea.KeyCtrlW)}, "go  ./...", 3},
		{"backspace and delete", "abcd", 2, []tea.KeyMsg{k(tea.KeyBackspace), k(tea.KeyDelete)}, "ad", 1},
		{"a paste is inserted whole, CRs made newlines", "", 0, []tea.KeyMsg{{Type: tea.KeyRunes, Runes: []rune("a\r\nb"), Paste: true}}, "a\nb", 3},
		{"left and right move", "ab", 2, []tea.KeyMsg{k(tea.KeyLeft), runes("x"), k(tea.KeyRight), runes("y")}, "axby", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var e editor
			e.Set(tt.text)
			e.SetCursor(tt.cursor)
			for _, key := range tt.keys {
				e.Update(key)
			}
			if e.Value() != tt.want || e.cursor != tt.wantCursor {
				t.Errorf("got %q cursor %d, want %q cursor %d", e.Value(), e.cursor, tt.want, tt.wantCursor)
			}
		})
	}
}

func TestHistory(t *testing.T) {
	t.Parallel()
	t.Run("adds trimmed, skips blanks and immediate repeats, keeps 200", func(t *testing.T) {
		t.Parallel()
		var h []string
		for _, p := range []string{" a ", "a", "", "b", "a"} {
			h = addHistory(h, p)
		}
		if !reflect.DeepEqual(h, []string{"a", "b", "a"}) {
			t.Errorf("history %q", h)
		}
		for i := range 250 {
			h = addHistory(h, strings.Repeat("x", i+1))
		}
		if len(h) != historyLimit || h[len(h)-1] != strings.Repeat("x", 250) {
			t.Errorf("%d entries, newest %d long", len(h), len(h[len(h)-1]))
		}
	})
	t.Run("survives a save and load; a corrupt file or other values are ignored", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		file := filepath.Join(dir, "history", "p.json")
		if err := saveHistory(file, []string{"one", "two"}); err != nil {
			t.Fatal(err)
		}
		if got := loadHistory(file); !reflect.DeepEqual(got, []string{"one", "two"}) {
			t.Errorf("loaded %q", got)
		}
		if err := os.WriteFile(file, []byte(`["a", 3, null, "b"]`), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := loadHistory(file); !reflect.DeepEqual(got, []string{"a", "b"}) {
			t.Errorf("loaded %q", got)
		}
		if err := os.WriteFile(file, []byte(`{not json`), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := loadHistory(file); got != nil {
			t.Errorf("loaded %q from a corrupt file", got)
		}
	})
	t.Run("up and down walk it and restore the draft", func(t *testing.T) {
		t.Parallel()
		h := historyNav{entries: []string{"one", "two"}}
		h.reset()
		steps := []string{}
		s, _ := h.up("draft")
		steps = append(steps, s)
		s, _ = h.up("")
		steps = append(steps, s)
		if _, ok := h.up(""); ok {
			t.Error("up past the oldest")
		}
		s, _ = h.down()
		steps = append(steps, s)
		s, _ = h.down()
		steps = append(steps, s)
		if !reflect.DeepEqual(steps, []string{"two", "one", "two", "draft"}) {
			t.Errorf("steps %q", steps)
		}
	})
}

func TestCommandRegistry(t *testing.T) {
	t.Parallel()
	names := func(cs []*command) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.name)
		}
		return out
	}
	if got := names(matchCommands("model")); !reflect.DeepEqual(got, []string{"model", "models"}) {
		t.Errorf("/model matches %q", got)
	}
	if got := names(matchCommands("MODELS")); !reflect.DeepEqual(got, []string{"models"}) {
		t.Errorf("/MODELS matches %q", got)
	}
	if got := names(matchCommands("co")); !reflect.DeepEqual(got, []string{"context", "cost", "compact"}) {
		t.Errorf("/co matches %q", got)
	}
	if got := matchCommands("quit"); len(got) != 0 {
		t.Errorf("aliases are hidden from the menu, got %q", names(got))
	}
	if c := lookupCommand("quit"); c == nil || c.name != "exit" {
		t.Errorf("/quit is not /exit")
	}
	if c := lookupCommand("?"); c == nil || c.name != "help" {
		t.Errorf("/? is not /help")
	}
	for _, tt := range []struct{ in, name, arg string }{
		{"/resume 0192f3", "resume", "0192f3"},
		{"/model  gpt-5 ", "model", "gpt-5"},
		{"/help", "help", ""},
	} {
		if n, a := parseCommand(tt.in); n != tt.name || a != tt.arg {
			t.Errorf("parseCommand(%q) = %q %q", tt.in, n, a)
		}
	}
}

func TestSplitFinished(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, done string
	}{
		{"a growing paragraph is not finished", "Hello wor", ""},
		{"a paragraph before a blank line is", "One.\n\nTwo", "One.\n\n"},
		{"the last line must be complete", "One.\n\nTw", "One.\n\n"},
		{"a blank line inside a fence is not a boundary", "Intro\n\n```go\na\n\nb\n", "Intro\n\n"},
		{"after the fence closes it is", "```\na\n\nb\n```\n\nNext\n", "```\na\n\nb\n```\n\n"},
		{"an unclosed fence keeps growing", "```sh\necho 1\n\necho 2\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			done, rest := splitFinished(tt.src)
			if done != tt.done || done+rest != tt.src {
				t.Errorf("splitFinished(%q) = %q + %q, want %q first", tt.src, done, rest, tt.done)
			}
		})
	}
}

func TestUnclosedFenceRendersAsCode(t *testing.T) {
	t.Parallel()
	md := markdown{profile: 0}
	got := ansi.Strip(md.render("Look:\n\n```go\nfunc main() {\n\tx := 1", 60))
	if !strings.Contains(got, "func main() {") || strings.Contains(got, "```") {
		t.Errorf("an unclosed fence should render as a code block:\n%s", got)
	}
}

func TestToolSummary(t *testing.T) {
	t.Parallel()
	tests := []struct{ input, want string }{
		{`{"command":"ls   -la\n/tmp"}`, "ls -la /tmp"},
		{`{"path":"a.go","content":"x"}`, "a.go"},
		{`{"todos":[{},{}]}`, "2 task(s)"},
		{`{"z":1,"b":2,"c":3,"a":4}`, "a, b, c"},
		{`{"command":"` + strings.Repeat("x", 100) + `"}`, strings.Repeat("x", 90) + "..."},
	}
	for _, tt := range tests {
		if got := toolSummary([]byte(tt.input)); got != tt.want {
			t.Errorf("toolSummary(%s) = %q, want %q", tt.input, got, tt.want)
		}
	}
}
