package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
)

func TestCleanAndScrub(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, clean, scrub string
	}{
		{"plain text passes", "hello\nworld", "hello\nworld", "hello\nworld"},
		{"control bytes go", "a\x00b\x07c\x0ed\x7fe", "abcde", "abcde"},
		{"escape sequences go, styles only from scrub", "\x1b[31mred\x1b[0m \x1b[2Jx\x1b]0;title\x07y", "red xy", "\x1b[31mred\x1b[0m xy"},
		{"tabs become spaces", "a\tb", "a   b", "a   b"},
		{"a carriage return keeps what follows", "10%\r50%\r90%", "90%", "10%50%90%"},
		{"CRLF is a newline", "a\r\nb", "a\nb", "a\nb"},
		{"invalid UTF-8 and C1 go", "x\xff\xfey\u0085z", "xyz", "xyz"},
		{"bidirectional overrides go", "abc\u202edef", "abcdef", "abcdef"},
		{"a malformed sequence goes", "a\x1b[12\x01b", "ab", "ab"},
		{"CJK and emoji stay", "日本語 🙂", "日本語 🙂", "日本語 🙂"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := clean(tt.in); got != tt.clean {
				t.Errorf("clean(%q) = %q, want %q", tt.in, got, tt.clean)
			}
			if got := scrub(tt.in); got != tt.scrub {
				t.Errorf("scrub(%q) = %q, want %q", tt.in, got, tt.scrub)
			}
		})
	}
}

func TestRowsFitTheWidth(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 40)
	for _, w := range []int{20, 60, 80} {
		for _, r := range rows(w, long, "\x1b[1m"+long+"\x1b[0m", strings.Repeat("x", 3*w)) {
			if ansi.StringWidth(r) > w {
				t.Errorf("width %d: row %q is %d wide", w, r, ansi.StringWidth(r))
			}
		}
	}
	got := hangingRows(50, "/model [id]            switch the model (no id: pick from the list)")
	want := []string{"/model [id]            switch the model (no id:", "                       pick from the list)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("hangingRows:\n%q\nwant\n%q", got, want)
	}
}

func TestPickerShowsEveryChoiceOrSaysWhatIsHidden(t *testing.T) {
	t.Parallel()
	labels := make([]string, 10)
	for i := range labels {
		labels[i] = fmt.Sprintf("item %d", i)
	}
	st := newFixture(t, 80).m.st
	tests := []struct {
		sel, height int
		want        string
	}{
		{0, 12, "> item 0|  item 1|  item 2|  item 3|  item 4|  item 5|  item 6|  item 7|  item 8|  item 9"},
		{0, 4, "> item 0|  item 1|  item 2|  ↓ 7 more"},
		{9, 4, "  ↑ 7 more|  item 7|  item 8|> item 9"},
		{5, 5, "  ↑ 4 more|  item 4|> item 5|  item 6|  ↓ 3 more"},
		{5, 2, "> item 5"},
	}
	for _, tt := range tests {
		p := newPicker(labels...)
		p.sel = tt.sel
		got := strings.Join(p.view(st, 40, tt.height), "|")
		if got != tt.want {
			t.Errorf("sel %d in %d rows:\n got %s\nwant %s", tt.sel, tt.height, got, tt.want)
		}
	}
}

// TestTheViewAlwaysFits draws every state at many sizes from the smallest
// supported: no row is wider than the terminal, there are never more rows.
func TestTheViewAlwaysFits(t *testing.T) {
	t.Parallel()
	states := map[string]func(f *fixture){
		"idle": func(f *fixture) {},
		"help": func(f *fixture) { f.m.runCommand("/help") },
		"approval": func(f *fixture) {
			startedTurn(f, "go")
			f.send(longDiff(t, f))
		},
		"busy with everything": func(f *fixture) {
			startedTurn(f, "go")
			var todos []sessiontools.Todo
			for i := range 15 {
				todos = append(todos, sessiontools.Todo{Content: fmt.Sprintf("task number %d with a long description that goes on", i), Status: sessiontools.StatusPending})
			}
			f.send(todosMsg{items: todos},
				subagentMsg{ev: sessiontools.SubagentEvent{Type: sessiontools.SubagentStart, ID: "s", Kind: "explore", Description: "look around"}},
				ev(f, agent.Event{Type: agent.EventReasoning, Text: strings.Repeat("thinking hard ", 50)}),
				key(ctrlR),
				ev(f, agent.Event{Type: agent.EventText, Text: strings.Repeat("a live reply that goes on ", 60)}),
				flushMsg{turn: f.m.turnID},
				ev(f, agent.Event{Type: agent.EventToolCall, ID: "c", Name: "bash", Input: []byte(`{"command":"make"}`)}),
				ev(f, agent.Event{Type: agent.EventToolOutput, ID: "c", Name: "bash", Chunk: strings.Repeat("output line\n", 30)}),
			)
			for i := range 6 {
				f.typeText(fmt.Sprintf("queued %d", i))
				f.send(key(enter))
			}
			f.typeText("/")
		},
		"a tall draft": func(f *fixture) {
			for range 40 {
				f.typeText("a line of a tall draft")
				f.send(key(tea.KeyCtrlJ))
			}
		},
	}
	for name, setup := range states {
		for _, w := range []int{60, 61, 79, 80, 100, 160} {
			for _, h := range []int{20, 21, 24, 30, 50} {
				t.Run(fmt.Sprintf("%s/%dx%d", name, w, h), func(t *testing.T) {
					t.Parallel()
					f := newFixture(t, w)
					f.send(tea.WindowSizeMsg{Width: w, Height: h})
					setup(f)
					checkFits(t, f.m.View(), w, h)
				})
			}
		}
	}
}
