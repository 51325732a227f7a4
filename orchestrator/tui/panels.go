package tui

import (
	"fmt"
	"strings"

	"github.com/shiroagent/shiro/orchestrator/sessiontools"
)

// Sizes of the task and subagent panels.
const (
	progressWidth = 40 // the task bar's cells (fewer on a narrow terminal)
	subagentSteps = 3  // steps shown per subagent
	subStepCut    = 60 // a step's summary is cut here
)

// subagent is one task subagent of the running turn, as its panel shows
// it.
type subagent struct {
	id, kind, description string
	steps                 int
	last                  []string // the last subagentSteps steps, oldest first
	finished, failed      bool
	err                   string
}

// subagentEvent applies a subagent's progress. Subagents belong to the
// turn: the panel clears when it ends.
func (m *Model) subagentEvent(ev sessiontools.SubagentEvent) {
	if !m.busy {
		return
	}
	var s *subagent
	for i := range m.subagents {
		if m.subagents[i].id == ev.ID {
			s = &m.subagents[i]
		}
	}
	if s == nil {
		m.subagents = append(m.subagents, subagent{id: ev.ID})
		s = &m.subagents[len(m.subagents)-1]
	}
	switch ev.Type {
	case sessiontools.SubagentStart:
		s.kind, s.description = ev.Kind, ev.Description
	case sessiontools.SubagentStep:
		s.steps++
		step := ev.Tool
		if ev.Summary != "" {
			step += "(" + clip(strings.Join(strings.Fields(ev.Summary), " "), subStepCut) + ")"
		}
		s.last = append(s.last, step)
		if len(s.last) > subagentSteps {
			s.last = s.last[len(s.last)-subagentSteps:]
		}
	case sessiontools.SubagentEnd:
		s.finished, s.steps = true, max(s.steps, ev.Steps)
	case sessiontools.SubagentError:
		s.finished, s.failed, s.err = true, true, ev.Error
	}
}

// subagentView is the panel of the turn's subagents ("" when none).
func (m *Model) subagentView() string {
	if len(m.subagents) == 0 {
		return ""
	}
	w := m.contentWidth()
	inner := max(w-4, 16)
	frame := spinnerFrames[m.turn.frame%len(spinnerFrames)]
	var lines []string
	for _, s := range m.subagents {
		mark := frame
		switch {
		case s.failed:
			mark = "x"
		case s.finished:
			mark = "*"
		}
		unit := "steps"
		if s.steps == 1 {
			unit = "step"
		}
		head := clean(fmt.Sprintf("%s %s %s  %d %s", mark, s.kind, s.description, s.steps, unit))
		lines = append(lines, m.st.tool.Render(cut(head, inner)))
		for _, step := range s.last {
			lines = append(lines, m.st.dim.Render(cut("    "+clean(step), inner)))
		}
		if s.err != "" {
			lines = append(lines, m.st.errText.Render(cut("    "+firstLine(clean(s.err)), inner)))
		}
	}
	return m.st.subBox.Width(max(w-2, 10)).Render(strings.Join(lines, "\n"))
}

// todoView is the task panel ("" without a list): a progress bar, then
// each task coloured by its status.
func (m *Model) todoView() string {
	if len(m.todos) == 0 {
		return ""
	}
	w := m.contentWidth()
	lines := []string{cut(m.st.accent.Render("tasks ")+m.todoBar(min(progressWidth, w-26)), w)}
	for _, t := range m.todos {
		line := cut("  "+clean(t.Line()), w)
		switch t.Status {
		case sessiontools.StatusDone:
			line = m.st.taskDone.Render(line)
		case sessiontools.StatusInProgress:
			line = m.st.taskActive.Render(line)
		case sessiontools.StatusBlocked:
			line = m.st.taskBlock.Render(line)
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// todoBar is "####....  d/t[  n blocked]", the bar width cells wide.
func (m *Model) todoBar(width int) string {
	width = max(width, 10)
	done, blocked, _, _ := sessiontools.Counts(m.todos)
	filled := done * width / len(m.todos)
	bar := strings.Repeat("#", filled) + strings.Repeat(".", width-filled)
	s := fmt.Sprintf("%s  %d/%d", bar, done, len(m.todos))
	if blocked > 0 {
		s += m.st.taskBlock.Render(fmt.Sprintf("  %d blocked", blocked))
	}
	return s
}

// todosText is the task list for /todos.
func todosText(todos []sessiontools.Todo) string {
	if len(todos) == 0 {
		return "no task list yet - the model keeps one with todo_write for multi-step work"
	}
	done, _, _, _ := sessiontools.Counts(todos)
	lines := []string{fmt.Sprintf("%d/%d done", done, len(todos)), ""}
	for _, t := range todos {
		lines = append(lines, t.Line())
	}
	return strings.Join(lines, "\n")
}
