package tui

import (
	"fmt"
	"strings"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator"
)

// replayLimit is how many messages of a resumed conversation are shown.
const replayLimit = 40

// replay prints a resumed conversation into the transcript as it looked:
// prompts, replies, tool lines (the newest replayLimit messages).
func (m *Model) replay(msgs []llm.Message) {
	if len(msgs) == 0 {
		return
	}
	var lines []string
	if skipped := len(msgs) - replayLimit; skipped > 0 {
		lines = append(lines, m.st.info.Render(fmt.Sprintf("... %d earlier messages", skipped)))
		msgs = msgs[skipped:]
	}
	w := m.contentWidth()
	failed := map[string]bool{}
	for _, msg := range msgs {
		for _, p := range msg.Parts {
			if p.Type == llm.PartToolResult && p.IsError {
				failed[p.CallID] = true
			}
		}
	}
	for _, msg := range msgs {
		for _, p := range msg.Parts {
			switch {
			case msg.Role == llm.RoleUser && p.Type == llm.PartText:
				text := strings.TrimSpace(p.Text)
				if strings.HasPrefix(text, orchestrator.CompactPrefix) {
					lines = append(lines, m.st.info.Render("(a summary of the work before /compact)"))
					continue
				}
				lines = append(lines, "", m.st.user.Render("> "+clean(text)))
			case msg.Role == llm.RoleAssistant && p.Type == llm.PartReasoning && strings.TrimSpace(p.Text) != "":
				r := strings.TrimSpace(p.Text)
				n := (len(r) + 3) / 4
				m.addExpandable(fmt.Sprintf("thinking · %d tokens", n), r)
				lines = append(lines, m.st.reasoning.Render(cut(fmt.Sprintf("thinking · %d tokens · ctrl-o to expand", n), w)))
			case msg.Role == llm.RoleAssistant && p.Type == llm.PartText && strings.TrimSpace(p.Text) != "":
				if r := m.md.render(clean(p.Text), w); r != "" {
					lines = append(lines, r)
				}
			case p.Type == llm.PartToolCall && failed[p.CallID]:
				lines = append(lines, m.st.toolErr.Render(cut(clean(fmt.Sprintf("x %s(%s)", p.Name, toolSummary(p.Input))), w)))
			case p.Type == llm.PartToolCall:
				lines = append(lines, m.st.tool.Render(cut(clean(fmt.Sprintf("* %s(%s)", p.Name, toolSummary(p.Input))), w)))
			}
		}
	}
	m.printLine(lines...)
}
