package tui

import (
	"context"
	"encoding/json"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator"
)

// blockingSend is a turn that streams a little text, then waits until the
// turn is aborted or release is closed.
func blockingSend(started chan<- string, release <-chan struct{}) func(context.Context, string, func(agent.Event)) error {
	return func(ctx context.Context, prompt string, emit func(agent.Event)) error {
		emit(agent.Event{Type: agent.EventText, Text: "on " + prompt})
		started <- prompt
		select {
		case <-ctx.Done():
		case <-release:
		}
		emit(agent.Event{Type: agent.EventDone})
		return nil
	}
}

func TestQueuedPromptsRunInOrderAfterTheTurn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	started := make(chan string, 8)
	release := make(chan struct{})
	f.sess.send = blockingSend(started, release)
	l := f.loop()
	l.typeText("first")
	l.key(key(enter))
	l.until("the first turn", func(m *Model) bool { return len(started) == 1 })
	l.typeText("second")
	l.key(key(enter))
	l.typeText("/cost")
	l.key(key(enter))
	l.typeText("third")
	l.key(key(enter))
	if got := f.m.queue; !slices.Equal(got, []string{"second", "/cost", "third"}) {
		t.Fatalf("queue %q", got)
	}
	if !strings.Contains(f.view(), "queued: 3") {
		t.Errorf("the queue panel is missing:\n%s", f.view())
	}
	close(release) // every turn ends at once from now on
	l.until("the queue to drain", func(m *Model) bool { return !m.busy && len(m.queue) == 0 && len(f.sess.sent()) == 3 })
	if got := f.sess.sent(); !slices.Equal(got, []string{"first", "second", "third"}) {
		t.Errorf("prompts sent %q", got)
	}
	if f.m.info == nil || f.m.info.title != "cost" {
		t.Errorf("the queued /cost did not run as a command")
	}
	printed := f.printed()
	if i, j := strings.Index(printed, "> second"), strings.Index(printed, "> third"); i < 0 || j < i {
		t.Errorf("transcript order:\n%s", printed)
	}
}

func TestEscAbortsTheTurnAndClearsTheQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	started := make(chan string, 8)
	f.sess.send = blockingSend(started, make(chan struct{}))
	l := f.loop()
	l.typeText("first")
	l.key(key(enter))
	l.until("the turn", func(m *Model) bool { return len(started) == 1 })
	for _, p := range []string{"second", "third"} {
		l.typeText(p)
		l.key(key(enter))
	}
	l.key(key(esc))
	l.until("the turn to end", func(m *Model) bool { return !m.busy })
	if len(f.m.queue) != 0 || len(f.sess.sent()) != 1 {
		t.Errorf("queue %q, sent %q", f.m.queue, f.sess.sent())
	}
}

// scripted is a model that answers each step with the next script entry.
type scripted struct {
	mu    sync.Mutex
	steps [][]llm.Part
	reqs  []llm.Request
}

func (s *scripted) Info() llm.ModelInfo {
	return llm.ModelInfo{Provider: "anthropic", Model: "claude-sonnet-4-5"}
}

func (s *scripted) Stream(_ context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	var parts []llm.Part
	if len(s.steps) > 0 {
		parts, s.steps = s.steps[0], s.steps[1:]
	} else {
		parts = []llm.Part{{Type: llm.PartText, Text: "done"}}
	}
	s.mu.Unlock()
	return func(yield func(llm.Event, error) bool) {
		for _, p := range parts {
			switch p.Type {
			case llm.PartText:
				if !yield(llm.Event{Type: llm.EventText, Text: p.Text}, nil) {
					return
				}
			case llm.PartToolCall:
				if !yield(llm.Event{Type: llm.EventToolStart, Call: llm.Part{CallID: p.CallID, Name: p.Name}}, nil) {
					return
				}
			}
		}
		yield(llm.Event{Type: llm.EventFinish, Message: llm.Message{Role: llm.RoleAssistant, Parts: parts}, Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}, nil)
	}
}

func (s *scripted) requests() []llm.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func call(id, name, input string) llm.Part {
	return llm.Part{Type: llm.PartToolCall, CallID: id, Name: name, Input: json.RawMessage(input)}
}

// fakeTool records its calls; a blocking one waits for its context.
type fakeTool struct {
	name     string
	gated    bool
	blocking bool
	mu       sync.Mutex
	calls    []string
	running  chan struct{}
}

