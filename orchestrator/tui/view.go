package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/tools"
)

// View draws the live part of the screen; the transcript above it is in
// the scrollback already.
func (m *Model) View() string {
	if m.quitting {
		return ""
	}
	var top, bottom []string
	if !m.printed {
		top = append(top, m.headerView())
	}
	for _, panel := range []string{m.subagentView(), m.todoView()} {
		if panel != "" {
			top = append(top, panel)
		}
	}
	if m.info != nil {
		bottom = append(bottom, m.infoView())
	}
	switch {
	case m.approval != nil:
		bottom = append(bottom, m.approvalView())
	case m.ask != nil:
		bottom = append(bottom, m.askView())
	case m.form != nil:
		bottom = append(bottom, m.formView())
	default:
		if m.busy {
			bottom = append(bottom, m.busyView()...)
		}
		if len(m.queue) > 0 {
			bottom = append(bottom, m.queueView())
		}
		bottom = append(bottom, m.inputView())
		if menu := m.menuView(); menu != "" {
			bottom = append(bottom, menu)
		}
	}
	bottom = append(bottom, m.statusView())

	if live := m.turn.rendered; live != "" {
		if m.height > 0 {
			used := lineCount(top) + lineCount(bottom)
			live = lastLines(live, max(m.height-used-1, 3))
		}
		top = append(top, live)
	}
	return strings.Join(append(top, bottom...), "\n")
}

func lineCount(parts []string) int {
	n := 0
	for _, p := range parts {
		n += strings.Count(p, "\n") + 1
	}
	return n
}

// headerView is the start-up summary, shown until the transcript has
// something in it (it is then printed above the first line).
func (m *Model) headerView() string {
	var lines []string
	model := "no provider configured - /provider sets one up"
	if m.configured {
		model = m.stats.provider + "/" + m.stats.model
	}
	id := m.sessionID
	if len(id) > 8 {
		id = id[:8]
	}
	lines = append(lines,
		m.st.accent.Render("shiro "+m.opts.Version)+m.st.header.Render("  "+model+"  session "+id),
		m.st.header.Render("cwd: "+m.opts.Workspace),
	)
	lines = append(lines, m.sandboxLines()...)
	if m.cfg.Yolo {
		lines = append(lines, m.st.warn.Render("approvals: OFF (--yolo)"))
	} else {
		lines = append(lines, m.st.header.Render("approvals: on for "+strings.Join(m.gatedNames(), ", ")))
	}
	sets, _ := tools.ParseToolSets(m.cfg.ToolSets, m.cfg.ToolSetsPresent)
	names := make([]string, 0, 3)
	for _, s := range sets.List() {
		names = append(names, string(s))
	}
	lines = append(lines, m.st.header.Render("tool sets: "+strings.Join(names, ", ")))
	if m.resumed > 0 {
		lines = append(lines, m.st.header.Render(fmt.Sprintf("resumed %d messages", m.resumed)))
	}
	if len(m.opts.Instructions) > 0 {
		lines = append(lines, m.st.header.Render("instructions: "+strings.Join(m.opts.Instructions, ", ")))
	} else {
		lines = append(lines, m.st.header.Render("no AGENTS.md found"))
	}
	lines = append(lines, m.extrasLines()...)
	for _, n := range m.opts.Notices {
		lines = append(lines, m.st.warn.Render(cut("notice: "+n, m.contentWidth())))
	}
	lines = append(lines, m.st.header.Render("/help for commands"))
	return strings.Join(lines, "\n")
}

// extrasLines describe the skills, plugins and memory in the header.
func (m *Model) extrasLines() []string {
	var lines []string
	w := m.contentWidth()
	if skills := m.rt.sess.Skills(); len(skills) > 0 {
		names := make([]string, len(skills))
		for i, sk := range skills {
			names[i] = sk.Name
		}
		lines = append(lines, m.st.header.Render(cut("skills: "+strings.Join(names, ", "), w)))
	}
	if plugins := m.rt.sess.Plugins(); len(plugins) > 0 {
		names := make([]string, len(plugins))
		for i, p := range plugins {
			names[i] = p.Name
		}
		lines = append(lines, m.st.header.Render(cut("plugins: "+strings.Join(names, ", "), w)))
	} else {
		lines = append(lines, m.st.warn.Render("plugins: none - the guard is off"))
	}
	if m.notes > 0 {
		line := fmt.Sprintf("memory: %d notes about this project", m.notes)
		if m.notes >= sessiontools.CrowdedMemory {
			line += " - /memory merges them"
		}
		lines = append(lines, m.st.header.Render(line))
	}
	if len(m.mcp) > 0 {
		n, connecting := 0, false
		for _, s := range m.mcp {
			n += len(s.Tools)
			connecting = connecting || s.Connecting
		}
		line := fmt.Sprintf("mcp: %d tools", n)
		if connecting {
			line += " (connecting...)"
		}
		lines = append(lines, m.st.header.Render(line))
	}
	return lines
}

