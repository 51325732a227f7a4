package orchestrator

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
)

func TestVariantThinkingReachesTheModel(t *testing.T) {
	cases := []struct {
		variant, thinking string
		want              llm.Reasoning
	}{
		{"", "", llm.ReasoningMedium},
		{"deep", "", llm.ReasoningMax},
		{"quick", "", llm.ReasoningOff},
		{"plan", "", llm.ReasoningHigh},
		{"deep", "low", llm.ReasoningLow}, // flags/config beat the variant
	}
	for _, c := range cases {
		m := &mcpModel{}
		s := mcpSession(t, m, SessionOptions{Variant: c.variant, Reasoning: llm.Reasoning(c.thinking), MCPServers: map[string]json.RawMessage{}})
		send(t, s, "hi")
		if got := m.requests()[0].Reasoning; got != c.want {
			t.Errorf("%s/%s: reasoning %q, want %q", c.variant, c.thinking, got, c.want)
		}
	}
}

func TestSwitchVariantAndThinkingMidSession(t *testing.T) {
	m := &mcpModel{}
	s := mcpSession(t, m, SessionOptions{MCPServers: map[string]json.RawMessage{}})
	send(t, s, "one")
	if err := s.SetVariant("deep"); err != nil {
		t.Fatal(err)
	}
	send(t, s, "two")
	if err := s.SetThinking("low"); err != nil {
		t.Fatal(err)
	}
	send(t, s, "three")
	if err := s.SetVariant("review"); err != nil {
		t.Fatal(err)
	}
	send(t, s, "four")
	reqs := m.requests()
	got := []llm.Reasoning{reqs[0].Reasoning, reqs[1].Reasoning, reqs[2].Reasoning, reqs[3].Reasoning}
	if want := []llm.Reasoning{"medium", "max", "low", "high"}; !slices.Equal(got, want) {
		t.Errorf("levels = %v, want %v", got, want)
	}
	if slices.Contains(specNames(reqs[3]), "bash") || !slices.Contains(specNames(reqs[2]), "bash") {
		t.Errorf("review must withhold bash from the next call only: %v / %v", specNames(reqs[2]), specNames(reqs[3]))
	}
	if err := s.SetVariant("fast"); err == nil || !strings.HasPrefix(err.Error(), `Unknown agent "fast". Available: default,`) {
		t.Errorf("err = %v", err)
	}
	if err := s.SetThinking("huge"); err == nil || !strings.HasPrefix(err.Error(), `Unknown thinking level "huge"`) {
		t.Errorf("err = %v", err)
	}
	if v := s.Variant(); v.Name != "review" || v.Thinking != llm.ReasoningHigh {
		t.Errorf("a refused switch changed the state: %+v", v)
	}
}

func TestReadOnlyVariantsWithholdMutatingTools(t *testing.T) {
	for _, name := range []string{"plan", "review"} {
		m := &mcpModel{}
		s := mcpSession(t, m, SessionOptions{Variant: name, Plugins: []string{"guard", "time"}})
		send(t, s, "hi")
		req := m.requests()[0]
		names := specNames(req)
		for _, w := range []string{"write_file", "edit_file", "multi_edit", "bash", "forget", "current_time", "mcp__srv__echo"} {
			if slices.Contains(names, w) {
				t.Errorf("%s offers %s on the wire: %v", name, w, names)
			}
		}
		for _, r := range []string{"read_file", "grep", "glob", "git_status", "todo_write", "task"} {
			if !slices.Contains(names, r) {
				t.Errorf("%s withholds %s: %v", name, r, names)
			}
		}
		var listed []string
		for _, o := range s.Offered() {
			listed = append(listed, o.Name)
		}
		if !slices.Equal(listed, names) {
			t.Errorf("%s: /tools lists %v, the wire has %v", name, listed, names)
		}
		if !strings.Contains(req.System, "Agent mode: "+name) {
			t.Errorf("%s: appendix missing from the prompt", name)
		}
		if strings.Contains(req.System, "bash:") {
			t.Errorf("%s: the prompt teaches bash", name)
		}
	}
}

func TestDefaultVariantOffersEverything(t *testing.T) {
	m := &mcpModel{}
	s := mcpSession(t, m, SessionOptions{Plugins: []string{"guard", "time"}})
	send(t, s, "hi")
	req := m.requests()[0]
	names := specNames(req)
	for _, w := range []string{"write_file", "edit_file", "multi_edit", "bash", "read_file", "current_time", "mcp__srv__echo", "todo_write"} {
		if !slices.Contains(names, w) {
			t.Errorf("default withholds %s: %v", w, names)
		}
	}
	if strings.Contains(req.System, "Agent mode:") {
		t.Error("default renders an appendix")
	}
}

func TestVariantStepCapOverridesTheSessions(t *testing.T) {
	loop := func(n int) []llm.Message {
		var out []llm.Message
		for range n {
			out = append(out, mcpCalls([2]string{"glob", `{"pattern":"*"}`}))
		}
		return out
	}
	for _, c := range []struct {
		variant  string
		session  int
		wantReqs int
	}{{"quick", 30, 12}, {"deep", 30, 80}, {"default", 30, 30}, {"plan", 0, agent.DefaultMaxSteps}} {
		m := &mcpModel{replies: loop(100)}
		s := mcpSession(t, m, SessionOptions{Variant: c.variant, MaxSteps: c.session, MCPServers: map[string]json.RawMessage{}})
		evs := send(t, s, "loop")
		if got := len(m.requests()); got != c.wantReqs {
			t.Errorf("%s (session cap %d): %d requests, want %d", c.variant, c.session, got, c.wantReqs)
		}
		if !slices.ContainsFunc(evs, func(e agent.Event) bool { return e.Type == agent.EventNotice && strings.Contains(e.Text, "step limit") }) {
			t.Errorf("%s: no step-limit notice", c.variant)
		}
	}
	// A switch changes the cap of the next turn.
	m := &mcpModel{replies: loop(100)}
	s := mcpSession(t, m, SessionOptions{MCPServers: map[string]json.RawMessage{}})
	if err := s.SetVariant("quick"); err != nil {
		t.Fatal(err)
	}
	send(t, s, "loop")
	if got := len(m.requests()); got != 12 {
		t.Errorf("after /agent quick: %d requests, want 12", got)
	}
}
