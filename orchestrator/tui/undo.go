package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
)

// Messages of /undo and /diff.
type (
	undoPlanMsg struct {
		n       int // the turns asked for
		plan    *orchestrator.UndoPlan
		patches []string // the undone turns' diff, per change
		err     error
	}
	undoneMsg struct {
		plan    *orchestrator.UndoPlan
		done    []checkpoint.FileChange
		kept    []string
		rewound bool
		err     error
	}
	diffMsg struct {
		turn  int
		diffs []orchestrator.FileDiff
		err   error
	}
)

// undoHelp is said wherever undo is offered: what it does not restore.
const undoHelp = "undo restores the workspace files only, not packages installed in the container or its HOME"

// undoer is the session when it keeps checkpoints; else the error is
// printed.
func (m *Model) undoer() (Session, bool) {
	u := m.rt.sess
	if u.Checkpoints() == nil {
		m.printError("checkpoints are off in this session: nothing to undo")
		return nil, false
	}
	return u, true
}

// undoerFor is the session's undoer and the number arg gives (def when
// empty); ok is false, with the error printed, when either is missing.
func (m *Model) undoerFor(arg string, def int) (Session, int, bool) {
	n, err := turnCount(arg, def)
	if err != nil {
		m.printError(err.Error())
		return nil, 0, false
	}
	u, ok := m.undoer()
	return u, n, ok
}

// turnCount parses /undo's and /diff's argument: empty is def.
func turnCount(arg string, def int) (int, error) {
	if arg == "" {
		return def, nil
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("want a number of turns, not %q", arg)
	}
	return n, nil
}

// cmdUndo is /undo [N]: show what the last N turns changed, then ask.
func (m *Model) cmdUndo(arg string) tea.Cmd {
	u, n, ok := m.undoerFor(arg, 1)
	if !ok {
		return nil
	}
	return m.busyJob(func(ctx context.Context) tea.Msg {
		p, err := u.PlanUndo(ctx, n)
		msg := undoPlanMsg{n: n, plan: p, err: err}
		if err == nil {
			for _, c := range p.Changes {
				patch, _ := u.Checkpoints().Patch(ctx, c.Reverse())
				msg.patches = append(msg.patches, patch)
			}
		}
		return msg
	})
}

// undoPlanned shows the plan and asks.
func (m *Model) undoPlanned(msg undoPlanMsg) tea.Cmd {
	if msg.err != nil {
		if errors.Is(msg.err, orchestrator.ErrNothingToUndo) {
			m.printInfo("nothing to undo: no turn of this session was recorded")
			return nil
		}
		if ask := m.undoBlockedByJobs(msg); ask != nil {
			return ask
		}
		m.printError(msg.err.Error())
		return nil
	}
	p := msg.plan
	what := fmt.Sprintf("turn %d", p.Turn)
	if p.Turns > 1 {
		what = fmt.Sprintf("the last %d turns (from turn %d)", p.Turns, p.Turn)
	}
	m.printInfo(fmt.Sprintf("/undo: %s - %q changed %d file(s):", what, p.Prompt, len(p.Changes)))
	for i, c := range p.Changes {
		r := c.Reverse()
		by := "outside the turn's calls"
		if len(c.Tools) > 0 {
			by = "by " + strings.Join(c.Tools, ", ")
		}
		if slices.Contains(p.UserChanged, c.Path) {
			by += "; changed since the turn"
		}
		m.printLine(m.st.accent.Render(fmt.Sprintf("  %s %s", r.Action, clean(c.Path))) + m.st.dim.Render(" ("+by+")"))
		for _, line := range previewLines(msg.patches[i], 12) {
			m.printLine(m.st.dim.Render("    " + clean(line)))
		}
	}
	for _, f := range p.Unrestorable {
		m.printLine(m.st.warn.Render("  cannot restore " + clean(f) + ": over 10 MiB, not recorded"))
	}
	note := undoHelp
	if len(p.Changes) == 0 {
		note = "no file changed; the conversation is rewound. " + note
	}
	pick := newPicker("Undo", "Cancel")
	return m.openForm(&formModal{
		title: fmt.Sprintf("Undo %s (%d file(s)) and rewind the conversation?", what, len(p.Changes)),
		note:  note,
		pick:  pick,
		done: func(m *Model) tea.Cmd {
			if pick.sel != 0 {
				m.printInfo("undo cancelled")
				return nil
			}
			if len(p.UserChanged) > 0 {
				return m.askOverwrite(p)
			}
			return m.applyUndo(p, false)
		},
		cancel: func(m *Model) tea.Cmd { m.printInfo("undo cancelled"); return nil },
	})
}