// gatedNames are the offered tools that ask before each call, MCP tools
// folded into mcp__*.
func (m *Model) gatedNames() []string {
	var out []string
	for _, t := range m.rt.sess.Offered() {
		if t.Gated && t.Kind != orchestrator.KindMCP {
			out = append(out, t.Name)
		}
	}
	return append(out, "mcp__*")
}

// sandboxLines describe the sandbox in the header.
func (m *Model) sandboxLines() []string {
	w := m.contentWidth()
	b := m.box
	switch b.phase {
	case "host":
		return []string{m.st.warn.Render("sandbox: none (--no-sandbox): commands run on this machine")}
	case "starting":
		line := "sandbox: " + b.image + " - starting..."
		if b.progress != "" {
			line += " " + b.progress
		}
		return []string{m.st.header.Render(cut(line, w))}
	case "building":
		return []string{m.st.header.Render(cut("sandbox: building the image "+b.image+": "+b.progress, w))}
	case "ready":
		line := "sandbox: " + b.info.Image + " - ready"
		if b.info.Container != "" {
			line += " (container " + b.info.Container + ")"
		}
		return []string{m.st.header.Render(cut(line, w))}
	}
	return []string{
		m.st.errText.Render(ansi.Wrap("sandbox: failed - "+b.err, w, "")),
		m.st.header.Render(ansi.Wrap(sandboxFix, w, "")),
	}
}

// statusView is the bottom line: model, tools, context, cost, sandbox.
func (m *Model) statusView() string {
	s := m.stats
	parts := []string{s.model}
	if !m.configured {
		parts = []string{"no provider"}
	}
	parts = append(parts, fmt.Sprintf("%d tools", s.tools), "~"+humanTokens(s.context)+" ctx")
	if usd, ok := orchestrator.Cost(s.model, s.usage); ok {
		parts = append(parts, orchestrator.FormatUSD(usd))
	} else {
		parts = append(parts, "unpriced")
	}
	sb := map[string]string{"starting": "sandbox starting", "building": "sandbox building", "ready": "sandbox ready", "failed": "sandbox failed", "host": "no sandbox"}[m.box.phase]
	line := m.st.status.Render(strings.Join(parts, "  ") + "  ")
	if m.box.phase == "failed" {
		line += m.st.errText.Render(sb)
	} else {
		line += m.st.status.Render(sb)
	}
	if m.cfg.Yolo {
		line += m.st.warn.Render("  yolo")
	}
	return line
}

// busyView shows the running turn: reasoning, tools, output, spinner.
func (m *Model) busyView() []string {
	t := m.turn
	frame := spinnerFrames[t.frame%len(spinnerFrames)]
	var out []string
	if t.reasoning != "" {
		n := (len(t.reasoning) + 3) / 4
		if t.expanded {
			out = append(out, m.st.reasoning.Render(fmt.Sprintf("thinking… ~%d tokens  ctrl-r to collapse", n)))
			body := ansi.Wrap(strings.TrimSpace(t.reasoning), m.contentWidth()-2, "")
			for _, l := range strings.Split(lastLines(body, reasonLines), "\n") {
				out = append(out, m.st.reasoning.Render("  "+l))
			}
		} else {
			out = append(out, m.st.reasoning.Render(fmt.Sprintf("thinking… ~%d tokens  ctrl-r to expand", n)))
		}
	}
	for _, a := range t.tools {
		label := a.name
		if a.summary != "" {
			label += "(" + a.summary + ")"
		}
		out = append(out, m.st.tool.Render(cut(frame+" "+label, m.contentWidth())))
	}
	if o := strings.TrimRight(t.output, "\n"); o != "" {
		for _, l := range strings.Split(lastLines(o, outputLines), "\n") {
			out = append(out, m.st.dim.Render(cut("  | "+expandTabs(ansi.Strip(l)), m.contentWidth())))
		}
	}
	out = append(out, m.st.accent.Render(frame)+m.st.dim.Render(" working... esc to interrupt"))
	return out
}

// queueView lists the prompts waiting for the next turn.
func (m *Model) queueView() string {
	lines := []string{m.st.queue.Render(fmt.Sprintf("queued: %d", len(m.queue)))}
	for i, q := range m.queue {
		lines = append(lines, m.st.queue.Render(fmt.Sprintf("  %d. %s", i+1, clip(strings.Join(strings.Fields(q), " "), queueCut))))
	}
	return strings.Join(lines, "\n")
}

