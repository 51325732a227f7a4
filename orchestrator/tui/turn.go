package tui

import (
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/orchestrator"
)

// Limits of the live panels.
const (
	outputLines  = 8
	outputKeep   = 2000
	reasonLines  = 8
	queueCut     = 70
	activeCutLen = 90
)

// turnState is what a running turn shows; it is dropped when the turn
// ends.
type turnState struct {
	raw            string // assistant text not yet printed
	rendered       string // its rendering at the last flush
	dirty          bool
	flushScheduled bool

	reasoning string
	expanded  bool

	tools  []activeTool
	output string // live bash output, the last outputKeep characters

	frame int
}

// activeTool is a call from tool-start until its result.
type activeTool struct {
	id, name, summary string
	running           bool // approved and running (after tool-call)
}

// runningSummaries names the commands in flight, for "interrupted: ...".
func (t *turnState) runningSummaries() []string {
	var out []string
	for _, a := range t.tools {
		if a.running {
			if a.summary != "" {
				out = append(out, a.summary)
			} else {
				out = append(out, a.name)
			}
		}
	}
	return out
}

func (t *turnState) running() bool {
	for _, a := range t.tools {
		if a.running {
			return true
		}
	}
	return false
}

func (t *turnState) tool(id string) *activeTool {
	for i := range t.tools {
		if t.tools[i].id == id {
			return &t.tools[i]
		}
	}
	return nil
}

func (t *turnState) dropTool(id string) {
	for i := range t.tools {
		if t.tools[i].id == id {
			t.tools = append(t.tools[:i], t.tools[i+1:]...)
			return
		}
	}
}

// event applies one agent event.
func (m *Model) event(msg eventMsg) tea.Cmd {
	if msg.turn != m.turnID {
		return nil
	}
	e := msg.ev
	t := &m.turn
	switch e.Type {
	case agent.EventText:
		t.raw += e.Text
		t.dirty = true
		if !t.flushScheduled {
			t.flushScheduled = true
			turn := m.turnID
			return tea.Tick(flushEvery, func(time.Time) tea.Msg { return flushMsg{turn: turn} })
		}
	case agent.EventReasoning:
		t.reasoning += e.Text
	case agent.EventToolStart:
		m.flushLive(true)
		if t.tool(e.ID) == nil {
			t.tools = append(t.tools, activeTool{id: e.ID, name: e.Name})
		}
	case agent.EventToolCall:
		m.flushLive(true)
		a := t.tool(e.ID)
		if a == nil {
			t.tools = append(t.tools, activeTool{id: e.ID, name: e.Name})
			a = &t.tools[len(t.tools)-1]
		}
		a.summary, a.running = toolSummary(e.Input), true
		t.output = ""
	case agent.EventToolOutput:
		t.output += e.Chunk
		if len(t.output) > outputKeep {
			t.output = t.output[len(t.output)-outputKeep:]
		}
	case agent.EventToolResult:
		summary := e.Name
		if a := t.tool(e.ID); a != nil {
			summary = a.summary
		}
		m.printLine(m.st.tool.Render(fmt.Sprintf("* %s(%s)", e.Name, summary)))
		t.dropTool(e.ID)
		t.output = ""
		m.stats = m.rt.stats()
	case agent.EventToolError:
		m.printLine(m.st.toolErr.Render(fmt.Sprintf("x %s(%s)", e.Name, clip(firstLine(e.Error), activeCutLen))))
		t.dropTool(e.ID)
		t.output = ""
	case agent.EventToolDenied:
		why := "denied"
		if e.Reason != agent.DeniedByUser && e.Reason != agent.NoApprover && !strings.HasPrefix(e.Reason, agent.DeniedByUser) {
			why = "blocked"
		}
		m.printLine(m.st.toolErr.Render(fmt.Sprintf("x %s(%s)", e.Name, why)))
		t.dropTool(e.ID)
	case agent.EventCompacted:
		m.printInfo(fmt.Sprintf("context compacted: %d messages pruned to %d on the wire", e.Before, e.After))
	case agent.EventNotice:
		m.flushLive(true)
		m.printLine(m.st.notice.Render(e.Text))
	case agent.EventError:
		m.flushLive(true)
		m.printError(e.Error)
	case agent.EventDone:
		m.flushLive(true)
		m.stats = m.rt.stats()
		if e.InputTokens > 0 || e.OutputTokens > 0 {
			m.printInfo(m.usageLine(e.InputTokens, e.OutputTokens))
		}
	}
	return nil
}

// usageLine is the line after a turn: tokens, cost and context.
func (m *Model) usageLine(in, out int) string {
	cost := ""
	if usd, ok := orchestrator.Cost(m.stats.model, usageOf(in, out)); ok {
		cost = " - " + orchestrator.FormatUSD(usd)
	} else {
		cost = fmt.Sprintf(" (%s is unpriced)", m.stats.model)
	}
	return fmt.Sprintf("%d in / %d out tokens%s  (~%s in context)", in, out, cost, humanTokens(m.stats.context))
}

// flushLive renders the live reply. Finished blocks are printed into the
// transcript; with all, everything is (the reply ended or a tool started).
func (m *Model) flushLive(all bool) {
	t := &m.turn
	if !all && !t.dirty {
		return
	}
	t.dirty = false
	done, rest := t.raw, ""
	if !all {
		done, rest = splitFinished(t.raw)
	}
	if strings.TrimSpace(done) != "" {
		if r := m.md.render(done, m.contentWidth()); r != "" {
			m.printLine(r)
		}
	}
	t.raw = rest
	t.rendered = ""
	if strings.TrimSpace(rest) != "" {
		t.rendered = m.md.render(rest, m.contentWidth())
	}
}

func (m *Model) contentWidth() int {
	if m.width <= 0 {
		return 80
	}
	return m.width
}
