package tui

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
)

// manualClock is a clock the test moves.
type manualClock struct{ now time.Time }

func (c *manualClock) read() time.Time         { return c.now }
func (c *manualClock) advance(d time.Duration) { c.now = c.now.Add(d) }

func guarded(f *fixture) *manualClock {
	c := &manualClock{now: time.Unix(1000, 0)}
	f.m.clock = c.read
	f.m.guardFor = guardInterval
	return c
}

func bashApproval(reply chan agent.Decision) approvalMsg {
	return approvalMsg{req: agent.ApprovalRequest{ID: "b1", Tool: "bash", Input: []byte(`{"command":"rm -rf build"}`)}, detail: preview{command: "rm -rf build"}, reply: reply}
}

func TestTypeAheadNeverAnswersAForm(t *testing.T) {
	t.Parallel()
	t.Run("keys typed while it opens go to the draft", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		clock := guarded(f)
		startedTurn(f, "first")
		f.typeText("next que")
		reply := make(chan agent.Decision, 1)
		f.send(bashApproval(reply))
		for _, r := range "stion aaaa ynyn" {
			clock.advance(100 * time.Millisecond) // a typist's pace
			f.send(runes(string(r)))
		}
		f.send(key(enter)) // enter does not answer either
		if len(reply) != 0 || f.m.approval == nil {
			t.Fatalf("a typed-ahead key answered the approval")
		}
		if got := f.m.input.Value(); got != "next question aaaa ynyn" {
			t.Errorf("draft %q, want every key typed", got)
		}
		if !strings.Contains(f.view(), "typing goes to your draft") || !strings.Contains(f.view(), "draft: next question aaaa ynyn") {
			t.Errorf("the guard does not show:\n%s", f.view())
		}
		// A pause opens the form: the next key answers.
		clock.advance(guardInterval)
		f.send(armMsg{})
		if !strings.Contains(f.view(), "y allow once | a always allow bash | n deny") {
			t.Errorf("after the pause:\n%s", f.view())
		}
		l := f.loop()
		l.key(runes("n"))
		l.until("the answer", func(*Model) bool { return len(reply) == 1 })
		if d := <-reply; d != agent.Deny {
			t.Errorf("decision %v", d)
		}
	})
	t.Run("a form is not answered the instant it appears", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		clock := guarded(f)
		startedTurn(f, "first")
		clock.advance(time.Minute) // long idle
		reply := make(chan agent.Decision, 1)
		f.send(bashApproval(reply))
		clock.advance(100 * time.Millisecond)
		f.send(runes("a"))
		if len(reply) != 0 || f.m.input.Value() != "a" {
			t.Fatalf("a key 100 ms after the form appeared answered it (draft %q)", f.m.input.Value())
		}
		clock.advance(guardInterval)
		l := f.loop()
		l.key(runes("y"))
		l.until("the answer", func(*Model) bool { return len(reply) == 1 })
		if d := <-reply; d != agent.Once {
			t.Errorf("decision %v", d)
		}
	})
	t.Run("every form has the guard", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		guarded(f)
		f.m.lastTyped = f.m.now()
		f.send(modelsMsg{ids: []string{"a", "b"}})
		f.send(key(down), key(enter))
		if f.m.form == nil || f.m.form.pick.sel != 0 {
			t.Errorf("keys reached the model picker as it opened")
		}
	})
	t.Run("the next step of a form takes keys at once", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80, func(o *Options) { o.Configured = false })
		clock := guarded(f)
		f.typeText("/provider")
		f.send(key(tea.KeyEnter))
		clock.advance(time.Second)
		f.send(armMsg{}, key(tea.KeyEnter)) // Anthropic
		f.typeText("sk-typed-at-once")
		if f.m.input.Value() != "" || !strings.Contains(f.view(), "****************") {
			t.Errorf("the key went to the draft %q:\n%s", f.m.input.Value(), f.view())
		}
	})
}

// runningTurn starts a turn whose Send waits for its context, and returns
// the loop.
func runningTurn(t *testing.T, f *fixture) *loop {
	t.Helper()
	started := make(chan string, 4)
	f.sess.send = blockingSend(started, make(chan struct{}))
	l := f.loop()
	l.typeText("go")
	l.key(key(enter))
	l.until("the turn", func(m *Model) bool { return len(started) == 1 })
	return l
}

