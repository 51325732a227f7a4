package orchestrator

import (
	"context"
	"iter"
	"testing"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/sandbox"
)

// summarizer answers every call with a fixed summary and keeps the request.
type summarizer struct{ req llm.Request }

func (s *summarizer) Info() llm.ModelInfo { return llm.ModelInfo{Provider: "test", Model: "test"} }
func (s *summarizer) Stream(_ context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	s.req = req
	return func(yield func(llm.Event, error) bool) {
		if yield(llm.Event{Type: llm.EventText, Text: "  goal: x; files: a.go  "}, nil) {
			yield(llm.Event{Type: llm.EventFinish, Message: llm.Text(llm.RoleAssistant, "goal")}, nil)
		}
	}
}

func TestCompact(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	m := &summarizer{}
	s, err := NewSession(SessionOptions{Workspace: ws, Model: m, Sandbox: SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: ws}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if b, a, err := s.Compact(t.Context()); b != 0 || a != 0 || err != nil {
		t.Fatalf("empty session: %d %d %v", b, a, err)
	}
	s.agent.Replace([]llm.Message{llm.Text(llm.RoleUser, "fix a.go"), llm.Text(llm.RoleAssistant, "done")})
	before, after, err := s.Compact(t.Context())
	if err != nil || before != 2 || after != 1 {
		t.Fatalf("compact: %d %d %v", before, after, err)
	}
	got := s.agent.Messages()
	if len(got) != 1 || got[0].Parts[0].Text != "Summary of the session so far:\n\ngoal: x; files: a.go" {
		t.Errorf("history %+v", got)
	}
	if n := len(m.req.Messages); n != 3 || len(m.req.Tools) == 0 {
		t.Errorf("the request had %d messages and %d tools", n, len(m.req.Tools))
	}
}
