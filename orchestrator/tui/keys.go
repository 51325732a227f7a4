package tui

import (
	"strings"

	tea "github.com/charmbracelet/bubbletea"
)

// key handles one key press.
func (m *Model) key(k tea.KeyMsg) tea.Cmd {
	if k.Type == tea.KeyCtrlC {
		return m.ctrlCPressed()
	}
	m.ctrlC = 0
	switch {
	case m.approval != nil:
		return m.approvalKey(k)
	case m.ask != nil:
		return m.askKey(k)
	case m.form != nil:
		if k.Type == tea.KeyEsc {
			f := m.form
			m.form = nil
			if f.cancel != nil {
				return f.cancel(m)
			}
			return nil
		}
		return m.form.update(m, k)
	}
	if k.Type == tea.KeyCtrlR {
		if m.busy {
			m.turn.expanded = !m.turn.expanded
		}
		return nil
	}
	if items := m.fileMenu(); items != nil {
		if cmd, ok := m.fileMenuKey(k, items); ok {
			return cmd
		}
	} else if items := m.commandMenu(); items != nil {
		if cmd, ok := m.commandMenuKey(k, items); ok {
			return cmd
		}
	}
	switch k.Type {
	case tea.KeyEsc:
		switch {
		case m.info != nil:
			m.info = nil
		case m.busy:
			m.queue = nil
			return m.rt.abort()
		}
		return nil
	case tea.KeyEnter:
		text := m.input.Value()
		m.input.Set("")
		m.history.entries = addHistory(m.history.entries, text)
		m.history.reset()
		m.menu = menuState{}
		var save tea.Cmd
		if strings.TrimSpace(text) != "" {
			save = m.rt.saveHistory(m.history.entries)
		}
		return tea.Batch(save, m.submit(text))
	case tea.KeyUp:
		if !strings.Contains(m.input.BeforeCursor(), "\n") {
			if s, ok := m.history.up(m.input.Value()); ok {
				m.input.Set(s)
			}
			return nil
		}
	case tea.KeyDown:
		if s, ok := m.history.down(); ok {
			m.input.Set(s)
		}
		return nil
	}
	before := m.input.Value()
	if !m.input.Update(k) {
		return nil
	}
	if m.input.Value() != before {
		m.menu.sel = 0
		return m.maybeIndexFiles()
	}
	return nil
}

// ctrlCPressed kills the command in flight (the turn goes on), or quits
// when nothing runs; a third press in a row quits at once.
func (m *Model) ctrlCPressed() tea.Cmd {
	m.ctrlC++
	switch {
	case m.ctrlC >= 3:
		m.forced, m.quitting = true, true
		return tea.Quit
	case m.busy && m.turn.running():
		return m.rt.interrupt(m.turn.runningSummaries())
	}
	m.quitting = true
	return tea.Quit
}

// maybeIndexFiles starts the walk the first time an @ token appears.
func (m *Model) maybeIndexFiles() tea.Cmd {
	if m.files.loaded || m.files.loading {
		return nil
	}
	if _, _, ok := atToken([]rune(m.input.BeforeCursor())); !ok {
		return nil
	}
	m.files.loading = true
	return m.rt.indexFiles()
}

// fileMenu is what the @ picker shows now: nil when it is closed, the
// matching paths otherwise (possibly none).
func (m *Model) fileMenu() []string {
	_, q, ok := atToken([]rune(m.input.BeforeCursor()))
	if !ok || m.menu.dismissed == m.input.Value() {
		return nil
	}
	if !m.files.loaded {
		return []string{}
	}
	return rankFiles(m.files.files, q, fileMenuShown)
}

// fileMenuKey handles the keys the @ picker claims.
func (m *Model) fileMenuKey(k tea.KeyMsg, items []string) (tea.Cmd, bool) {
	switch k.Type {
	case tea.KeyEsc:
		m.menu.dismissed = m.input.Value()
		return nil, true
	case tea.KeyUp, tea.KeyDown:
		if len(items) > 0 {
			m.menu.sel = wrap(m.menu.sel, len(items), k.Type == tea.KeyDown)
		}
		return nil, true
	case tea.KeyTab, tea.KeyEnter:
		if len(items) == 0 {
			return nil, k.Type == tea.KeyTab
		}
		m.insertPath(items[min(m.menu.sel, len(items)-1)])
		return nil, true
	}
	return nil, false
}

// insertPath replaces the @ token with the path and a space, keeping what
// follows the cursor.
func (m *Model) insertPath(p string) {
	before := []rune(m.input.BeforeCursor())
	start, _, _ := atToken(before)
	after := m.input.text[m.input.cursor:]
	text := string(before[:start]) + p + " "
	m.input.Set(text + string(after))
	m.input.SetCursor(len([]rune(text)))
	m.menu = menuState{}
}

// commandMenu lists the commands matching the input while it is "/" and
// letters: nil when closed.
func (m *Model) commandMenu() []*command {
	v := m.input.Value()
	if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, " \t\n") || m.menu.dismissed == v {
		return nil
	}
	items := matchCommands(v[1:])
	if len(items) == 0 {
		return nil
	}
	return items
}

// commandMenuKey handles the keys the command menu claims.
func (m *Model) commandMenuKey(k tea.KeyMsg, items []*command) (tea.Cmd, bool) {
	sel := items[min(m.menu.sel, len(items)-1)]
	switch k.Type {
	case tea.KeyEsc:
		m.menu.dismissed = m.input.Value()
		return nil, true
	case tea.KeyUp, tea.KeyDown:
		m.menu.sel = wrap(m.menu.sel, len(items), k.Type == tea.KeyDown)
		return nil, true
	case tea.KeyTab:
		text := "/" + sel.name
		if sel.args != "" {
			text += " "
		}
		m.input.Set(text)
		m.menu.sel = 0
		return nil, true
	case tea.KeyEnter:
		m.input.Set("/" + sel.name)
		return nil, false // submitted as typed
	}
	return nil, false
}

func wrap(i, n int, down bool) int {
	if down {
		return (i + 1) % n
	}
	return (i - 1 + n) % n
}
