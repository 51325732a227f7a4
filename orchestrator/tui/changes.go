package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/workcopy"
)

// Messages of /changes and /apply.
type (
	changesMsg struct {
		ch      workcopy.Changes
		patches []string // per file of ch.Files
		apply   bool     // /apply: ask, then apply
		err     error
	}
	appliedMsg struct {
		res workcopy.Applied
		err error
	}
)

// copyHelp says what copy mode is, wherever its commands are.
const copyHelp = "the sandbox works on its own copy of the workspace: your files change only when you /apply"

// copier is the session when it works on a copy; else the error is
// printed.
func (m *Model) copier() (Session, bool) {
	c := m.rt.sess
	if !c.CopyMode() {
		m.printError("the sandbox works on the workspace itself (not a copy): its changes are made in place, nothing waits to be applied (/diff shows them)")
		return nil, false
	}
	return c, true
}

// cmdChanges is /changes: what the sandbox changed in its copy.
func (m *Model) cmdChanges(string) tea.Cmd { return m.listChanges(false) }

// cmdApply is /apply: the sandbox's changes, then a question, then the
// apply.
func (m *Model) cmdApply(string) tea.Cmd { return m.listChanges(true) }

func (m *Model) listChanges(apply bool) tea.Cmd {
	c, ok := m.copier()
	if !ok {
		return nil
	}
	return m.busyJob(func(ctx context.Context) tea.Msg {
		ch, err := c.Changes(ctx)
		msg := changesMsg{ch: ch, apply: apply, err: err}
		if err == nil {
			for _, f := range ch.Files {
				patch, err := c.ChangePatch(ctx, f)
				if err != nil {
					patch = "(no diff: " + err.Error() + ")"
				}
				msg.patches = append(msg.patches, patch)
			}
		}
		return msg
	})
}

// fileNote says why a change will not be applied, if it will not.
func fileNote(ch workcopy.Changes, path string) string {
	switch {
	case slices.Contains(ch.Conflicts, path):
		return "changed here too: not applied"
	case ch.Refused[path] != "":
		return "never applied: " + ch.Refused[path]
	}
	return ""
}

// changesListed shows the changes (/changes) or asks to apply them.
func (m *Model) changesListed(msg changesMsg) tea.Cmd {
	if msg.err != nil {
		if errors.Is(msg.err, orchestrator.ErrNotCopyMode) {
			m.printInfo(msg.err.Error())
			return nil
		}
		m.printError(msg.err.Error())
		return nil
	}
	ch := msg.ch
	if ch.Empty() {
		m.info = &infoPanel{title: "the sandbox's changes", body: "none: its copy matches the workspace (" + copyHelp + ")"}
		return nil
	}
	if !msg.apply {
		var b strings.Builder
		for i, f := range ch.Files {
			note := fileNote(ch, f.Path)
			if note != "" {
				note = " (" + note + ")"
			}
			fmt.Fprintf(&b, "%s %s%s\n%s\n", f.Action, f.Path, note, strings.TrimRight(msg.patches[i], "\n"))
		}
		for _, p := range ch.TooLarge {
			fmt.Fprintf(&b, "too large to apply: %s\n", p)
		}
		m.info = &infoPanel{title: fmt.Sprintf("the sandbox's changes: %s - /apply brings them here", ch.Stat()), body: clean(strings.TrimRight(b.String(), "\n"))}
		return nil
	}
	m.printInfo(fmt.Sprintf("/apply: the sandbox's copy has %s:", ch.Stat()))
	n := 0
	for i, f := range ch.Files {
		line := m.st.accent.Render(fmt.Sprintf("  %s %s", f.Action, clean(f.Path)))
		if note := fileNote(ch, f.Path); note != "" {
			m.printLine(line + m.st.warn.Render(" ("+note+")"))
			continue
		}
		n++
		m.printLine(line)
		for _, l := range previewLines(msg.patches[i], 12) {
			m.printLine(m.st.dim.Render("    " + clean(l)))
		}
	}
	for _, p := range ch.TooLarge {
		m.printLine(m.st.warn.Render("  too large to apply: " + clean(p)))
	}
	if n == 0 {
		m.printInfo("nothing can be applied")
		return nil
	}
	pick := newPicker("Apply", "Cancel")
	return m.openForm(&formModal{
		title: fmt.Sprintf("Apply %d file(s) to %s?", n, m.opts.Workspace),
		note:  "a checkpoint is taken first: /undo takes the apply back",
		pick:  pick,
		done: func(m *Model) tea.Cmd {
			if pick.sel != 0 {
				m.printInfo("apply cancelled")
				return nil
			}
			return m.applyChanges(ch)
		},
		cancel: func(m *Model) tea.Cmd { m.printInfo("apply cancelled"); return nil },
	})
}

func (m *Model) applyChanges(ch workcopy.Changes) tea.Cmd {
	c, ok := m.copier()
	if !ok {
		return nil
	}
	return m.busyJob(func(ctx context.Context) tea.Msg {
		res, err := c.Apply(ctx, ch, nil)
		return appliedMsg{res: res, err: err}
	})
}

// applied reports the apply.
func (m *Model) applied(msg appliedMsg) {
	if msg.err != nil {
		m.printError("apply failed: " + msg.err.Error())
		return
	}
	m.printInfo(fmt.Sprintf("applied: %s", workcopy.Changes{Files: msg.res.Files}.Stat()))
	for _, p := range sortedKeys(msg.res.Skipped) {
		m.printLine(m.st.warn.Render("  not applied: " + clean(p) + " - " + msg.res.Skipped[p]))
	}
	m.stats = m.rt.stats()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
