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
				lines = append(lines, "", m.st.user.Render("> "+text))
			case msg.Role == llm.RoleAssistant && p.Type == llm.PartText && strings.TrimSpace(p.Text) != "":
				if r := m.md.render(p.Text, m.contentWidth()); r != "" {
					lines = append(lines, r)
				}
			case p.Type == llm.PartToolCall && failed[p.CallID]:
				lines = append(lines, m.st.toolErr.Render(fmt.Sprintf("x %s(%s)", p.Name, toolSummary(p.Input))))
			case p.Type == llm.PartToolCall:
				lines = append(lines, m.st.tool.Render(fmt.Sprintf("* %s(%s)", p.Name, toolSummary(p.Input))))
			}
		}
	}
	m.printLine(lines...)
}