func (t *fakeTool) Name() string            { return t.name }
func (t *fakeTool) Description() string     { return t.name }
func (t *fakeTool) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (t *fakeTool) Gated() bool             { return t.gated }
func (t *fakeTool) Run(ctx context.Context, input json.RawMessage, output func(string)) (agent.Result, error) {
	t.mu.Lock()
	t.calls = append(t.calls, string(input))
	t.mu.Unlock()
	if !t.blocking {
		return agent.Result{Output: "ran"}, nil
	}
	output("started\n")
	close(t.running)
	<-ctx.Done()
	return agent.Result{Output: "interrupted: " + context.Cause(ctx).Error(), IsError: true}, nil
}

func (t *fakeTool) callCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls)
}

// withAgent gives the fixture a real agent over model and tools, asking
// the UI for approvals.
func withAgent(t *testing.T, f *fixture, model llm.Model, tools ...agent.Tool) {
	a, err := agent.New(agent.Config{
		Model:    model,
		Tools:    func() []agent.Tool { return tools },
		Approver: agent.ApproverFunc(f.app.Asker().Approve),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.sess.agent = a
	f.sess.send = a.Send
}

func TestCtrlCInterruptsTheCommandAndTheTurnGoesOn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	bash := &fakeTool{name: "bash", blocking: true, running: make(chan struct{})}
	model := &scripted{steps: [][]llm.Part{
		{call("b1", "bash", `{"command":"sleep 100"}`)},
		{{Type: llm.PartText, Text: "It was interrupted."}},
	}}
	withAgent(t, f, model, bash)
	l := f.loop()
	l.typeText("sleep")
	l.key(key(enter))
	l.until("the command to run", func(m *Model) bool { return m.turn.running() && len(bash.running) == 0 && isClosed(bash.running) })
	if !strings.Contains(f.view(), "bash(sleep 100)") {
		t.Errorf("the tool in flight is not shown:\n%s", f.view())
	}
	l.key(key(ctrlC))
	l.until("the turn to end", func(m *Model) bool { return !m.busy })
	if f.m.quitting || l.quit {
		t.Fatal("ctrl-c with a command running quit")
	}
	printed := f.printed()
	for _, want := range []string{"interrupted: sleep 100", "x bash(sleep 100) · interrupted: interrupted by the user", "It was interrupted."} {
		if !strings.Contains(printed, want) {
			t.Errorf("transcript lacks %q:\n%s", want, printed)
		}
	}
	reqs := model.requests()
	if len(reqs) != 2 || !strings.Contains(lastToolOutput(reqs[1]), "interrupted by the user") {
		t.Errorf("the model did not receive the interrupted result: %d requests", len(reqs))
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func lastToolOutput(req llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		for _, p := range req.Messages[i].Parts {
			if p.Type == llm.PartToolResult {
				return p.Output
			}
		}
	}
	return ""
}

func TestCtrlC(t *testing.T) {
	t.Parallel()
	t.Run("quits when nothing runs", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		l := f.loop()
		l.key(key(ctrlC))
		l.until("the quit", func(*Model) bool { return l.quit })
		if f.m.forced {
			t.Error("forced")
		}
	})
	t.Run("a second in a row quits mid-turn, a third forces the exit", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		f.m.busy = true
		f.m.turn.tools = []activeTool{{id: "1", name: "bash", summary: "sleep 1", running: true}}
		f.send(key(ctrlC))
		if f.m.quitting {
			t.Fatal("the first ctrl-c with a command running quit")
		}
		f.send(key(ctrlC))
		if !f.m.quitting || f.m.forced {
			t.Fatalf("after two: quitting %v, forced %v", f.m.quitting, f.m.forced)
		}
		f.send(key(ctrlC))
		if !f.m.forced {
			t.Error("not forced after three")
		}
	})
	t.Run("another key resets the count", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		f.m.busy = true
		f.m.turn.tools = []activeTool{{id: "1", name: "bash", running: true}}
		f.send(key(ctrlC), runes("x"), key(ctrlC), runes("y"), key(ctrlC))
		if f.m.forced || f.m.quitting {
			t.Error("quit although the presses were not in a row")
		}
	})
	t.Run("presses more than a second apart do not quit", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 80)
		now := time.Unix(1000, 0)
		f.m.clock = func() time.Time { return now }
		f.m.busy = true
		f.m.turn.tools = []activeTool{{id: "1", name: "bash", running: true}}
		f.send(key(ctrlC))
		now = now.Add(1500 * time.Millisecond)
		f.send(key(ctrlC))
		if f.m.quitting {
			t.Error("two presses 1.5 s apart quit")
		}
	})
}

