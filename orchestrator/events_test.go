package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
	"github.com/shiroagent/shiro/sandbox/local"
)

// recorder is a session's sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
	added  chan struct{} // signalled after each event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	if r.added == nil {
		r.added = make(chan struct{}, 1)
	}
	added := r.added
	r.mu.Unlock()
	select {
	case added <- struct{}{}:
	default:
	}
}

// waitFor waits until an event that ok accepts has arrived (at most 10s).
func (r *recorder) waitFor(t *testing.T, ok func(Event) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r.mu.Lock()
	if r.added == nil {
		r.added = make(chan struct{}, 1)
	}
	added := r.added
	r.mu.Unlock()
	for {
		if slices.ContainsFunc(r.all(), ok) {
			return
		}
		select {
		case <-added:
		case <-ctx.Done():
			t.Fatal("the event never came")
		}
	}
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// testAsker is an Asker of func fields; a nil one refuses.
type testAsker struct {
	approve func(context.Context, agent.ApprovalRequest) (agent.Decision, error)
	ask     func(context.Context, sessiontools.Question) ([]string, error)
}

func (a testAsker) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	if a.approve == nil {
		return agent.Deny, nil
	}
	return a.approve(ctx, req)
}

func (a testAsker) Ask(ctx context.Context, q sessiontools.Question) ([]string, error) {
	if a.ask == nil {
		return nil, nil
	}
	return a.ask(ctx, q)
}

func (testAsker) AskHost(context.Context, egress.Request) egress.Answer { return egress.Deny }

func TestSessionPublishesThroughOneSink(t *testing.T) {
	t.Parallel()
	// A store that cannot be written: every save fails.
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	model := &mcpModel{replies: []llm.Message{
		mcpCalls([2]string{"todo_write", `{"todos":[{"content":"write the test","status":"in_progress"}]}`}),
		llm.Text(llm.RoleAssistant, "done"),
	}}
	rec := &recorder{}
	s := mcpSession(t, model, SessionOptions{
		Events:     rec.add,
		Store:      &store.Store{Dir: filepath.Join(blocked, "sessions")},
		MCPServers: map[string]json.RawMessage{"dies": json.RawMessage(`{"command":"sh","args":["-c","exit 1"]}`)},
	})
	if err := s.Send(t.Context(), "plan"); err != nil {
		t.Fatal(err)
	}
	// The saver's goroutine saves the turn a moment later, and fails.
	rec.waitFor(t, func(e Event) bool { _, ok := e.(SaveErrorEvent); return ok })

	var turn []agent.EventType
	var history []int
	var todos [][]sessiontools.Todo
	var notices []string
	var saveErrs int
	for _, e := range rec.all() {
		switch e := e.(type) {
		case TurnEvent:
			turn = append(turn, e.Type)
		case HistoryEvent:
			history = append(history, len(e.Messages))
		case TodosEvent:
			todos = append(todos, e.Items)
		case NoticeEvent:
			notices = append(notices, e.Text)
		case SaveErrorEvent:
			saveErrs++
		}
	}
	if len(turn) == 0 || turn[len(turn)-1] != agent.EventDone || !slices.Contains(turn, agent.EventToolCall) {
		t.Errorf("turn events %v: want the tool call and the end", turn)
	}
	// The prompt, the call, its result, the answer.
	if !slices.Equal(history, []int{1, 2, 3, 4}) {
		t.Errorf("history lengths %v", history)
	}
	if len(todos) != 1 || len(todos[0]) != 1 || todos[0][0].Content != "write the test" {
		t.Errorf("todos %+v", todos)
	}
	if len(notices) != 1 || !strings.HasPrefix(notices[0], "mcp dies failed: ") {
		t.Errorf("notices %q", notices)
	}
	if saveErrs == 0 {
		t.Error("no SaveErrorEvent for a failed save")
	}
}

