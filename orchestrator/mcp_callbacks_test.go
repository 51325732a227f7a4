package orchestrator

import (
	"context"
	"encoding/json"
	"iter"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/tools/mcp"
	"github.com/shiroagent/shiro/tools/mcp/mcptest"
)

// usageModel answers with scripted messages, each billed 10 in and 5 out,
// and records the requests with the time they came.
type usageModel struct {
	mu      sync.Mutex
	replies []llm.Message
	reqs    []llm.Request
	times   []time.Time
}

func (m *usageModel) Info() llm.ModelInfo {
	return llm.ModelInfo{Provider: "test", Model: "test-model"}
}

func (m *usageModel) Stream(_ context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.times = append(m.times, time.Now())
	msg := llm.Text(llm.RoleAssistant, "done")
	if len(m.replies) > 0 {
		msg, m.replies = m.replies[0], m.replies[1:]
	}
	m.mu.Unlock()
	return func(yield func(llm.Event, error) bool) {
		for _, p := range msg.Parts {
			if p.Type == llm.PartText && !yield(llm.Event{Type: llm.EventText, Text: p.Text}, nil) {
				return
			}
		}
		yield(llm.Event{Type: llm.EventFinish, Message: msg, Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}, nil)
	}
}

func (m *usageModel) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// mcpTestAsker approves every tool call and answers the servers' questions
// with its func fields.
type mcpTestAsker struct {
	testAsker
	sampling func(mcp.SampleRequest, string) bool
	form     func(mcp.ElicitRequest) mcp.ElicitResult
}

func (a mcpTestAsker) ApproveSampling(_ context.Context, req mcp.SampleRequest, model string) (bool, error) {
	return a.sampling(req, model), nil
}

func (a mcpTestAsker) Elicit(_ context.Context, req mcp.ElicitRequest) (mcp.ElicitResult, error) {
	return a.form(req), nil
}

func allowAll(context.Context, agent.ApprovalRequest) (agent.Decision, error) {
	return agent.Once, nil
}

// outputs are the tool results of the last request, by tool name.
func outputs(reqs []llm.Request) map[string]string {
	out := map[string]string{}
	for name, parts := range results(reqs) {
		out[name] = parts[0].Output
	}
	return out
}

func callbackCalls() llm.Message {
	return mcpCalls(
		[2]string{"mcp__srv__roots", `{}`},
		[2]string{"mcp__srv__sample", `{"prompt":"what is 2+2?","system":"be brief"}`},
		[2]string{"mcp__srv__elicit", `{}`},
	)
}

func TestSessionMCPCallbacksInTheChatUI(t *testing.T) {
	t.Parallel()
	model := &usageModel{replies: []llm.Message{callbackCalls(), llm.Text(llm.RoleAssistant, "four")}}
	var mu sync.Mutex
	var asked []string
	asker := mcpTestAsker{
		testAsker: testAsker{approve: allowAll},
		sampling: func(req mcp.SampleRequest, model string) bool {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Server+" "+model+" "+req.Messages[0].Text)
			return true
		},
		form: func(req mcp.ElicitRequest) mcp.ElicitResult {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, req.Server+" form "+req.Message)
			return mcp.ElicitResult{Action: mcp.ElicitAccept, Content: map[string]any{"name": "Ada"}}
		},
	}
	rec := &recorder{}
	s := mcpSession(t, model, SessionOptions{Asker: asker, Events: rec.add})
	if err := s.WaitMCP(t.Context()); err != nil {
		t.Fatal(err)
	}
	send(t, s, "use the server's tools")

	reqs := model.requests()
	if len(reqs) != 3 { // the step, the sampling request, the step after
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	sampling := reqs[1]
	if sampling.System != "be brief" || len(sampling.Messages) != 1 || sampling.Messages[0].Parts[0].Text != "what is 2+2?" || len(sampling.Tools) != 0 || sampling.MaxTokens != 200 {
		t.Errorf("the sampling request: %+v", sampling)
	}
	got := outputs(reqs)
	if want := "roots: " + filepath.Base(s.Workspace()) + " file://" + filepath.ToSlash(s.Workspace()); got["mcp__srv__roots"] != want {
		t.Errorf("roots: %q, want %q", got["mcp__srv__roots"], want)
	}
	if got["mcp__srv__sample"] != "model test-model said: four" {
		t.Errorf("sample: %q", got["mcp__srv__sample"])
	}
	if got["mcp__srv__elicit"] != `accept {"name":"Ada"}` {
		t.Errorf("elicit: %q", got["mcp__srv__elicit"])
	}
	mu.Lock()
	slices.Sort(asked)
	if want := []string{"srv form tell me about you", "srv test-model what is 2+2?"}; !slices.Equal(asked, want) {
		t.Errorf("the user was asked %q, want %q", asked, want)
	}
	mu.Unlock()
	// The sampling request is billed with the turn's steps: 3 requests.
	var last Usage
	n := 0
	for _, e := range rec.all() {
		if u, ok := e.(UsageEvent); ok {
			last, n = u.Total, n+1
		}
	}
	if n != 3 || last.InputTokens != 30 || last.OutputTokens != 15 {
		t.Errorf("%d usage events, total %+v: want 3 and 30/15 tokens", n, last)
	}
}

