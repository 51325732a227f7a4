package tui

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/tools/mcp"
)

// mcpAsking is a turn that puts an MCP server's question through the app
// and reports the answer.
func mcpAsking(f *fixture, ask func(context.Context, orchestrator.MCPAsker) string, answers chan<- string) func(context.Context, string, func(agent.Event)) error {
	return func(ctx context.Context, _ string, emit func(agent.Event)) error {
		answers <- ask(ctx, f.app.Asker().(orchestrator.MCPAsker))
		emit(agent.Event{Type: agent.EventDone})
		return nil
	}
}

var sampleReq = mcp.SampleRequest{Server: "notes", System: "be brief", Messages: []mcp.SampleMessage{{Role: "user", Text: "summarise the notes"}}, MaxTokens: 300}

var formReq = mcp.ElicitRequest{Server: "notes", Message: "who are you?", Fields: []mcp.ElicitField{
	{Name: "name", Type: "string", Required: true},
	{Name: "age", Type: "integer"},
}}

func TestMCPSamplingApproval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key  tea.KeyMsg
		want string
		line string
	}{
		{tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("y")}, "true", "mcp notes sampling: allowed (claude-x)"},
		{key(enter), "true", "mcp notes sampling: allowed"},
		{tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("n")}, "false", "mcp notes sampling: denied"},
		{key(esc), "false", "mcp notes sampling: denied"},
	} {
		t.Run(tc.key.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 100)
			answers := make(chan string, 1)
			f.sess.send = mcpAsking(f, func(ctx context.Context, a orchestrator.MCPAsker) string {
				ok, err := a.ApproveSampling(ctx, sampleReq, "claude-x")
				return fmt.Sprint(ok, err)
			}, answers)
			l := f.loop()
			l.typeText("go")
			l.key(key(enter))
			l.until("the request", func(m *Model) bool { return m.mcpAsk != nil })
			view := f.view()
			for _, want := range []string{"mcp notes asks claude-x to answer (sampling", "system: be brief", "user: summarise the notes", "at most 300 tokens", "y allow | n deny"} {
				if !strings.Contains(view, want) {
					t.Errorf("the prompt lacks %q:\n%s", want, view)
				}
			}
			l.key(tc.key)
			l.until("the answer", func(m *Model) bool { return len(answers) == 1 })
			if got := <-answers; got != tc.want+" <nil>" {
				t.Errorf("answer %q, want %s", got, tc.want)
			}
			l.until("the turn's end", func(m *Model) bool { return !m.busy })
			if !strings.Contains(f.printed(), tc.line) {
				t.Errorf("transcript lacks %q:\n%s", tc.line, f.printed())
			}
		})
	}
}

func TestMCPElicitationForm(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, keys func(l *loop)) (string, *fixture) {
		t.Helper()
		f := newFixture(t, 100)
		answers := make(chan string, 1)
		f.sess.send = mcpAsking(f, func(ctx context.Context, a orchestrator.MCPAsker) string {
			res, err := a.Elicit(ctx, formReq)
			keys := slices.Sorted(maps.Keys(res.Content))
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s=%v(%T)", k, res.Content[k], res.Content[k]))
			}
			return fmt.Sprint(res.Action, " ", strings.Join(parts, " "), " ", err)
		}, answers)
		l := f.loop()
		l.typeText("go")
		l.key(key(enter))
		l.until("the form", func(m *Model) bool { return m.mcpAsk != nil })
		keys(l)
		l.until("the answer", func(m *Model) bool { return len(answers) == 1 })
		l.until("the turn's end", func(m *Model) bool { return !m.busy })
		return <-answers, f
	}
	t.Run("filled in and sent", func(t *testing.T) {
		t.Parallel()
		var view string
		got, f := run(t, func(l *loop) {
			view = l.f.view()
			l.typeText("Ada")
			nextField(l)
			l.typeText("36")
			nextField(l)
			l.key(key(enter)) // send
		})
		if got != "accept age=36(int64) name=Ada(string) <nil>" {
			t.Errorf("answer %q", got)
		}
		for _, want := range []string{"mcp notes asks you", "who are you?", "name *", "age", "Send this to notes?"} {
			if !strings.Contains(view, want) {
				t.Errorf("the form lacks %q:\n%s", want, view)
			}
		}
		if !strings.Contains(f.printed(), "mcp notes form: sent") {
			t.Errorf("transcript:\n%s", f.printed())
		}
	})
	t.Run("a required field stops the form; esc cancels", func(t *testing.T) {
		t.Parallel()
		got, f := run(t, func(l *loop) {
			l.key(key(enter)) // name is empty: the form stays
			l.until("still the form", func(m *Model) bool { return m.mcpAsk != nil })
			l.key(key(esc))
		})
		if got != "cancel  <nil>" || !strings.Contains(f.printed(), "mcp notes form: cancelled") {
			t.Errorf("answer %q, transcript:\n%s", got, f.printed())
		}
	})
}

// nextField presses enter and waits for the form to move on.
func nextField(l *loop) {
	l.f.t.Helper()
	before := l.f.m.mcpAsk.form.GetFocusedField()
	l.key(key(enter))
	l.until("the next field", func(m *Model) bool { return m.mcpAsk == nil || m.mcpAsk.form.GetFocusedField() != before })
}
