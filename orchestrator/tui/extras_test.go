package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/tools/mcp"
)

// askingSend is a turn that asks q through the app and reports the answer.
func askingSend(f *fixture, q sessiontools.Question, answers chan<- []string) func(context.Context, string, func(agent.Event)) error {
	return func(ctx context.Context, _ string, emit func(agent.Event)) error {
		ans, err := f.app.Asker().Ask(ctx, q)
		if err != nil {
			ans = []string{"error: " + err.Error()}
		}
		answers <- ans
		emit(agent.Event{Type: agent.EventDone})
		return nil
	}
}

var threeOptions = sessiontools.Question{Text: "Which database?", Options: []sessiontools.AskOption{
	{Label: "PostgreSQL", Detail: "the recommendation"}, {Label: "SQLite", Detail: "one file"}, {Label: "JSON files"},
}}

func TestAsk(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, q sessiontools.Question, keys func(l *loop)) ([]string, *fixture) {
		t.Helper()
		f := newFixture(t, 100)
		answers := make(chan []string, 1)
		f.sess.send = askingSend(f, q, answers)
		l := f.loop()
		l.typeText("go")
		l.key(key(enter))
		l.until("the question", func(m *Model) bool { return m.ask != nil })
		keys(l)
		l.until("the answer", func(m *Model) bool { return len(answers) == 1 })
		l.until("the turn's end", func(m *Model) bool { return !m.busy })
		return <-answers, f
	}

	t.Run("arrow keys and enter pick an option", func(t *testing.T) {
		t.Parallel()
		var detail string
		got, f := run(t, threeOptions, func(l *loop) {
			l.key(key(down))
			l.key(key(down))
			l.key(key(up))
			detail = l.f.view()
			l.key(key(enter))
		})
		if !slices.Equal(got, []string{"SQLite"}) {
			t.Errorf("answer %q", got)
		}
		if !strings.Contains(detail, "one file") || strings.Contains(detail, "the recommendation") {
			t.Errorf("the highlighted option's detail is not shown:\n%s", detail)
		}
		if !strings.Contains(f.printed(), "? Which database?") || !strings.Contains(f.printed(), "  SQLite") {
			t.Errorf("transcript:\n%s", f.printed())
		}
	})
	t.Run("esc dismisses", func(t *testing.T) {
		t.Parallel()
		got, f := run(t, threeOptions, func(l *loop) { l.key(key(esc)) })
		if got != nil || !strings.Contains(f.printed(), "(dismissed)") {
			t.Errorf("answer %q, transcript:\n%s", got, f.printed())
		}
	})
	t.Run("type your own answer, esc returns to the options", func(t *testing.T) {
		t.Parallel()
		got, _ := run(t, threeOptions, func(l *loop) {
			for range 3 {
				l.key(key(down))
			}
			l.key(key(enter))
			l.until("the text field", func(m *Model) bool { return m.ask != nil && m.ask.typing })
			l.typeText("Redis")
			l.key(key(esc))
			l.until("the picker again", func(m *Model) bool { return m.ask != nil && !m.ask.typing })
			// The cursor is still on "type your own answer...".
			l.key(key(enter))
			l.until("the text field", func(m *Model) bool { return m.ask != nil && m.ask.typing })
			l.typeText("DuckDB")
			l.key(key(enter))
		})
		if !slices.Equal(got, []string{"DuckDB"}) {
			t.Errorf("answer %q", got)
		}
	})
	t.Run("no options: a text field", func(t *testing.T) {
		t.Parallel()
		got, _ := run(t, sessiontools.Question{Text: "What is the service called?"}, func(l *loop) {
			l.typeText("billing")
			l.key(key(enter))
		})
		if !slices.Equal(got, []string{"billing"}) {
			t.Errorf("answer %q", got)
		}
	})
	t.Run("multiple choice", func(t *testing.T) {
		t.Parallel()
		q := threeOptions
		q.Multiple = true
		got, _ := run(t, q, func(l *loop) {
			l.key(key(enter)) // nothing chosen yet: refused
			l.key(runes("x"))
			l.key(key(down))
			l.key(key(down))
			l.key(runes("x"))
			l.key(key(enter))
		})
		if !slices.Equal(got, []string{"PostgreSQL", "JSON files"}) {
			t.Errorf("answer %q", got)
		}
	})
	t.Run("esc aborts the turn behind an unanswered question", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 100)
		answers := make(chan []string, 1)
		f.sess.send = askingSend(f, threeOptions, answers)
		l := f.loop()
		l.typeText("go")
		l.key(key(enter))
		l.until("the question", func(m *Model) bool { return m.ask != nil })
		// The turn is aborted from outside the panel (as a failed turn
		// would end it): the question goes away and the agent is released.
		l.deliver(l.f.m.rt.abort()())
		l.until("the turn's end", func(m *Model) bool { return !m.busy && m.ask == nil })
		if got := <-answers; len(got) != 1 || !strings.Contains(got[0], context.Canceled.Error()) {
			t.Errorf("answer %q", got)
		}
	})
}