func TestSessionPublishesUsage(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	model := billedModel{id: "claude-sonnet-4-5", usage: llm.Usage{InputTokens: 1000, OutputTokens: 100}}
	rec := &recorder{}
	s, err := NewSession(SessionOptions{Workspace: ws, Model: model, Sandbox: SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: ws}, Events: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{"one", "two"} {
		if err := s.Send(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	var got []UsageEvent
	for _, e := range rec.all() {
		if u, ok := e.(UsageEvent); ok {
			got = append(got, u)
		}
	}
	usd, _ := Cost(model.id, llm.Usage{InputTokens: 2000, OutputTokens: 200})
	if len(got) != 2 || got[0].Request != model.usage || got[1].Total.InputTokens != 2000 || got[1].Total.CostUSD != usd {
		t.Errorf("usage events %+v", got)
	}
}

func TestSessionWithoutASinkDropsEvents(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	model := &mcpModel{replies: []llm.Message{mcpCalls([2]string{"todo_write", `{"todos":[{"content":"x","status":"pending"}]}`})}}
	s, err := NewSession(SessionOptions{Workspace: ws, Model: model, Sandbox: SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: ws}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send(t.Context(), "go"); err != nil {
		t.Fatal(err)
	}
	if items := s.Todos().Items(); len(items) != 1 {
		t.Errorf("the turn did not run: todos %+v", items)
	}
}

// progressBackend writes progress while it opens a sandbox on the host.
type progressBackend struct{ sandbox.Backend }

func (progressBackend) Name() string                                 { return "orchestrator-progress-test" }
func (progressBackend) DefaultWorkspaceMode(sandbox.Settings) string { return sandbox.WorkspaceMount }
func (progressBackend) Open(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if spec.Progress == nil {
		return nil, errors.New("no progress writer")
	}
	spec.Progress.Write([]byte("building the image\nStep 1/2"))
	return local.New(spec.Workspace)
}

var registerProgress sync.Once

func TestSessionPublishesTheSandboxProgress(t *testing.T) {
	t.Parallel()
	registerProgress.Do(func() { sandbox.Register(progressBackend{}) })
	ws := t.TempDir()
	rec := &recorder{}
	settings := sandbox.Settings{Backend: progressBackend{}.Name(), Network: sandbox.NetworkNone}
	s, err := NewSession(SessionOptions{Workspace: ws, Model: &mcpModel{}, Sandbox: SandboxConfig{Settings: settings, Workspace: ws, Progress: failingWriter{}}, Events: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.StartSandbox(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rec.all() {
		if p, ok := e.(ProgressEvent); ok {
			got = append(got, p.Text)
		}
	}
	if want := []string{"building the image\nStep 1/2"}; !slices.Equal(got, want) {
		t.Errorf("progress %q, want %q", got, want)
	}
}

// failingWriter stands for a Progress the session must not use.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) {
	return 0, errors.New("the session used Sandbox.Progress")
}

func TestSessionAskerMakesItInteractive(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		asker Asker
		ask   bool
	}{
		{"without an asker no one is asked", nil, false},
		{"with an asker the ask tool is offered", testAsker{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			model := &mcpModel{}
			s := mcpSession(t, model, SessionOptions{Asker: c.asker, NoMCP: true})
			send(t, s, "hi")
			if got := slices.Contains(specNames(model.requests()[0]), "ask"); got != c.ask {
				t.Errorf("ask offered: %v, want %v", got, c.ask)
			}
		})
	}
}

func TestSessionHeadlessDeniesGatedCalls(t *testing.T) {
	t.Parallel()
	model := &mcpModel{replies: []llm.Message{mcpCalls([2]string{"write_file", `{"path":"a.txt","content":"x"}`})}}
	s := mcpSession(t, model, SessionOptions{NoMCP: true})
	events := send(t, s, "write")
	var denied []string
	for _, e := range events {
		if e.Type == agent.EventToolDenied {
			denied = append(denied, e.Reason)
		}
	}
	if want := []string{agent.NoApprover}; !slices.Equal(denied, want) {
		t.Errorf("denials %q, want %q", denied, want)
	}
	if _, err := os.Stat(filepath.Join(s.Workspace(), "a.txt")); err == nil {
		t.Error("a denied write was made")
	}
}

func TestSessionAskerApproves(t *testing.T) {
	t.Parallel()
	model := &mcpModel{replies: []llm.Message{mcpCalls([2]string{"write_file", `{"path":"a.txt","content":"x"}`})}}
	var asked []string
	asker := testAsker{approve: func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
		asked = append(asked, req.Tool)
		return agent.Once, nil
	}}
	s := mcpSession(t, model, SessionOptions{Asker: asker, NoMCP: true})
	send(t, s, "write")
	if !slices.Equal(asked, []string{"write_file"}) {
		t.Errorf("asked %v", asked)
	}
	if b, err := os.ReadFile(filepath.Join(s.Workspace(), "a.txt")); err != nil || string(b) != "x" {
		t.Errorf("the approved write: %q %v", b, err)
	}
}

func TestProgressWriterTotals(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	w := progressWriter{&Session{events: rec.add}}
	sandbox.ReportTotal(w, sandbox.Total{Done: 10, Of: 40})
	sandbox.ReportTotal(w, sandbox.Total{Build: true, Done: 2, Of: 5})
	var got []sandbox.Total
	for _, e := range rec.all() {
		if p, ok := e.(ProgressEvent); ok && p.Total != nil {
			got = append(got, *p.Total)
		}
	}
	if want := []sandbox.Total{{Done: 10, Of: 40}, {Build: true, Done: 2, Of: 5}}; !slices.Equal(got, want) {
		t.Errorf("totals %+v, want %+v", got, want)
	}
}
