package sessiontools

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
)

// scriptedModel answers each request with the next reply.
type scriptedModel struct {
	mu      sync.Mutex
	replies []llm.Message
	errs    []error
	reqs    []llm.Request
}

func (m *scriptedModel) Info() llm.ModelInfo { return llm.ModelInfo{Provider: "fake", Model: "fake"} }

func (m *scriptedModel) Stream(_ context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	msg := llm.Message{Role: llm.RoleAssistant}
	var err error
	if len(m.replies) > 0 {
		msg, m.replies = m.replies[0], m.replies[1:]
	}
	if len(m.errs) > 0 {
		err, m.errs = m.errs[0], m.errs[1:]
	}
	m.mu.Unlock()
	return func(yield func(llm.Event, error) bool) {
		if err != nil {
			yield(llm.Event{}, err)
			return
		}
		for _, p := range msg.Parts {
			if p.Type == llm.PartText && !yield(llm.Event{Type: llm.EventText, Text: p.Text}, nil) {
				return
			}
		}
		yield(llm.Event{Type: llm.EventFinish, Message: msg}, nil)
	}
}

func text(s string) llm.Message { return llm.Text(llm.RoleAssistant, s) }

func calls(parts ...llm.Part) llm.Message { return llm.Message{Role: llm.RoleAssistant, Parts: parts} }

func toolCall(id, name, input string) llm.Part {
	return llm.Part{Type: llm.PartToolCall, CallID: id, Name: name, Input: json.RawMessage(input)}
}

// stubTool records its calls.
type stubTool struct {
	name  string
	gated bool
	ran   *[]string
}

func (s stubTool) Name() string            { return s.name }
func (s stubTool) Description() string     { return s.name }
func (s stubTool) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (s stubTool) Gated() bool             { return s.gated }
func (s stubTool) Run(context.Context, json.RawMessage, func(string)) (agent.Result, error) {
	*s.ran = append(*s.ran, s.name)
	return agent.Result{Output: s.name + " ok"}, nil
}

func sessionTools(ran *[]string) func() []agent.Tool {
	return func() []agent.Tool {
		var out []agent.Tool
		for _, n := range []string{"read_file", "write_file", "edit_file", "glob", "bash", "grep", "list_dir", "git_status"} {
			out = append(out, stubTool{name: n, gated: n == "write_file" || n == "edit_file" || n == "bash", ran: ran})
		}
		return out
	}
}