func TestCtrlCNeverQuitsMidTurn(t *testing.T) {
	t.Parallel()
	t.Run("it cancels the turn, with a marker", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		l := runningTurn(t, f)
		l.key(key(ctrlC))
		l.until("the turn's end", func(m *Model) bool { return !m.busy })
		if l.quit || f.m.quitting {
			t.Fatal("ctrl-c mid-turn quit")
		}
		if !strings.Contains(f.printed(), "turn cancelled (ctrl-c)") {
			t.Errorf("no marker:\n%s", f.printed())
		}
		if !strings.Contains(f.view(), "ctrl-c again to quit") {
			t.Errorf("no hint:\n%s", f.view())
		}
	})
	t.Run("with text in the input, it clears the input only", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		l := runningTurn(t, f)
		l.typeText("a draft")
		l.key(key(ctrlC))
		if f.m.input.Value() != "" || !f.m.busy || f.m.quitting {
			t.Errorf("input %q, busy %v, quitting %v", f.m.input.Value(), f.m.busy, f.m.quitting)
		}
	})
	t.Run("with an approval open, it cancels the turn", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		l := runningTurn(t, f)
		l.deliver(bashApproval(make(chan agent.Decision, 1)))
		l.key(key(ctrlC))
		l.until("the turn's end", func(m *Model) bool { return !m.busy })
		if f.m.quitting {
			t.Fatal("quit")
		}
	})
	t.Run("while idle with a form open, it closes the form", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		f.send(modelsMsg{ids: []string{"a"}})
		f.send(key(ctrlC))
		if f.m.form != nil || f.m.quitting {
			t.Errorf("form %v, quitting %v", f.m.form != nil, f.m.quitting)
		}
	})
}

func TestEscSaysWhatItDropped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 80)
	l := runningTurn(t, f)
	for _, p := range []string{"second", "third"} {
		l.typeText(p)
		l.key(key(enter))
	}
	l.key(key(esc))
	l.until("the turn's end", func(m *Model) bool { return !m.busy })
	for _, want := range []string{"dropped 2 queued prompts: second, third", "turn cancelled (esc)"} {
		if !strings.Contains(f.printed(), want) {
			t.Errorf("transcript lacks %q:\n%s", want, f.printed())
		}
	}
}

func TestToolLinesSayWhatHappened(t *testing.T) {
	t.Parallel()
	call := func(f *fixture, id, cmd string) eventMsg {
		return ev(f, agent.Event{Type: agent.EventToolCall, ID: id, Name: "bash", Input: []byte(`{"command":"` + cmd + `"}`)})
	}
	tests := []struct {
		name   string
		events func(f *fixture) []tea.Msg
		want   []string
	}{
		{"a non-zero exit", func(f *fixture) []tea.Msg {
			return []tea.Msg{call(f, "c1", "go test"), ev(f, agent.Event{Type: agent.EventToolResult, ID: "c1", Name: "bash", Output: "exit: 1\n\nstdout:\nFAIL pkg", Exit: &agent.Exit{Code: 1}})}
		}, []string{"x bash(go test) · exit 1", "    FAIL pkg"}},
		{"success", func(f *fixture) []tea.Msg {
			return []tea.Msg{call(f, "c1", "true"), ev(f, agent.Event{Type: agent.EventToolResult, ID: "c1", Name: "bash", Output: "exit: 0", Exit: &agent.Exit{}})}
		}, []string{"* bash(true) · exit 0"}},
		{"timed out", func(f *fixture) []tea.Msg {
			return []tea.Msg{call(f, "c1", "sleep 999"), ev(f, agent.Event{Type: agent.EventToolResult, ID: "c1", Name: "bash", Output: "exit: 137", Exit: &agent.Exit{Code: 137, TimedOut: true, Signal: "SIGKILL"}})}
		}, []string{"x bash(sleep 999) · timed out"}},
		{"killed", func(f *fixture) []tea.Msg {
			return []tea.Msg{call(f, "c1", "make"), ev(f, agent.Event{Type: agent.EventToolResult, ID: "c1", Name: "bash", Output: "exit: 137", Exit: &agent.Exit{Code: 137, Killed: true, Signal: "SIGKILL"}})}
		}, []string{"x bash(make) · killed SIGKILL"}},
		{"a denied write names its path", func(f *fixture) []tea.Msg {
			return []tea.Msg{ev(f, agent.Event{Type: agent.EventToolDenied, ID: "w1", Name: "write_file", Input: []byte(`{"path":"notes.txt"}`), Reason: agent.DeniedByUser})}
		}, []string{"x write_file denied: notes.txt"}},
		{"an edit that cannot apply", func(f *fixture) []tea.Msg {
			return []tea.Msg{ev(f, agent.Event{Type: agent.EventToolError, ID: "e1", Name: "edit_file", Input: []byte(`{"path":"a.go"}`), Error: "oldString not found in a.go"})}
		}, []string{"x edit_file(a.go) · oldString not found in a.go"}},
		{"a summary too long gives way to the outcome", func(f *fixture) []tea.Msg {
			long := strings.Repeat("very long command ", 10)
			return []tea.Msg{call(f, "c1", long), ev(f, agent.Event{Type: agent.EventToolResult, ID: "c1", Name: "bash", Output: "exit: 0", Exit: &agent.Exit{}})}
		}, []string{"...) · exit 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 60)
			startedTurn(f, "go")
			f.send(tt.events(f)...)
			for _, want := range tt.want {
				if !strings.Contains(f.printed(), want) {
					t.Errorf("transcript lacks %q:\n%s", want, f.printed())
				}
			}
			for _, l := range strings.Split(f.printed(), "\n") {
				if ansi.StringWidth(l) > 60 {
					t.Errorf("a row wider than the terminal: %q", l)
				}
			}
		})
	}
}