func TestPanelsClearAsTheSpecSays(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	started := make(chan string, 1)
	release := make(chan struct{})
	f.sess.send = func(ctx context.Context, prompt string, emit func(agent.Event)) error {
		f.sess.todos.Set([]sessiontools.Todo{{Content: "read", Status: sessiontools.StatusDone}, {Content: "fix", Status: sessiontools.StatusInProgress}})
		f.sess.events(orchestrator.SubagentEvent{SubagentEvent: sessiontools.SubagentEvent{Type: sessiontools.SubagentStart, ID: "sub1", Kind: "explore", Description: "find callers"}})
		f.sess.events(orchestrator.SubagentEvent{SubagentEvent: sessiontools.SubagentEvent{Type: sessiontools.SubagentStep, ID: "sub1", Tool: "grep", Summary: "Parse("}})
		started <- prompt
		<-release
		emit(agent.Event{Type: agent.EventDone})
		return nil
	}
	l := f.loop()
	l.typeText("fix it")
	l.key(key(enter))
	l.until("both panels", func(m *Model) bool {
		v := f.view()
		return strings.Contains(v, "explore find callers  1 step") && strings.Contains(v, "grep(Parse()") && strings.Contains(v, "tasks ####################")
	})
	close(release)
	l.until("the turn's end", func(m *Model) bool { return !m.busy })
	v := f.view()
	if strings.Contains(v, "find callers") {
		t.Errorf("the subagent panel outlived the turn:\n%s", v)
	}
	if !strings.Contains(v, "1/2") || !strings.Contains(v, "[~] fix") {
		t.Errorf("the task panel should stay while a list exists:\n%s", v)
	}
	l.typeText("/todos")
	l.key(key(enter))
	if f.m.info == nil || !strings.Contains(f.m.info.body, "1/2 done") || !strings.Contains(f.m.info.body, "[x] read") {
		t.Errorf("/todos: %+v", f.m.info)
	}
	l.typeText("/clear")
	l.key(key(enter))
	l.until("the list to go", func(m *Model) bool { return len(m.todos) == 0 })
	if strings.Contains(f.view(), "tasks ") {
		t.Errorf("the task panel outlived /clear:\n%s", f.view())
	}
}

