package tui

import (
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/tools"
)

// Limits of the live panels and the transcript's tool lines.
const (
	outputLines  = 8
	outputKeep   = 2000
	reasonLines  = 8
	queueCut     = 70
	activeCutLen = 90
	tailLines    = 3  // output lines printed under a finished command
	expandKeep   = 50 // the outputs and reasonings ctrl-o can show
)

// turnState is what a running turn shows; it is dropped when the turn
// ends.
type turnState struct {
	prompt         string
	raw            string // assistant text not yet printed
	rendered       string // its rendering at the last flush
	dirty          bool
	flushScheduled bool

	reasoning string // this step's reasoning so far
	expanded  bool

	tools  []activeTool
	output string // the running command's live output, the last outputKeep bytes

	cancelledBy string // "esc" or "ctrl-c" when the user cancelled the turn
	errText     string // the error event's text

	frame int
}

// activeTool is a call from tool-start until its result.
type activeTool struct {
	id, name, summary string
	running           bool   // approved and running (after tool-call)
	output            string // its live output, the last outputKeep bytes
}

// expandable is something the transcript shows collapsed that ctrl-o
// opens: a command's whole output, a step's reasoning.
type expandable struct {
	title, body string
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

func (t *turnState) dropTool(id string) activeTool {
	for i := range t.tools {
		if t.tools[i].id == id {
			a := t.tools[i]
			t.tools = append(t.tools[:i], t.tools[i+1:]...)
			return a
		}
	}
	return activeTool{}
}

// event applies one agent event.
func (m *Model) event(msg eventMsg) tea.Cmd {
	if msg.turn != m.turnID {
		return nil
	}
	e := msg.ev
	t := &m.turn
	switch e.Type {
	case agent.EventReasoning, agent.EventToolOutput, agent.EventRetry:
	default:
		m.endReasoning() // the step's reasoning is over
	}
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
		t.output = keepTail(t.output + e.Chunk)
		if a := t.tool(e.ID); a != nil {
			a.output = keepTail(a.output + e.Chunk)
		}
	case agent.EventToolResult, agent.EventToolError:
		a := t.dropTool(e.ID)
		a.name = e.Name
		if a.summary == "" {
			a.summary = toolSummary(e.Input) // a call that failed its check never ran
		}
		m.toolDone(a, e)
		t.output = ""
		m.stats = m.rt.stats()
	case agent.EventToolDenied:
		a := t.dropTool(e.ID)
		summary := a.summary
		if summary == "" {
			summary = toolSummary(e.Input)
		}
		why := "denied"
		if e.Reason != agent.DeniedByUser && e.Reason != agent.NoApprover && !strings.HasPrefix(e.Reason, agent.DeniedByUser) {
			why = "blocked"
		}
		m.printLine(m.st.toolErr.Render(cut(clean(fmt.Sprintf("x %s %s: %s", e.Name, why, summary)), m.contentWidth())))
	case agent.EventCompacted:
		m.printInfo(fmt.Sprintf("context compacted: %d messages pruned to %d on the wire", e.Before, e.After))
	case agent.EventRetry:
		m.flushLive(true)
		m.printLine(m.st.warn.Render(cut(fmt.Sprintf("retrying in %s (attempt %d of %d): %s", seconds(e.DelayMs), e.Attempt, e.Attempts, clean(e.Text)), m.contentWidth())))
	case agent.EventNotice:
		m.flushLive(true)
		m.printLine(m.st.notice.Render(clean(e.Text)))
	case agent.EventError:
		m.flushLive(true)
		t.errText = e.Error // printed with the next step when the turn ends
	case agent.EventDone:
		m.flushLive(true)
		m.stats = m.rt.stats()
		if e.InputTokens > 0 || e.OutputTokens > 0 {
			m.printInfo(m.usageLine(e.InputTokens, e.OutputTokens))
		}
	}
	return nil
}

