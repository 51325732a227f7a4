package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
)

// openFailed is the error of a sandbox that cannot be opened.
type openFailed struct{}

func (openFailed) Error() string  { return "no engine at unix:///nowhere" }
func (openFailed) EndsTurn() bool { return true }

// failingTool fails with err, counting its runs.
type failingTool struct {
	name string
	err  error
	mu   sync.Mutex
	runs int
}

func (t *failingTool) Name() string            { return t.name }
func (t *failingTool) Description() string     { return t.name }
func (t *failingTool) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (t *failingTool) Gated() bool             { return false }
func (t *failingTool) Run(context.Context, json.RawMessage, func(string)) (agent.Result, error) {
	t.mu.Lock()
	t.runs++
	t.mu.Unlock()
	return agent.Result{}, t.err
}

// TestAToolErrorThatEndsTheTurn: a Go error that says the turn cannot go
// on (a sandbox that cannot open) ends the turn with an error event naming
// it, the model is not asked to carry on, the step's other calls do not
// run, and the history stays paired; any other Go error is a tool error
// the model reads.
func TestAToolErrorThatEndsTheTurn(t *testing.T) {
	t.Parallel()
	bash := &failingTool{name: "bash", err: fmt.Errorf("run bash command: %w", openFailed{})}
	grep := &failingTool{name: "grep", err: openFailed{}}
	h := newHarness(t, agent.Config{Tools: tools(bash, grep)},
		step{calls: []llm.Part{call("c1", "bash", `{}`), call("c2", "grep", `{}`)}},
		step{text: "sorry, the sandbox is broken"})
	err := h.send(t, "build it")
	if !errors.As(err, new(agent.TurnEnder)) {
		t.Fatalf("Send: %v", err)
	}
	last := h.events[len(h.events)-1]
	if last.Type != agent.EventError || !strings.Contains(last.Error, "no engine at unix:///nowhere") {
		t.Errorf("last event %+v (events %s)", last, h.types())
	}
	if n := len(h.model.reqs); n != 1 {
		t.Errorf("%d model requests, want 1: the model was asked to carry on", n)
	}
	if bash.runs != 1 || grep.runs != 0 {
		t.Errorf("runs: bash %d, grep %d", bash.runs, grep.runs)
	}
	msgs := h.agent.Messages()
	if len(msgs) != 3 || msgs[2].Role != llm.RoleTool || len(msgs[2].Parts) != 2 {
		t.Fatalf("history %+v", msgs)
	}

	other := &failingTool{name: "bash", err: errors.New("disk full")}
	h = newHarness(t, agent.Config{Tools: tools(other)}, step{calls: []llm.Part{call("c1", "bash", `{}`)}}, step{text: "ok"})
	if err := h.send(t, "go"); err != nil {
		t.Fatalf("an ordinary tool failure ended the turn: %v", err)
	}
	if len(h.model.reqs) != 2 {
		t.Errorf("%d requests, want 2", len(h.model.reqs))
	}
}

// TestAnInterruptedPromptIsMarked: a turn aborted before the model
// answered leaves its prompt marked as interrupted and answered by a
// placeholder, so that the next prompt is a message of its own.
func TestAnInterruptedPromptIsMarked(t *testing.T) {
	t.Parallel()
	m := &abortingModel{}
	a, err := agent.New(agent.Config{Model: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	m.cancel = cancel
	if err := a.Send(ctx, "first question", func(agent.Event) {}); err != nil {
		t.Fatal(err)
	}
	m.cancel = nil
	if err := a.Send(t.Context(), "second question", func(agent.Event) {}); err != nil {
		t.Fatal(err)
	}
	req := m.reqs[1]
	if n := len(req.Messages); n != 3 {
		t.Fatalf("%d messages: %+v", n, req.Messages)
	}
	first, placeholder, next := req.Messages[0], req.Messages[1], req.Messages[2]
	if len(first.Parts) != 2 || first.Parts[0].Text != "first question" || first.Parts[1].Text != agent.InterruptedPrompt {
		t.Errorf("the cancelled prompt: %+v", first)
	}
	if placeholder.Role != llm.RoleAssistant || placeholder.Parts[0].Text != agent.InterruptedReply {
		t.Errorf("the placeholder: %+v", placeholder)
	}
	if next.Role != llm.RoleUser || len(next.Parts) != 1 || next.Parts[0].Text != "second question" {
		t.Errorf("the new prompt: %+v", next)
	}
}

// abortingModel cancels the turn (cancel, when set) after streaming some
// text, before it finishes; otherwise it answers. It reports the input
// tokens at the start, as Anthropic does, when reportInput is set.
type abortingModel struct {
	cancel      context.CancelFunc
	reportInput int
	reqs        []llm.Request
}

func (m *abortingModel) Info() llm.ModelInfo { return llm.ModelInfo{Provider: "fake", Model: "fake"} }

func (m *abortingModel) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	m.reqs = append(m.reqs, req)
	cancel := m.cancel
	return func(yield func(llm.Event, error) bool) {
		if m.reportInput > 0 && !yield(llm.Event{Type: llm.EventUsage, Usage: llm.Usage{InputTokens: m.reportInput, OutputTokens: 1}}, nil) {
			return
		}
		if !yield(llm.Event{Type: llm.EventText, Text: strings.Repeat("x", 400)}, nil) {
			return
		}
		if cancel != nil {
			cancel()
			yield(llm.Event{}, ctx.Err())
			return
		}
		yield(llm.Event{Type: llm.EventFinish, Message: llm.Text(llm.RoleAssistant, "answer"), Usage: llm.Usage{InputTokens: 7, OutputTokens: 3}}, nil)
	}
}

// TestAnAbortedRequestIsCounted: a request cut before the provider's
// final count still counts, what the provider reported (the input at the
// start) or, where it reported nothing, an estimate marked as one.
func TestAnAbortedRequestIsCounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		reportInput   int
		wantInput     func(int) bool
		wantEstimated bool
	}{
		{"the reported input and the streamed output", 1234, func(n int) bool { return n == 1234 }, true},
		{"an estimate of both", 0, func(n int) bool { return n > 0 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &abortingModel{reportInput: tc.reportInput}
			var counted []llm.Usage
			a, err := agent.New(agent.Config{Model: m, OnUsage: func(u llm.Usage) { counted = append(counted, u) }})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			m.cancel = cancel
			if err := a.Send(ctx, "hello", func(agent.Event) {}); err != nil {
				t.Fatal(err)
			}
			if len(counted) != 1 {
				t.Fatalf("counted %+v", counted)
			}
			u := counted[0]
			if !tc.wantInput(u.InputTokens) || u.OutputTokens != 100 || u.Estimated != tc.wantEstimated {
				t.Errorf("counted %+v", u)
			}
			if a.Usage() != u {
				t.Errorf("total %+v", a.Usage())
			}
		})
	}
}