func TestApprovals(t *testing.T) {
	t.Parallel()
	t.Run("y runs once, a always, n denies", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 100)
		write := &fakeTool{name: "write_file", gated: true}
		model := &scripted{steps: [][]llm.Part{
			{call("w1", "write_file", `{"path":"a.txt","content":"a\n"}`)},
			{call("w2", "write_file", `{"path":"b.txt","content":"b\n"}`)},
			{call("w3", "write_file", `{"path":"c.txt","content":"c\n"}`)},
			{call("w4", "write_file", `{"path":"d.txt","content":"d\n"}`)},
		}}
		withAgent(t, f, model, write)
		l := f.loop()
		l.typeText("write")
		l.key(key(enter))
		l.until("the first approval", func(m *Model) bool { return m.approval != nil })
		if v := f.view(); !strings.Contains(v, "write_file wants to run") || !strings.Contains(v, "a.txt (new file) +1 -0") {
			t.Errorf("approval view:\n%s", v)
		}
		l.key(runes("y"))
		l.until("the second approval", func(m *Model) bool { return m.approval != nil && m.approval.msg.req.ID == "w2" })
		l.key(runes("a"))
		l.until("the turn to end", func(m *Model) bool { return !m.busy })
		if n := write.callCount(); n != 4 {
			t.Errorf("%d writes ran, want 4 (once, always, then two without asking)", n)
		}
		// /tools says so.
		f.m.runCommand("/tools")
		if !strings.Contains(f.m.info.body, "write_file       core       allowed") {
			t.Errorf("/tools does not show the grant:\n%s", f.m.info.body)
		}
		// A new session-wide decision: n denies.
		f2 := newFixture(t, 100)
		edit := &fakeTool{name: "edit_file", gated: true}
		withAgent(t, f2, &scripted{steps: [][]llm.Part{{call("e1", "edit_file", `{"path":"a.txt","oldString":"a","newString":"b"}`)}}}, edit)
		l2 := f2.loop()
		l2.typeText("edit")
		l2.key(key(enter))
		l2.until("the approval", func(m *Model) bool { return m.approval != nil })
		l2.key(key(esc))
		l2.until("the turn to end", func(m *Model) bool { return !m.busy })
		if edit.callCount() != 0 || !strings.Contains(f2.printed(), "x edit_file denied: a.txt") {
			t.Errorf("esc did not deny: %d calls\n%s", edit.callCount(), f2.printed())
		}
	})
	t.Run("always answers the same tool's waiting approvals", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 100)
		r1, r2, r3 := make(chan agent.Decision, 1), make(chan agent.Decision, 1), make(chan agent.Decision, 1)
		f.send(
			approvalMsg{req: agent.ApprovalRequest{ID: "1", Tool: "bash", Input: []byte(`{"command":"a"}`)}, detail: preview{command: "a"}, reply: r1},
			approvalMsg{req: agent.ApprovalRequest{ID: "2", Tool: "write_file"}, reply: r2},
			approvalMsg{req: agent.ApprovalRequest{ID: "3", Tool: "bash", Input: []byte(`{"command":"b"}`)}, detail: preview{command: "b"}, reply: r3},
		)
		l := f.loop()
		l.key(runes("a"))
		l.until("the answers", func(m *Model) bool { return len(r1) == 1 && len(r3) == 1 })
		if d1, d3 := <-r1, <-r3; d1 != agent.Always || d3 != agent.Always {
			t.Errorf("decisions %v %v", d1, d3)
		}
		if f.m.approval == nil || f.m.approval.msg.req.ID != "2" {
			t.Errorf("the write_file approval should be shown next")
		}
	})
}

func TestCtrlRTogglesTheReasoning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	f.m.startTurn("think")
	f.send(ev(f, agent.Event{Type: agent.EventReasoning, Text: "deep thought one\ndeep thought two"}))
	if v := f.view(); !strings.Contains(v, "thinking… ~9 tokens  ctrl-r to expand") || strings.Contains(v, "deep thought") {
		t.Fatalf("collapsed:\n%s", v)
	}
	f.send(key(ctrlR))
	if v := f.view(); !strings.Contains(v, "deep thought two") {
		t.Fatalf("expanded:\n%s", v)
	}
	f.send(key(ctrlR))
	if v := f.view(); strings.Contains(v, "deep thought") {
		t.Fatalf("collapsed again:\n%s", v)
	}
	f.send(turnEndMsg{turn: f.m.turnID})
	if v := f.view(); strings.Contains(v, "thinking") {
		t.Errorf("the reasoning outlived the turn:\n%s", v)
	}
}