func TestAFinishedCommandKeepsItsLastLinesAndExpands(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 80)
	startedTurn(f, "count")
	var out strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&out, "line %d\n", i)
	}
	f.send(
		ev(f, agent.Event{Type: agent.EventToolCall, ID: "c1", Name: "bash", Input: []byte(`{"command":"seq 20"}`)}),
		ev(f, agent.Event{Type: agent.EventToolOutput, ID: "c1", Name: "bash", Chunk: out.String()}),
		ev(f, agent.Event{Type: agent.EventToolResult, ID: "c1", Name: "bash", Output: "exit: 0\n\nstdout:\n" + out.String(), Exit: &agent.Exit{}}),
	)
	printed := f.printed()
	for _, want := range []string{"* bash(seq 20) · exit 0", "    line 18", "    line 20", "... 17 more lines · ctrl-o shows the output"} {
		if !strings.Contains(printed, want) {
			t.Errorf("transcript lacks %q:\n%s", want, printed)
		}
	}
	if strings.Contains(printed, "line 17\n") {
		t.Errorf("more than the last lines printed:\n%s", printed)
	}
	f.send(key(tea.KeyCtrlO))
	if f.m.info == nil || !strings.Contains(f.m.info.body, "line 1\n") || !strings.Contains(f.m.info.title, "bash(seq 20)") {
		t.Fatalf("ctrl-o did not show the whole output: %+v", f.m.info)
	}
}

func TestReasoningStaysAsOneLinePerStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 80)
	startedTurn(f, "think")
	f.send(
		ev(f, agent.Event{Type: agent.EventReasoning, Text: "First I look at the code. "}),
		ev(f, agent.Event{Type: agent.EventReasoning, Text: "Then I decide."}),
		ev(f, agent.Event{Type: agent.EventToolStart, ID: "c1", Name: "read_file"}),
		ev(f, agent.Event{Type: agent.EventToolCall, ID: "c1", Name: "read_file", Input: []byte(`{"path":"a.go"}`)}),
		ev(f, agent.Event{Type: agent.EventToolResult, ID: "c1", Name: "read_file", Output: "1: package a"}),
		ev(f, agent.Event{Type: agent.EventReasoning, Text: "Now I answer."}),
		ev(f, agent.Event{Type: agent.EventText, Text: "Done."}),
		ev(f, agent.Event{Type: agent.EventDone}),
		turnEndMsg{turn: f.m.turnID},
	)
	printed := f.printed()
	if n := strings.Count(printed, "thinking · "); n != 2 {
		t.Errorf("%d reasoning lines, want one per step:\n%s", n, printed)
	}
	if !strings.Contains(printed, "thinking · 10 tokens · ctrl-o to expand") {
		t.Errorf("transcript:\n%s", printed)
	}
	f.send(key(tea.KeyCtrlO))
	if f.m.info == nil || f.m.info.body != "Now I answer." {
		t.Fatalf("ctrl-o: %+v", f.m.info)
	}
	f.send(key(tea.KeyCtrlO))
	if f.m.info == nil || f.m.info.body != "First I look at the code. Then I decide." {
		t.Fatalf("ctrl-o again: %+v", f.m.info)
	}
}

