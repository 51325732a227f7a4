package agent

import "github.com/shiroagent/shiro/agent/llm"

// keepLadder is how many recent messages keep their tool calls and results
// while pruning, widest first.
var keepLadder = []int{64, 32, 16, 8, 4}

// Prune returns a smaller copy of history to send when it is over the
// threshold; the history itself is never changed. First every reasoning part
// goes (and the provider item ids of the messages that lost one, so their
// other items are sent inline instead of referring to reasoning that is no
// longer there); if that is not enough, tool calls and results are dropped
// from all but the last 64, 32, 16, 8 or 4 messages, the widest window that
// fits winning. After each cut, tool results whose call is gone are dropped
// (providers reject them), while a call still waiting for its result is kept.
func Prune(history []llm.Message, threshold int) []llm.Message {
	out := repair(stripReasoning(history))
	if EstimateTokens(out) <= threshold {
		return out
	}
	var last []llm.Message
	for _, keep := range keepLadder {
		last = repair(dropToolContent(out, len(out)-keep))
		if EstimateTokens(last) <= threshold {
			break
		}
	}
	return last
}

// stripReasoning copies history without reasoning parts.
func stripReasoning(history []llm.Message) []llm.Message {
	out := make([]llm.Message, 0, len(history))
	for _, m := range history {
		lost := false
		parts := make([]llm.Part, 0, len(m.Parts))
		for _, p := range m.Parts {
			if p.Type == llm.PartReasoning {
				lost = true
				continue
			}
			parts = append(parts, p)
		}
		if lost {
			for i := range parts {
				parts[i].ItemID = ""
			}
		}
		out = append(out, llm.Message{Role: m.Role, Parts: parts})
	}
	return out
}

// dropToolContent removes tool calls and results from the messages before
// index end.
func dropToolContent(history []llm.Message, end int) []llm.Message {
	out := make([]llm.Message, 0, len(history))
	for i, m := range history {
		if i >= end {
			out = append(out, m)
			continue
		}
		parts := make([]llm.Part, 0, len(m.Parts))
		for _, p := range m.Parts {
			if p.Type != llm.PartToolCall && p.Type != llm.PartToolResult {
				parts = append(parts, p)
			}
		}
		out = append(out, llm.Message{Role: m.Role, Parts: parts})
	}
	return out
}

// repair drops tool results whose call is not in an earlier message and
// removes messages left empty.
func repair(history []llm.Message) []llm.Message {
	calls := map[string]bool{}
	out := make([]llm.Message, 0, len(history))
	for _, m := range history {
		parts := make([]llm.Part, 0, len(m.Parts))
		for _, p := range m.Parts {
			switch p.Type {
			case llm.PartToolCall:
				calls[p.CallID] = true
			case llm.PartToolResult:
				if !calls[p.CallID] {
					continue
				}
			}
			parts = append(parts, p)
		}
		if len(parts) > 0 {
			out = append(out, llm.Message{Role: m.Role, Parts: parts})
		}
	}
	return out
}