func TestSessionMCPCallbacksWithNoOneToAsk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		yolo        bool
		sample      string
		wantSampled bool
	}{
		{name: "denied and declined", sample: mcp.ErrSamplingHeadless.Error()},
		{name: "yolo samples, the form is still declined", yolo: true, sample: "model test-model said: four", wantSampled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			model := &usageModel{replies: []llm.Message{callbackCalls(), llm.Text(llm.RoleAssistant, "four")}}
			rec := &recorder{}
			// An Asker without MCPAsker: tool calls are approved, the
			// servers' questions have no one to answer them.
			s := mcpSession(t, model, SessionOptions{Asker: testAsker{approve: allowAll}, Yolo: tc.yolo, Events: rec.add})
			if err := s.WaitMCP(t.Context()); err != nil {
				t.Fatal(err)
			}
			send(t, s, "use the server's tools")
			reqs := model.requests()
			if sampled := len(reqs) == 3; sampled != tc.wantSampled {
				t.Fatalf("%d model requests: sampled %v, want %v", len(reqs), sampled, tc.wantSampled)
			}
			got := outputs(reqs)
			if !strings.Contains(got["mcp__srv__sample"], tc.sample) {
				t.Errorf("sample: %q, want %q", got["mcp__srv__sample"], tc.sample)
			}
			if got["mcp__srv__elicit"] != "decline null" {
				t.Errorf("elicit: %q", got["mcp__srv__elicit"])
			}
			var notices []string
			for _, e := range rec.all() {
				if n, ok := e.(NoticeEvent); ok {
					notices = append(notices, n.Text)
				}
			}
			joined := strings.Join(notices, "\n")
			if !strings.Contains(joined, "mcp srv asked you to fill in a form (elicitation); declined") {
				t.Errorf("notices %q lack the declined form", notices)
			}
			if !tc.yolo && !strings.Contains(joined, "mcp srv asked the model (sampling); denied") {
				t.Errorf("notices %q lack the denied sampling", notices)
			}
		})
	}
}

func TestSessionFirstPromptDoesNotWaitForAHangingServer(t *testing.T) {
	t.Parallel()
	command, env := mcptest.Command()
	hang := maps.Clone(env)
	hang[mcptest.ModeEnv] = "hang"
	cfg := func(env map[string]string) json.RawMessage {
		b, err := json.Marshal(map[string]any{"command": command, "env": env})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	model := &usageModel{}
	rec := &recorder{}
	start := time.Now()
	s := mcpSession(t, model, SessionOptions{Yolo: true, Events: rec.add, MCPServers: map[string]json.RawMessage{"srv": cfg(env), "hang": cfg(hang)}})
	send(t, s, "hi")
	model.mu.Lock()
	took := model.times[0].Sub(start)
	model.mu.Unlock()
	if took > 10*time.Second { // mcpFirstWait, and room for a loaded machine
		t.Errorf("the first request went %s after the start: it waited for the hanging server", took)
	}
	offered := specNames(model.requests()[0])
	if !slices.Contains(offered, "mcp__srv__echo") {
		t.Errorf("the first request offers %v: want the fast server's tools", offered)
	}
	var connecting []string
	for _, st := range s.MCPStatus() {
		if st.Connecting {
			connecting = append(connecting, st.Name)
		}
	}
	if !slices.Equal(connecting, []string{"hang"}) {
		t.Errorf("still connecting: %v, want hang", connecting)
	}
	rec.waitFor(t, func(e Event) bool {
		n, ok := e.(NoticeEvent)
		return ok && strings.HasPrefix(n.Text, "mcp hang: still connecting after") && strings.Contains(n.Text, "going on without it")
	})
}
