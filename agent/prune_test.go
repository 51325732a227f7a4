package agent_test

import (
	"strings"
	"testing"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
)

func text(role llm.Role, s string) llm.Message { return llm.Text(role, s) }

func toolTurn(id, payload string) []llm.Message {
	return []llm.Message{
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Type: llm.PartReasoning, Text: "thinking", ItemID: "rs_" + id, Provider: "openai"},
			{Type: llm.PartToolCall, CallID: id, Name: "read_file", Input: []byte(`{}`), ItemID: "fc_" + id, Provider: "openai"},
		}},
		{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, CallID: id, Name: "read_file", Output: payload}}},
	}
}

// check asserts the invariants of anything sent.
func check(t *testing.T, msgs []llm.Message) {
	t.Helper()
	calls := map[string]bool{}
	for _, m := range msgs {
		if len(m.Parts) == 0 {
			t.Error("an empty message is sent")
		}
		reasoning := false
		for _, p := range m.Parts {
			if p.Type == llm.PartReasoning {
				reasoning = true
			}
		}
		for _, p := range m.Parts {
			switch p.Type {
			case llm.PartToolCall:
				calls[p.CallID] = true
				if p.ItemID != "" && !reasoning {
					t.Errorf("call %s refers to item %s without its reasoning", p.CallID, p.ItemID)
				}
			case llm.PartToolResult:
				if !calls[p.CallID] {
					t.Errorf("orphaned tool result %s", p.CallID)
				}
			}
		}
	}
}

func TestPruneNeverSendsAnOrphanedResult(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 4000)
	var history []llm.Message
	history = append(history, text(llm.RoleUser, "start"))
	for i := range 80 {
		history = append(history, toolTurn(string(rune('A'+i%26))+string(rune('a'+i/26)), big)...)
	}
	history = append(history, text(llm.RoleUser, "again"))
	before := agent.EstimateTokens(history)
	for _, threshold := range []int{before / 2, before / 4, before / 16, 500} {
		got := agent.Prune(history, threshold)
		check(t, got)
		if len(got) >= len(history) {
			t.Errorf("threshold %d: nothing pruned", threshold)
		}
		if got[len(got)-1].Parts[0].Text != "again" {
			t.Errorf("threshold %d: the newest message was lost", threshold)
		}
	}
	if len(history) != 162 || history[1].Parts[0].Type != llm.PartReasoning {
		t.Error("Prune changed the history")
	}
}

func TestPruneKeepsAPendingCall(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("y", 8000)
	history := []llm.Message{text(llm.RoleUser, "go")}
	for i := range 10 {
		history = append(history, toolTurn("old"+string(rune('a'+i)), big)...)
	}
	// The last assistant message calls a tool whose result is not there yet
	// (a suspended approval).
	history = append(history, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
		{Type: llm.PartToolCall, CallID: "pending", Name: "write_file", Input: []byte(`{}`)},
	}})
	got := agent.Prune(history, 1000)
	check(t, got)
	last := got[len(got)-1]
	if last.Parts[0].CallID != "pending" {
		t.Errorf("the pending call did not survive: %+v", last)
	}
}

func TestPruneCutAtTheWindowEdgeDropsTheResultWithItsCall(t *testing.T) {
	t.Parallel()
	// Exactly 4 messages are kept whole: the edge falls between a call and
	// its result.
	history := []llm.Message{text(llm.RoleUser, strings.Repeat("z", 40000))}
	history = append(history, toolTurn("edge", strings.Repeat("r", 40000))...)
	history = append(history, text(llm.RoleAssistant, "a"), text(llm.RoleUser, "b"), text(llm.RoleAssistant, "c"))
	got := agent.Prune(history, 100)
	check(t, got)
	for _, m := range got {
		for _, p := range m.Parts {
			if p.CallID == "edge" {
				t.Errorf("part of the cut pair survived: %+v", p)
			}
		}
	}
}

func TestEstimateIsKeptUpToDate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, agent.Config{Tools: tools(&fakeTool{name: "read_file"})},
		step{calls: []llm.Part{call("c1", "read_file", `{"path":"x"}`)}}, step{text: "fine"})
	if err := h.send(t, "hello"); err != nil {
		t.Fatal(err)
	}
	if got, want := h.agent.EstimatedTokens(), agent.EstimateTokens(h.agent.Messages()); got != want {
		t.Errorf("kept estimate %d, recomputed %d", got, want)
	}
	h.agent.Replace(h.agent.Messages()[:1])
	if got, want := h.agent.EstimatedTokens(), agent.EstimateTokens(h.agent.Messages()); got != want {
		t.Errorf("after Replace: kept %d, recomputed %d", got, want)
	}
}