// askOverwrite is the separate question for files changed after the turn.
func (m *Model) askOverwrite(p *orchestrator.UndoPlan) tea.Cmd {
	pick := newPicker("Keep my changes (undo the rest)", "Overwrite them too", "Cancel")
	return m.openForm(&formModal{
		title: "These files changed after the turn ended: " + strings.Join(p.UserChanged, ", "),
		note:  "they were changed outside the turn (by you?)",
		pick:  pick,
		done: func(m *Model) tea.Cmd {
			switch pick.sel {
			case 0:
				return m.applyUndo(p, false)
			case 1:
				return m.applyUndo(p, true)
			}
			m.printInfo("undo cancelled")
			return nil
		},
		cancel: func(m *Model) tea.Cmd { m.printInfo("undo cancelled"); return nil },
	})
}

func (m *Model) applyUndo(p *orchestrator.UndoPlan, overwrite bool) tea.Cmd {
	u, ok := m.undoer()
	if !ok {
		return nil
	}
	return m.busyJob(func(ctx context.Context) tea.Msg {
		done, kept, rewound, err := u.Undo(ctx, p, overwrite)
		return undoneMsg{plan: p, done: done, kept: kept, rewound: rewound, err: err}
	})
}

// undone reports the undo.
func (m *Model) undone(msg undoneMsg) {
	if msg.err != nil {
		m.printError("undo failed: " + msg.err.Error())
		return
	}
	m.printInfo(fmt.Sprintf("undone: %d file(s) put back to before turn %d", len(msg.done), msg.plan.Turn))
	if len(msg.kept) > 0 {
		m.printInfo("left as you changed them: " + clean(strings.Join(msg.kept, ", ")))
	}
	if msg.rewound {
		m.printInfo(fmt.Sprintf("the conversation is back to before %q", msg.plan.Prompt))
	} else {
		m.printInfo("the conversation was compacted or cleared since: it is left as it is")
	}
	m.stats = m.rt.stats()
}

// cmdDiff is /diff [N]: the session's changes, or turn N's.
func (m *Model) cmdDiff(arg string) tea.Cmd {
	u, turn, ok := m.undoerFor(arg, 0)
	if !ok {
		return nil
	}
	rt := m.rt
	return func() tea.Msg {
		diffs, err := u.Diff(rt.ctx, turn)
		return diffMsg{turn: turn, diffs: diffs, err: err}
	}
}

func (m *Model) showDiff(msg diffMsg) {
	title := "changes of this session"
	if msg.turn > 0 {
		title = fmt.Sprintf("changes of turn %d", msg.turn)
	}
	if msg.err != nil {
		if errors.Is(msg.err, orchestrator.ErrNothingToUndo) {
			m.info = &infoPanel{title: title, body: "no turn of this session was recorded"}
			return
		}
		m.printError(msg.err.Error())
		return
	}
	if len(msg.diffs) == 0 {
		m.info = &infoPanel{title: title, body: "no file changed"}
		return
	}
	var b strings.Builder
	for _, d := range msg.diffs {
		by := ""
		if len(d.Tools) > 0 {
			by = " (" + strings.Join(d.Tools, ", ") + ")"
		}
		fmt.Fprintf(&b, "%s %s%s\n%s\n", d.Action, d.Path, by, strings.TrimRight(d.Patch, "\n"))
	}
	m.info = &infoPanel{title: fmt.Sprintf("%s: %d file(s) - /undo takes them back", title, len(msg.diffs)), body: clean(strings.TrimRight(b.String(), "\n"))}
}

// previewLines keeps the first n lines of a patch, saying how many more.
func previewLines(patch string, n int) []string {
	lines := strings.Split(strings.TrimRight(patch, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	if len(lines) > n {
		more := len(lines) - n
		lines = append(lines[:n], fmt.Sprintf("... %d more line(s) - /diff shows them all", more))
	}
	return lines
}
