package tui

import (
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// quitWindow is how close together two ctrl-c must be to quit from
// anywhere.
const quitWindow = time.Second

// key handles one key press. A form that is shown takes the keys, unless
// its type-ahead guard sends them to the draft.
func (m *Model) key(k tea.KeyMsg) tea.Cmd {
	if k.Type == tea.KeyCtrlC {
		return m.ctrlCPressed()
	}
	m.ctrlC = 0
	if md := m.modal(); md != nil {
		if !m.armed() {
			return m.typeAhead(k)
		}
		m.byModal = true
		return md.key(m, k)
	}
	m.lastTyped = m.now()
	switch k.Type {
	case tea.KeyCtrlR:
		if m.busy {
			m.turn.expanded = !m.turn.expanded
		}
		return nil
	case tea.KeyCtrlO:
		m.showExpandable()
		return nil
	}
	if m.info != nil && m.info.scroll.key(k, m.info.scroll.overflow) {
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
			return m.cancelTurn("esc")
		}
		return nil
	case tea.KeyEnter:
		text := m.input.Expanded()
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
		if !m.input.lineUp() {
			if s, ok := m.history.up(m.input.Value()); ok {
				m.input.Set(s)
			}
		}
		return nil
	case tea.KeyDown:
		if !m.input.lineDown() {
			if s, ok := m.history.down(); ok {
				m.input.Set(s)
			}
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

// ctrlCPressed kills the running command; otherwise clears the input;
// otherwise closes a form or cancels the turn; and quits when idle with an
// empty input. A second press within quitWindow quits from anywhere, a
// third at once (without waiting for the turn and the sandbox).
func (m *Model) ctrlCPressed() tea.Cmd {
	now := m.now()
	if m.ctrlC > 0 && now.Sub(m.lastCtrlC) > quitWindow {
		m.ctrlC = 0
	}
	m.ctrlC++
	m.lastCtrlC = now
	var cmd tea.Cmd
	switch {
	case m.ctrlC >= 3:
		m.forced, m.quitting = true, true
		return tea.Quit
	case m.ctrlC == 2:
		m.quitting = true
		return tea.Quit
	case m.busy && m.turn.running():
		cmd = m.rt.interrupt(m.turn.runningSummaries())
	case m.input.Value() != "":
		m.input.Set("")
		m.history.reset()
		m.menu = menuState{}
	case m.form != nil && !m.busy:
		cmd = m.closeForm(true)
	case m.busy:
		cmd = m.cancelTurn("ctrl-c")
	default:
		m.quitting = true
		return tea.Quit
	}
	m.quitHint = now.Add(quitWindow)
	return tea.Batch(cmd, tea.Tick(quitWindow, func(time.Time) tea.Msg { return hintMsg{} }))
}

// cancelTurn aborts the running turn (esc, ctrl-c) and drops the queue,
// saying what it dropped; the turn's end prints the marker.
func (m *Model) cancelTurn(by string) tea.Cmd {
	m.turn.cancelledBy = by
	if n := len(m.queue); n > 0 {
		what := make([]string, n)
		for i, q := range m.queue {
			what[i] = clip(strings.Join(strings.Fields(clean(q)), " "), 30)
		}
		unit := "prompts"
		if n == 1 {
			unit = "prompt"
		}
		m.printLine(m.st.notice.Render(cut(fmt.Sprintf("dropped %d queued %s: %s", n, unit, strings.Join(what, ", ")), m.contentWidth())))
		m.queue = nil
	}
	return m.rt.abort()
}

// showExpandable opens the newest collapsed item (a command's output, a
// step's reasoning) in the info panel; pressed again, the one before.
func (m *Model) showExpandable() {
	if len(m.expand) == 0 {
		m.info = &infoPanel{title: "nothing to expand", body: "ctrl-o shows a finished command's whole output or a step's reasoning; there is none yet"}
		return
	}
	if m.info != nil && m.info.expandable {
		m.expandIdx = (m.expandIdx + 1) % len(m.expand)
	} else {
		m.expandIdx = 0
	}
	e := m.expand[len(m.expand)-1-m.expandIdx]
	title := fmt.Sprintf("%s  (%d of %d)", e.title, m.expandIdx+1, len(m.expand))
	m.info = &infoPanel{title: title, body: e.body, expandable: true}
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

// insertPath replaces the @ token with the path (quoted when it holds
// spaces or quotes) and a space, keeping what follows the cursor.
func (m *Model) insertPath(p string) {
	before := []rune(m.input.BeforeCursor())
	start, _, _ := atToken(before)
	after := m.input.text[m.input.cursor:]
	text := string(before[:start]) + quotePath(p) + " "
	m.input.Set(text + string(after))
	m.input.SetCursor(len([]rune(text)))
	m.menu = menuState{}
}

// quotePath quotes a path with white space or quotes in it, so that the
// model reads it as one.
func quotePath(p string) string {
	if !strings.ContainsAny(p, " \t\"'\\") {
		return p
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(p) + `"`
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