func TestExtrasCommands(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	f.sess.memory = sessiontools.NewMemory(f.home, "project")
	for _, n := range []string{"tests need docker", "the API is v2"} {
		if _, err := f.sess.memory.Remember("fact", n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.sess.memory.Recall("API"); err != nil {
		t.Fatal(err)
	}
	f.sess.pluginErr = []string{`plugin "bell": no such plugin`}
	l := f.loop()
	command := func(c string) string {
		t.Helper()
		f.m.info = nil
		l.typeText(c)
		l.key(key(enter))
		l.until(c+"'s panel", func(m *Model) bool { return m.info != nil })
		return f.m.info.title + "\n" + f.m.info.body
	}
	l.exec(f.m.countNotes())
	l.until("the notes counted", func(m *Model) bool { return m.notes == 2 })
	if v := f.view(); !strings.Contains(v, "memory: 2 notes about this project\n") {
		t.Errorf("the header lacks the memory line:\n%s", v)
	}
	if got := command("/notes"); !strings.Contains(got, "memory: 2 notes about this project") ||
		!strings.Contains(got, "(fact) the API is v2 [recalled 1x]\n(fact) tests need docker") {
		t.Errorf("/notes:\n%s", got)
	}
	if got := command("/skills"); !strings.Contains(got, "commit     builtin  ") || !strings.Contains(got, "verify") {
		t.Errorf("/skills:\n%s", got)
	}
	if got := command("/plugins"); !strings.Contains(got, "guard      refuses destructive") || !strings.Contains(got, `failed: plugin "bell": no such plugin`) {
		t.Errorf("/plugins:\n%s", got)
	}

	f.sess.mcp = []mcp.ServerStatus{
		{Name: "docs", Where: mcp.WhereHost, Transport: mcp.TransportHTTP, Tools: []string{"mcp__docs__search", "mcp__docs__fetch"}},
		{Name: "lint", Project: true, Where: mcp.WhereSandbox, Transport: mcp.TransportStdio, Err: errors.New("exited at once")},
	}
	if got := command("/mcp"); !strings.Contains(got, "docs  (user config, http, host)\n  2 tools: mcp__docs__search, mcp__docs__fetch") ||
		!strings.Contains(got, "lint  (project config, stdio, sandbox)\n  mcp lint failed: exited at once") {
		t.Errorf("/mcp:\n%s", got)
	}
	if v := f.view(); !strings.Contains(v, "mcp: 2 tools") {
		t.Errorf("the header lacks the MCP line:\n%s", v)
	}

	f.sess.compactMemory = func(context.Context) (sessiontools.MemoryCompaction, error) {
		return sessiontools.MemoryCompaction{Before: 12, After: 7, Changed: true}, nil
	}
	l.typeText("/memory")
	l.key(key(enter))
	l.until("the compaction", func(m *Model) bool {
		return !m.busy && strings.Contains(f.printed(), "memory compacted: 12 entries into 7")
	})
	f.sess.compactMemory = func(context.Context) (sessiontools.MemoryCompaction, error) {
		return sessiontools.MemoryCompaction{}, errors.New("no model available to summarize memory")
	}
	l.typeText("/memory")
	l.key(key(enter))
	l.until("the failure", func(m *Model) bool {
		return !m.busy && strings.Contains(f.printed(), "error: no model available to summarize memory")
	})
}

func TestOnboardingModelStep(t *testing.T) {
	t.Parallel()
	o := onboarding{cfg: config.Config{Provider: config.ProviderAnthropic, Model: "claude-sonnet-5-5", APIKey: "k"}, label: "Anthropic"}
	t.Run("nothing listed: a text field with the preset's model as the default", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 100, func(o *Options) { o.Configured = false })
		f.m.form = &formModal{waiting: true}
		f.send(onboardModelsMsg{o: o, warning: "https://x/v1: 500 Internal Server Error"})
		if f.m.form == nil || !strings.Contains(f.view(), "Model id") || !strings.Contains(f.view(), "could not list models: https://x/v1: 500 Internal Server Error") {
			t.Fatalf("view:\n%s\nprinted:\n%s", f.view(), f.printed())
		}
	})
	t.Run("type a model id myself", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 100, func(o *Options) { o.Configured = false })
		l := f.loop()
		f.m.form = &formModal{waiting: true}
		l.deliver(onboardModelsMsg{o: o, ids: []string{"claude-haiku-5-5", "claude-sonnet-5-5"}})
		if v := f.view(); !strings.Contains(v, "> claude-sonnet-5-5") || !strings.Contains(v, "type a model id myself...") {
			t.Fatalf("the preset's model should be preselected:\n%s", v)
		}
		l.key(key(down))
		l.key(key(enter))
		l.until("the text field", func(m *Model) bool { return m.form != nil && strings.Contains(f.view(), "Model id") })
		l.typeText("claude-custom")
		l.key(key(enter))
		l.until("the provider to be saved", func(m *Model) bool { return strings.Contains(f.printed(), "model: anthropic/claude-custom") })
	})
}

func TestReplayShowsTheResumedConversation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	msgs := []llm.Message{llm.Text(llm.RoleUser, orchestrator.CompactPrefix+"earlier work")}
	for i := range 25 {
		msgs = append(msgs,
			llm.Text(llm.RoleUser, fmt.Sprintf("question %d", i)),
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Type: llm.PartText, Text: fmt.Sprintf("answer **%d**", i)},
				{Type: llm.PartToolCall, CallID: fmt.Sprintf("c%d", i), Name: "bash", Input: json.RawMessage(`{"command":"make test"}`)},
			}},
			llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, CallID: fmt.Sprintf("c%d", i), Name: "bash", Output: "boom", IsError: i == 24}}},
		)
	}
	f.m.replay(msgs)
	got := f.printed()
	for _, want := range []string{"... 36 earlier messages", "> question 24", "answer 24", "* bash(make test)", "x bash(make test)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the replay lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "question 11\n") || strings.Contains(got, "earlier work") {
		t.Errorf("the replay shows more than the newest %d messages:\n%s", replayLimit, got)
	}
	if strings.Index(got, "> question 23") > strings.Index(got, "> question 24") {
		t.Errorf("out of order:\n%s", got)
	}
}
