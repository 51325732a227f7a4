package tui

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// guardInterval is how long a form that opened while the user was typing
// keeps sending keys to the draft: it takes answers once the user has
// paused this long and it has been visible this long.
const guardInterval = 500 * time.Millisecond

// modal is a form shown in place of the input: the approval prompt, a
// question of the ask tool, onboarding, a picker. Every modal gets the
// type-ahead guard: the root model decides which keys reach it.
type modal interface {
	// key handles a key the guard let through.
	key(m *Model, k tea.KeyMsg) tea.Cmd
	// update passes other messages (a text field's blink).
	update(m *Model, msg tea.Msg) tea.Cmd
	// view draws the modal in at most height rows of width cells.
	view(m *Model, width, height int) []string
}

// guard keeps keys typed for the input from answering a form that opened
// under the user's fingers. A form that opens by itself (an approval, a
// question, a list that arrived, a command run from the input) starts
// guarded: keys go to the draft until the form has been visible for
// guardInterval and no key came for as long. A form opened by another form
// (the next step of onboarding, by a key or by the step's own message) is
// answered at once.
type guard struct {
	current modal     // the modal this state is about
	opened  time.Time // when it became visible
	guarded bool
	ticking bool // an armMsg is on its way
}

// armMsg asks the guard to look again whether its form takes keys.
type armMsg struct{}

// modal returns the modal shown, or nil.
func (m *Model) modal() modal {
	switch {
	case m.hostAsk != nil:
		return m.hostAsk
	case m.approval != nil:
		return m.approval
	case m.ask != nil:
		return m.ask
	case m.mcpAsk != nil:
		return m.mcpAsk
	case m.form != nil:
		return m.form
	}
	return nil
}

// armed reports whether the shown modal takes keys now.
func (m *Model) armed() bool {
	g := &m.guard
	if !g.guarded {
		return true
	}
	now := m.now()
	if now.Sub(g.opened) >= m.guardFor && now.Sub(m.lastTyped) >= m.guardFor {
		g.guarded = false
	}
	return !g.guarded
}

// syncGuard follows the modal shown after every message: a new one starts
// guarded unless the modal shown before opened it.
func (m *Model) syncGuard() tea.Cmd {
	md := m.modal()
	if md == m.guard.current {
		return nil
	}
	m.guard.current = md
	m.guard.opened = m.now()
	m.guard.guarded = md != nil && !m.byModal && m.guardFor > 0
	return m.armTick()
}

// armTick schedules a look at the guard when it may open.
func (m *Model) armTick() tea.Cmd {
	if !m.guard.guarded || m.guard.ticking {
		return nil
	}
	m.guard.ticking = true
	wait := m.guardFor - min(m.now().Sub(m.guard.opened), m.now().Sub(m.lastTyped))
	return tea.Tick(max(wait, time.Millisecond), func(time.Time) tea.Msg { return armMsg{} })
}

// armed is the tick's arrival: the form opens, or the wait goes on.
func (m *Model) armTicked() tea.Cmd {
	m.guard.ticking = false
	if m.armed() {
		return nil
	}
	return m.armTick()
}

// typeAhead takes a key that arrived while the form is guarded: editing
// keys go to the draft, the others are dropped; either way the user is
// still typing.
func (m *Model) typeAhead(k tea.KeyMsg) tea.Cmd {
	m.lastTyped = m.now()
	before := m.input.Value()
	m.input.Update(k)
	if m.input.Value() != before {
		m.menu.sel = 0
	}
	return m.armTick()
}

func (m *Model) now() time.Time { return m.clock() }