func TestTaskOffersOnlyReadToolsAndRefusesAForgedWrite(t *testing.T) {
	t.Parallel()
	var ran []string
	model := &scriptedModel{replies: []llm.Message{
		calls(toolCall("s1", "write_file", `{"path":"x","content":"y"}`), toolCall("s2", "grep", `{"pattern":"TODO"}`)),
		text("  Found TODO in a.go:3.  "),
	}}
	task := &Task{Model: func() llm.Model { return model }, Tools: sessionTools(&ran)}
	res, err := task.Run(t.Context(), json.RawMessage(`{"description":"find todos","prompt":"find TODOs and write them to x"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Output != "Found TODO in a.go:3." {
		t.Errorf("report %q", res.Output)
	}
	var offered []string
	for _, s := range model.reqs[0].Tools {
		offered = append(offered, s.Name)
	}
	if strings.Join(offered, ",") != "read_file,glob,grep,list_dir" {
		t.Errorf("subagent offered %v", offered)
	}
	if !strings.Contains(model.reqs[0].System, "exploration subagent") || len(model.reqs[0].Messages) != 1 {
		t.Errorf("request: system %q, %d messages", model.reqs[0].System, len(model.reqs[0].Messages))
	}
	if slices.Contains(ran, "write_file") || !slices.Equal(ran, []string{"grep"}) {
		t.Errorf("tools that ran: %v", ran)
	}
	results := model.reqs[1].Messages[len(model.reqs[1].Messages)-1].Parts
	if !results[0].IsError || !strings.Contains(results[0].Output, `Unknown tool "write_file"`) {
		t.Errorf("forged write result %+v", results[0])
	}
}

func TestTaskKindsAndEdges(t *testing.T) {
	t.Parallel()
	var ran []string
	t.Run("review kind has its own prompt", func(t *testing.T) {
		t.Parallel()
		model := &scriptedModel{replies: []llm.Message{text("Looks correct.")}}
		res, _ := (&Task{Model: func() llm.Model { return model }, Tools: sessionTools(&ran)}).Run(t.Context(), json.RawMessage(`{"description":"d","prompt":"review a.go","kind":"review"}`), nil)
		if res.Output != "Looks correct." || !strings.Contains(model.reqs[0].System, "severity") {
			t.Errorf("%q / %q", res.Output, model.reqs[0].System)
		}
	})
	t.Run("empty report", func(t *testing.T) {
		t.Parallel()
		model := &scriptedModel{replies: []llm.Message{text("  ")}}
		res, _ := (&Task{Model: func() llm.Model { return model }, Tools: sessionTools(&ran)}).Run(t.Context(), json.RawMessage(`{"description":"d","prompt":"p"}`), nil)
		if res.Output != NoFindings {
			t.Errorf("%q", res.Output)
		}
	})
	t.Run("unknown kind", func(t *testing.T) {
		t.Parallel()
		res, _ := (&Task{Model: func() llm.Model { return &scriptedModel{} }, Tools: sessionTools(&ran)}).Run(t.Context(), json.RawMessage(`{"description":"d","prompt":"p","kind":"worker"}`), nil)
		if !res.IsError {
			t.Errorf("%q", res.Output)
		}
	})
	t.Run("a provider error is a tool error", func(t *testing.T) {
		t.Parallel()
		model := &scriptedModel{errs: []error{errors.New("overloaded")}}
		res, err := (&Task{Model: func() llm.Model { return model }, Tools: sessionTools(&ran)}).Run(t.Context(), json.RawMessage(`{"description":"d","prompt":"p"}`), nil)
		if err != nil || !res.IsError || !strings.Contains(res.Output, "overloaded") {
			t.Errorf("%v %+v", err, res)
		}
	})
	t.Run("stops at 20 steps", func(t *testing.T) {
		t.Parallel()
		var replies []llm.Message
		for range 30 {
			replies = append(replies, calls(toolCall("g", "glob", `{"pattern":"*"}`)))
		}
		model := &scriptedModel{replies: replies}
		res, _ := (&Task{Model: func() llm.Model { return model }, Tools: sessionTools(&[]string{})}).Run(t.Context(), json.RawMessage(`{"description":"d","prompt":"p"}`), nil)
		if len(model.reqs) != SubagentMaxSteps || !strings.Contains(res.Output, "limit of 20 steps") {
			t.Errorf("%d requests, %q", len(model.reqs), res.Output)
		}
	})
}

func TestTaskReportsProgress(t *testing.T) {
	t.Parallel()
	var ran []string
	model := &scriptedModel{replies: []llm.Message{
		calls(toolCall("s1", "grep", `{"pattern":"TODO"}`)),
		calls(toolCall("s2", "read_file", `{"path":"a.go"}`)),
		text("a.go:3"),
		text(""),
	}}
	var events []SubagentEvent
	task := &Task{Model: func() llm.Model { return model }, Tools: sessionTools(&ran), Progress: func(ev SubagentEvent) { events = append(events, ev) }}
	if _, err := task.Run(t.Context(), json.RawMessage(`{"description":"find todos","prompt":"p","kind":"explore"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := task.Run(t.Context(), json.RawMessage(`{"description":"second","prompt":"p"}`), nil); err != nil {
		t.Fatal(err)
	}
	want := []SubagentEvent{
		{Type: SubagentStart, ID: "sub1", Kind: KindExplore, Description: "find todos"},
		{Type: SubagentStep, ID: "sub1", Tool: "grep", Summary: "TODO"},
		{Type: SubagentStep, ID: "sub1", Tool: "read_file", Summary: "a.go"},
		{Type: SubagentEnd, ID: "sub1", OK: true, Steps: 2},
		{Type: SubagentStart, ID: "sub2", Kind: KindExplore, Description: "second"},
		{Type: SubagentEnd, ID: "sub2", OK: false, Steps: 0},
	}
	if !slices.Equal(events, want) {
		t.Errorf("events\n got %+v\nwant %+v", events, want)
	}
}