func TestResumeShowsTheReasoning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 80)
	f.m.replay([]llm.Message{
		llm.Text(llm.RoleUser, "why?"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartReasoning, Text: "Because of the cache."}, {Type: llm.PartText, Text: "The cache."}}},
	})
	if !strings.Contains(f.printed(), "thinking · 6 tokens · ctrl-o to expand") {
		t.Errorf("transcript:\n%s", f.printed())
	}
	f.send(key(tea.KeyCtrlO))
	if f.m.info == nil || f.m.info.body != "Because of the cache." {
		t.Errorf("ctrl-o: %+v", f.m.info)
	}
}

func TestErrorsAreOneLineWithTheNextStep(t *testing.T) {
	t.Parallel()
	status := func(code int, msg string) error {
		return fmt.Errorf("anthropic messages: %w", &llm.StatusError{Status: code, Message: msg, Err: errors.New("sdk")})
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"401", status(401, "invalid x-api-key"), "error: 401 Unauthorized: invalid x-api-key - check the key: /provider"},
		{"404", status(404, ""), "error: 404 Not Found - check the model and the endpoint: /model, /provider"},
		{"429", status(429, "slow down"), "error: 429 Too Many Requests: slow down - rate limited: wait a moment, then up, enter sends the prompt again"},
		{"503", status(503, "Overloaded"), "error: 503 Service Unavailable: Overloaded - the provider failed: up, enter sends the prompt again"},
		{"network", fmt.Errorf("list models: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), "cannot reach the endpoint: check the URL (/provider) and the network"},
		{"a cut stream", fmt.Errorf("anthropic messages: %w", llm.ErrNoFinish), "the reply was cut off"},
		{"several lines", errors.New("first\nsecond"), "error: first ..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := describeError(tt.err, "")
			if !strings.Contains(got, tt.want) || strings.Contains(got, "\n") {
				t.Errorf("describeError = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAFailedPromptIsNotSentTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 80)
	failing := errors.New("boom")
	f.sess.send = func(ctx context.Context, prompt string, emit func(agent.Event)) error {
		// The agent keeps the prompt, then the request fails.
		f.sess.agent.Replace(append(f.sess.agent.Messages(), llm.Text(llm.RoleUser, prompt)))
		emit(agent.Event{Type: agent.EventRetry, Text: "503 Service Unavailable", Attempt: 2, Attempts: 4, DelayMs: 500})
		emit(agent.Event{Type: agent.EventError, Error: "anthropic messages: 503"})
		return fmt.Errorf("anthropic messages: %w", &llm.StatusError{Status: 503, Err: failing})
	}
	l := f.loop()
	l.typeText("hello")
	l.key(key(enter))
	l.until("the turn's end", func(m *Model) bool { return !m.busy })
	printed := f.printed()
	for _, want := range []string{"retrying in 0.5 s (attempt 2 of 4): 503 Service Unavailable", "error: 503 Service Unavailable - the provider failed", "the prompt was not kept: up, enter sends it again"} {
		if !strings.Contains(printed, want) {
			t.Errorf("transcript lacks %q:\n%s", want, printed)
		}
	}
	if n := len(f.sess.agent.Messages()); n != 0 {
		t.Errorf("the history keeps %d messages", n)
	}
}

func TestSmallThings(t *testing.T) {
	t.Parallel()
	t.Run("@ quotes a path with spaces", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		f.send(filesMsg{files: []string{"my docs/read me.md"}})
		f.typeText("see @read")
		f.send(key(tab))
		if got := f.m.input.Value(); got != `see "my docs/read me.md" ` {
			t.Errorf("input %q", got)
		}
	})
	t.Run("up and down move in a multi-line draft", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		f.typeText("first line")
		f.send(key(tea.KeyCtrlJ))
		f.typeText("second")
		f.send(key(up))
		if got := f.m.input.BeforeCursor(); got != "first " {
			t.Errorf("after up the cursor is after %q", got)
		}
		f.send(key(down))
		if got := f.m.input.BeforeCursor(); got != "first line\nsecond" {
			t.Errorf("after down the cursor is after %q", got)
		}
	})
	t.Run("a long paste is collapsed and sent whole", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		l := f.loop()
		paste := strings.Repeat("pasted\n", 200)
		l.typeText("look: ")
		l.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(paste), Paste: true})
		if !strings.Contains(f.view(), "[pasted text #1, 200 lines]") {
			t.Errorf("view:\n%s", f.view())
		}
		l.key(key(enter))
		l.until("the turn", func(m *Model) bool { return len(f.sess.sent()) == 1 })
		if got := f.sess.sent()[0]; got != "look: "+strings.TrimSpace(paste) {
			t.Errorf("sent %d bytes, want the paste", len(got))
		}
	})
	t.Run("a prompt typed before a provider is set up is kept", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80, func(o *Options) { o.Configured = false })
		f.typeText("hello")
		f.send(key(enter))
		if f.m.input.Value() != "hello" || !strings.Contains(f.printed(), "your prompt is kept") {
			t.Errorf("input %q\n%s", f.m.input.Value(), f.printed())
		}
	})
	t.Run("onboarding prints nothing until it is done", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80, func(o *Options) { o.Configured = false })
		l := f.loop()
		l.deliver(onboardModelsMsg{}) // ignored: no listing is waited for
		f.m.openOnboarding()
		l.key(key(tea.KeyEnter))
		l.typeText("sk-0123456789")
		l.key(key(tea.KeyEnter))
		l.until("the listing step", func(m *Model) bool { return m.form != nil && m.form.waiting })
		if f.printed() != "" {
			t.Errorf("printed before the provider is set up (the header would be stale):\n%s", f.printed())
		}
	})
	t.Run("the network mode is shown", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 120, func(o *Options) { o.Config.Sandbox.Network = "none" })
		if v := f.view(); !strings.Contains(v, "network: none") || !strings.Contains(v, "sandbox ready, no network") {
			t.Errorf("view:\n%s", v)
		}
	})
	t.Run("the context counter counts the system prompt and tools", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		before := f.m.stats.context
		f.send(f.m.rt.measureOverhead()())
		if f.m.stats.context <= before {
			t.Errorf("context %d after measuring, %d before", f.m.stats.context, before)
		}
	})
	t.Run("headings of every level look alike", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		got := ansi.Strip(f.m.md.render("# Plan\n\n## Code", 80))
		if !strings.Contains(got, "# Plan") || !strings.Contains(got, "## Code") {
			t.Errorf("rendered:\n%q", got)
		}
	})
}