// inputView is the prompt line.
func (m *Model) inputView() string {
	ph := "ask shiro... (/ commands, @ files)"
	if m.busy {
		ph = "type to queue for the next turn..."
	}
	return m.input.View(m.st.accent.Render("> "), m.contentWidth(), ph, m.st, true)
}

// menuView draws the @ picker or the command menu under the input.
func (m *Model) menuView() string {
	if items := m.fileMenu(); items != nil {
		_, q, _ := atToken([]rune(m.input.BeforeCursor()))
		switch {
		case m.files.loading || !m.files.loaded:
			return m.st.dim.Render("  indexing files...")
		case len(items) == 0:
			return m.st.dim.Render("  no file matches " + q)
		}
		lines := make([]string, len(items))
		for i, p := range items {
			if i == min(m.menu.sel, len(items)-1) {
				lines[i] = m.st.selected.Render("> " + p)
			} else {
				lines[i] = "  " + p
			}
		}
		return strings.Join(lines, "\n")
	}
	items := m.commandMenu()
	if items == nil {
		return ""
	}
	var lines []string
	for i, c := range items {
		name := fmt.Sprintf("/%-10s", c.name)
		if i == min(m.menu.sel, len(items)-1) {
			lines = append(lines, m.st.selected.Render("> "+name)+"  "+c.summary)
		} else {
			lines = append(lines, "  "+m.st.cmdName.Render(name)+"  "+m.st.dim.Render(c.summary))
		}
	}
	lines = append(lines, m.st.dim.Render("  up/down move | tab complete | enter run | esc dismiss"))
	return strings.Join(lines, "\n")
}

// infoView is a command's output in a box.
func (m *Model) infoView() string {
	w := m.contentWidth()
	title := m.st.accent.Render(m.info.title) + m.st.dim.Render("  esc to dismiss")
	body := ansi.Wrap(m.info.body, max(w-4, 10), "")
	return m.st.infoBox.Width(max(w-2, 10)).Render(title + "\n" + body)
}

// approvalView is the approval prompt: what the call does and the choice.
func (m *Model) approvalView() string {
	a := m.approval
	w := m.contentWidth()
	inner := max(w-4, 16)
	req := a.msg.req
	lines := []string{m.st.warn.Bold(true).Render(req.Tool + " wants to run")}
	d := a.msg.detail
	switch {
	case d.command != "":
		lines = append(lines, m.st.dim.Render(ansi.Wrap(d.command, inner, "")))
	case d.diff && d.problem != "":
		lines = append(lines, m.st.diffHead.Render(d.label), m.st.dim.Render("(cannot preview: "+d.problem+")"))
	case d.diff:
		// Leave room for the box, the choices, the help and the status bar.
		lines = append(lines, renderRows(d, m.st, inner, m.height-12))
	default:
		lines = append(lines, m.st.dim.Render(lastLines(ansi.Wrap(d.json, inner, ""), 20)))
	}
	lines = append(lines, "", a.form.View())
	box := m.st.approvalBox.Width(max(w-2, 10)).Render(strings.Join(lines, "\n"))
	help := m.st.dim.Render("y allow once | a always allow " + req.Tool + " | n deny")
	return box + "\n" + help
}

// renderRows draws a precomputed diff in at most maxRows rows (when the
// terminal's height is known).
func renderRows(d preview, st styles, width, maxRows int) string {
	var b strings.Builder
	b.WriteString(st.diffHead.Render(fmt.Sprintf("%s +%d -%d", d.label, d.added, d.removed)))
	rows := d.rows
	if maxRows > 0 && len(rows) > maxRows {
		more := len(rows) - (maxRows - 1)
		rows = append(rows[:maxRows-1:maxRows-1], diffRow{'.', fmt.Sprintf("... %d more diff rows (the terminal is too short for them)", more)})
	}
	for _, r := range rows {
		b.WriteByte('\n')
		switch r.kind {
		case '+':
			b.WriteString(st.diffAdd.Render(cut(" + "+expandTabs(r.text), width)))
		case '-':
			b.WriteString(st.diffDel.Render(cut(" - "+expandTabs(r.text), width)))
		case ' ':
			b.WriteString(st.diffCtx.Render(cut("   "+expandTabs(r.text), width)))
		default:
			b.WriteString(st.dim.Render(cut(r.text, width)))
		}
	}
	return b.String()
}

// formView is onboarding or a picker.
func (m *Model) formView() string {
	return m.st.accent.Render(m.form.title) + m.st.dim.Render("  esc to cancel") + "\n" + m.form.form.View()
}