// keepTail keeps the last outputKeep bytes of live output, from a line's
// start when one is near.
func keepTail(s string) string {
	if len(s) <= outputKeep {
		return s
	}
	s = s[len(s)-outputKeep:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < 200 {
		s = s[i+1:]
	}
	return s
}

// seconds shows a wait: "0.5 s", "2 s".
func seconds(ms int64) string {
	if ms%1000 == 0 {
		return fmt.Sprintf("%d s", ms/1000)
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}

// toolDone prints a finished call's line: "* name(summary)" or, for a
// failure, "x name(summary)" in red; how a command ended (exit code, timed
// out, interrupted, killed) or the error's first line after it; and under
// a command, the last lines of its output, whole behind ctrl-o.
func (m *Model) toolDone(a activeTool, e agent.Event) {
	w := m.contentWidth()
	failed := e.Type == agent.EventToolError
	outcome := ""
	if x := e.Exit; x != nil {
		switch {
		case x.Interrupted:
			outcome = "interrupted"
		case x.TimedOut:
			outcome, failed = "timed out", true
		case x.Killed:
			outcome, failed = strings.TrimSpace("killed "+x.Signal), true
		default:
			outcome = fmt.Sprintf("exit %d", x.Code)
			failed = failed || x.Code != 0
		}
	} else if failed {
		outcome = firstLine(clean(e.Error))
	}
	mark, style := "*", m.st.tool
	if failed {
		mark, style = "x", m.st.toolErr
	}
	head := fmt.Sprintf("%s %s(%s)", mark, e.Name, clean(a.summary))
	if outcome != "" {
		// The outcome must fit: the summary gives way.
		room := w - len([]rune(outcome)) - 3
		if room >= 12 && len([]rune(head)) > room {
			head = cut(head, room-1) + ")"
		}
		head += " · " + outcome
	}
	lines := []string{style.Render(cut(head, w))}

	full := e.Output
	if failed && e.Type == agent.EventToolError {
		full = e.Error
	}
	if e.Exit != nil {
		m.addExpandable(fmt.Sprintf("%s(%s) · %s", e.Name, clip(a.summary, 40), outcome), full)
		out := strings.TrimRight(clean(tools.TextOrBinary([]byte(a.output))), "\n ")
		if out == "" {
			out = strings.TrimRight(clean(commandOutput(full)), "\n ")
		}
		if out != "" {
			all := strings.Split(out, "\n")
			tail := all[max(len(all)-tailLines, 0):]
			for _, l := range tail {
				lines = append(lines, m.st.dim.Render(cut("    "+l, w)))
			}
			if more := len(all) - len(tail); more > 0 {
				lines = append(lines, m.st.dim.Render(cut(fmt.Sprintf("    ... %d more lines · ctrl-o shows the output", more), w)))
			}
		}
	}
	m.printLine(lines...)
}

// commandOutput is the output part of a bash result ("exit: N" and the
// notes before it dropped).
func commandOutput(result string) string {
	if i := strings.Index(result, "stdout:\n"); i >= 0 {
		return result[i:]
	}
	if i := strings.Index(result, "stderr:\n"); i >= 0 {
		return result[i:]
	}
	return ""
}

// endReasoning prints the step's reasoning as one collapsed line, whole
// behind ctrl-o.
func (m *Model) endReasoning() {
	t := &m.turn
	r := strings.TrimSpace(t.reasoning)
	t.reasoning = ""
	if r == "" {
		return
	}
	m.printReasoning(r)
}

// printReasoning prints "thinking · N tokens" for a reasoning text.
func (m *Model) printReasoning(r string) {
	n := (len(r) + 3) / 4
	m.addExpandable(fmt.Sprintf("thinking · %d tokens", n), r)
	m.printLine(m.st.reasoning.Render(cut(fmt.Sprintf("thinking · %d tokens · ctrl-o to expand", n), m.contentWidth())))
}

// addExpandable remembers an item for ctrl-o.
func (m *Model) addExpandable(title, body string) {
	m.expand = append(m.expand, expandable{title: clean(title), body: clean(tools.TextOrBinary([]byte(body)))})
	if len(m.expand) > expandKeep {
		m.expand = m.expand[len(m.expand)-expandKeep:]
	}
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
		if r := m.md.render(clean(done), m.contentWidth()); r != "" {
			m.printLine(r)
		}
	}
	t.raw = rest
	t.rendered = ""
	if strings.TrimSpace(rest) != "" {
		t.rendered = m.md.render(clean(rest), m.contentWidth())
	}
}

func (m *Model) contentWidth() int {
	if m.width <= 0 {
		return 80
	}
	return m.width
}