func TestAlwaysAllowOffersTheCommandsPrefix(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	bash := &fakeTool{name: "bash", gated: true}
	cmd := func(id, c string) llm.Part {
		return llm.Part{Type: llm.PartToolCall, CallID: id, Name: "bash", Input: []byte(`{"command":"` + c + `"}`)}
	}
	model := &scripted{steps: [][]llm.Part{
		{cmd("c1", "go test ./...")},
		{cmd("c2", "go test -run X ./pkg")},
		{cmd("c3", "go build ./...")},
	}}
	withAgent(t, f, model, bash)
	l := f.loop()
	l.typeText("test")
	l.key(key(enter))
	l.until("the approval", func(m *Model) bool { return m.approval != nil })
	v := f.view()
	for _, want := range []string{"Yes, allow once", `Always allow "go test …" this session`, "Always allow bash this session", "No, deny", "p always its prefix"} {
		if !strings.Contains(v, want) {
			t.Errorf("the approval lacks %q:\n%s", want, v)
		}
	}
	l.key(runes("p"))
	// go test -run runs without asking; go build asks.
	l.until("the next approval", func(m *Model) bool { return m.approval != nil && m.approval.msg.req.ID == "c3" })
	if n := bash.callCount(); n != 2 {
		t.Errorf("bash ran %d times before go build was asked about, want 2", n)
	}
	l.key(runes("n"))
	l.until("the turn's end", func(m *Model) bool { return !m.busy })
	f.m.runCommand("/tools")
	if !strings.Contains(f.m.info.body, `bash allowed this session for "go test …"`) {
		t.Errorf("/tools:\n%s", f.m.info.body)
	}
}