func TestFilePickerWalksOnFirstAtAndInserts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	for _, p := range []string{"src/main.go", "src/util/x.go", "lib/src/y.go", "README.md"} {
		full := filepath.Join(f.ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := f.loop()
	l.typeText("fix ")
	if f.m.files.loading || f.m.files.loaded {
		t.Fatal("the walk started before the first @")
	}
	l.typeText("@src/")
	l.until("the index", func(m *Model) bool { return m.files.loaded })
	if got := f.m.fileMenu(); !slices.Equal(got, []string{"src/main.go", "src/util/x.go", "lib/src/y.go"}) {
		t.Errorf("picker %q", got)
	}
	l.key(key(down))
	l.key(key(tab))
	if got := f.m.input.Value(); got != "fix src/util/x.go " {
		t.Errorf("input %q", got)
	}
	if f.m.fileMenu() != nil {
		t.Error("the picker stayed open")
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	t.Run("enter runs the highlighted command", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 100)
		l := f.loop()
		l.typeText("/co")
		l.key(key(down))
		l.key(key(enter))
		if f.m.info == nil || f.m.info.title != "cost" {
			t.Errorf("info %+v", f.m.info)
		}
	})
	t.Run("an unknown command says so", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 100)
		f.typeText("/nope now")
		f.send(key(enter))
		if !strings.Contains(f.printed(), "unknown command /nope - try /help") {
			t.Errorf("printed:\n%s", f.printed())
		}
	})
	t.Run("help lists every command", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 100)
		f.m.runCommand("/help")
		for _, c := range commands() {
			if !strings.Contains(f.m.info.body, "/"+c.name) {
				t.Errorf("/help lacks /%s", c.name)
			}
		}
	})
	t.Run("tools shows sets and what is offered", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 120)
		f.sess.offered = append(f.sess.offered,
			orchestrator.OfferedTool{Name: "todo_write", Kind: orchestrator.KindSession},
			orchestrator.OfferedTool{Name: "mcp__docs__search", Kind: orchestrator.KindMCP, Gated: true})
		f.m.runCommand("/tools")
		body := f.m.info.body
		for _, want := range []string{"9 offered this turn of 20 registered", "multi_edit        edit-plus  asks    withheld", "current_time      plugin",
			"todo_write        session    free", "mcp__docs__search mcp        asks"} {
			if !strings.Contains(body, want) {
				t.Errorf("/tools lacks %q:\n%s", want, body)
			}
		}
	})
	t.Run("resume without an id offers the sessions", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 100)
		l := f.loop()
		l.typeText("/resume")
		l.key(key(enter))
		l.until("the answer", func(m *Model) bool { return strings.Contains(f.printed(), "no saved sessions to resume") })
	})
	t.Run("compact replaces the history", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 100)
		f.sess.compact = func(context.Context) (int, int, error) { return 6, 1, nil }
		l := f.loop()
		l.typeText("/compact")
		l.key(key(enter))
		l.until("compaction", func(m *Model) bool { return !m.busy })
		if !strings.Contains(f.printed(), "compacted 6 messages into 1") {
			t.Errorf("printed:\n%s", f.printed())
		}
	})
}

func TestUnconfiguredRefusesPromptsAndOpensOnboarding(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100, func(o *Options) { o.Configured = false })
	f.m.Init()
	if f.m.form == nil || !strings.Contains(f.view(), "Which provider?") {
		t.Fatalf("onboarding did not open:\n%s", f.view())
	}
	f.send(key(esc))
	f.typeText("hello")
	f.send(key(enter))
	if !strings.Contains(f.printed(), "no provider configured yet - run /provider") || len(f.sess.sent()) != 0 {
		t.Errorf("printed:\n%s", f.printed())
	}
}

func TestHistoryIsSavedPerProject(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	l := f.loop()
	for _, p := range []string{"one", "two"} {
		l.typeText(p)
		l.key(key(enter))
		l.until("the turn", func(m *Model) bool { return !m.busy })
	}
	l.key(key(up))
	if f.m.input.Value() != "two" {
		t.Errorf("up recalled %q", f.m.input.Value())
	}
	file := historyFile(f.app.opts.Paths, f.app.opts.Workspace)
	l.until("the history file", func(m *Model) bool { return slices.Equal(loadHistory(file), []string{"one", "two"}) })
}

func TestRunStopsEverythingItStarted(t *testing.T) {
	// goleak (TestMain) checks that nothing outlives Run.
	f := newFixture(t, 100)
	started := make(chan string, 1)
	f.sess.send = blockingSend(started, make(chan struct{}))
	in, keys := newPipe(t)
	f.app.opts.Input = in
	done := make(chan error, 1)
	go func() {
		_, err := f.app.Run(t.Context(), f.sess)
		done <- err
	}()
	keys("hello\r")
	<-started
	keys("\x03\x03") // ctrl-c twice: it quits mid-turn and aborts the turn
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// newPipe is a terminal input for Run; the returned func types into it.
func newPipe(t *testing.T) (*os.File, func(string)) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); r.Close() })
	return r, func(s string) {
		if _, err := w.WriteString(s); err != nil {
			t.Error(err)
		}
	}
}
