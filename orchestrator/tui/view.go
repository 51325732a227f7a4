package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools"
)

// Sizes of the live area's parts.
const (
	minLiveRows  = 3 // the live reply keeps at least this many rows when it shows
	minInfoRows  = 5 // an info panel needs this many to show at all
	queueShown   = 3 // queued prompts listed; the rest are counted
	defaultRows  = 40
	menuMaxShown = 8
)

// View draws the live part of the screen; the transcript above it is in
// the scrollback already. It always fits the terminal: no row is wider
// than it, and there are no more rows than it has, so that nothing is
// wrapped or scrolled away by the terminal (either leaves rows the
// renderer can no longer reach).
func (m *Model) View() string {
	if m.quitting || !m.sized {
		return "" // nothing until the terminal's size is known: a frame drawn for a guess would not fit
	}
	w, h := m.contentWidth(), m.height
	if h <= 0 {
		h = defaultRows
	}
	lines := m.layout(w, h)
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "")
		}
	}
	return strings.Join(lines, "\n")
}

// layout stacks the parts, bottom first: the status bar, the form or the
// input with what belongs to it, an info panel, then above them the
// panels, the live reply and the header in the rows left.
func (m *Model) layout(w, h int) []string {
	status := m.statusView(w)
	room := h - 1
	var core []string
	if md := m.modal(); md != nil {
		draft := m.draftLine(w)
		core = append(md.view(m, w, room-len(draft)), draft...)
	} else {
		core = m.inputBlock(w, room)
	}
	room -= len(core)
	var info []string
	if m.info != nil && room >= minInfoRows {
		info = m.infoView(w, room)
		room -= len(info)
	}
	top := m.topBlock(w, max(room, 0))
	out := make([]string, 0, h)
	out = append(out, top...)
	out = append(out, info...)
	out = append(out, core...)
	out = append(out, status)
	if len(out) > h { // the form asked for more than there is
		out = out[len(out)-h:]
	}
	return out
}

// topBlock is the header (until the transcript has a line), the subagent
// and task panels and the live reply, in at most room rows: the header
// gives way first (it is cut from its end), then the live reply (it keeps
// its last rows), then the panels.
func (m *Model) topBlock(w, room int) []string {
	var header, live []string
	if !m.printed {
		header = strings.Split(m.headerView(), "\n")
	}
	var panels []string
	for _, p := range []string{m.subagentView(), m.todoView()} {
		if p != "" {
			panels = append(panels, rows(w, p)...)
		}
	}
	if m.turn.rendered != "" {
		live = rows(w, m.turn.rendered)
	}
	need := func() int { return len(header) + len(panels) + len(live) }
	if need() > room {
		header = header[:max(min(len(header), room-len(panels)-len(live)), 0)]
	}
	if need() > room && len(live) > minLiveRows {
		live = live[len(live)-max(room-len(panels), minLiveRows):]
	}
	if need() > room {
		keep := max(room-len(live), 0)
		if len(panels) > keep {
			panels = panels[:keep]
		}
	}
	if need() > room {
		live = live[max(len(live)-room, 0):]
	}
	out := append(header, panels...)
	return append(out, live...)
}

// inputBlock is the running turn's lines, the queue, the input and its
// menu, in at most room rows.
func (m *Model) inputBlock(w, room int) []string {
	input := m.inputView(w, max(min(room/3, 10), 1))
	room -= len(input)
	var menu []string
	if room > 2 {
		menu = m.menuView(w, min(room-1, menuMaxShown+1))
		room -= len(menu)
	}
	var queue []string
	if len(m.queue) > 0 && room > 1 {
		queue = m.queueView(w)
		if len(queue) > room-1 {
			queue = queue[:max(room-1, 1)]
		}
		room -= len(queue)
	}
	var busy []string
	if m.busy {
		busy = m.busyView(w, max(room, 1))
	}
	out := append(busy, queue...)
	out = append(out, input...)
	return append(out, menu...)
}

// headerView is the start-up summary, shown until the transcript has
// something in it (it is then printed above the first line).
func (m *Model) headerView() string {
	w := m.contentWidth()
	var lines []string
	model := "no provider configured - /provider sets one up"
	if m.configured {
		model = m.stats.provider + "/" + m.stats.model
	}
	id := m.shortID
	if id == "" {
		id = m.sessionID[:min(len(m.sessionID), store.MinAbbrev)]
	}
	lines = append(lines,
		cut(m.st.accent.Render("shiro "+m.opts.Version)+m.st.header.Render("  "+model+"  session "+id), w),
		m.st.header.Render(cut("agent: "+m.stats.variant+"  thinking: "+m.stats.thinking, w)),
		m.st.header.Render(cut("cwd: "+clean(m.opts.Workspace), w)),
	)
	if r := m.opts.Record; r.Worktree != "" {
		lines = append(lines, m.st.header.Render(cut("worktree agent: "+clean(r.Worktree)+" on branch "+clean(r.Branch), w)))
	}
	lines = append(lines, m.sandboxLines()...)
	if m.cfg.Yolo {
		lines = append(lines, m.st.warn.Render("approvals: OFF (--yolo)"))
	} else {
		lines = append(lines, m.st.header.Render(cut("approvals: on for "+strings.Join(m.gatedNames(), ", "), w)))
	}
	sets, _ := tools.ParseToolSets(m.cfg.ToolSets, m.cfg.ToolSetsPresent)
	names := make([]string, 0, 3)
	for _, s := range sets.List() {
		names = append(names, string(s))
	}
	lines = append(lines, m.st.header.Render(cut("tool sets: "+strings.Join(names, ", "), w)))
	if m.resumed > 0 {
		lines = append(lines, m.st.header.Render(fmt.Sprintf("resumed %d messages", m.resumed)))
	}
	if len(m.opts.Instructions) > 0 {
		lines = append(lines, m.st.header.Render(cut("instructions: "+strings.Join(m.opts.Instructions, ", "), w)))
	} else {
		lines = append(lines, m.st.header.Render(cut("no AGENTS.md found - /init writes one", w)))
	}
	lines = append(lines, m.extrasLines()...)
	for _, n := range m.opts.Notices {
		lines = append(lines, m.st.warn.Render(cut("notice: "+clean(n), w)))
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
		lines = append(lines, m.st.header.Render(cut(line, w)))
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

// network names the sandbox's network mode.
func (m *Model) network() string {
	switch m.cfg.Sandbox.Network {
	case config.NetworkNone:
		return "network: none"
	case config.NetworkOpen, config.NetworkBridge:
		return "network: open"
	}
	return "network: ask"
}

// sandboxLines describe the sandbox in the header.
func (m *Model) sandboxLines() []string {
	w := m.contentWidth()
	b := m.box
	switch b.phase {
	case "host":
		return []string{m.st.warn.Render(cut("sandbox: none (--no-sandbox): commands run on this machine", w))}
	case "starting":
		line := "sandbox: " + b.image + " - starting..."
		if b.progress != "" {
			line += " " + clean(b.progress)
		}
		return []string{m.st.header.Render(cut(line, w))}
	case "building":
		return []string{m.st.header.Render(cut("sandbox: building the image "+b.image+": "+clean(b.progress), w))}
	case "ready":
		line := "sandbox: " + b.info.Image + " - ready, " + m.network()
		if b.info.Container != "" {
			line += " (container " + b.info.Container + ")"
		}
		out := []string{m.st.header.Render(cut(line, w))}
		if e := b.info.Engine; e != "" && !strings.HasPrefix(e, "unix://") {
			out = append(out, m.st.header.Render(cut("engine: "+b.info.Engine, w)))
		}
		if b.info.Copy {
			out = append(out, m.st.warn.Render(cut("workspace: a copy in the sandbox - your files change only with /apply (/changes shows what waits)", w)))
		}
		return out
	}
	return []string{
		m.st.errText.Render(ansi.Wrap("sandbox: failed - "+clean(b.err), w, "")),
		m.st.header.Render(ansi.Wrap(b.fix, w, "")),
	}
}

// statusView is the bottom line: model, tools, context, cost, sandbox. It
// never wraps: what does not fit gives way from the middle.
func (m *Model) statusView(w int) string {
	s := m.stats
	model := s.model
	if !m.configured {
		model = "no provider"
	}
	cost := spendText(s.usage)
	sb := map[string]string{"starting": "sandbox starting", "building": "sandbox building", "ready": "sandbox ready", "failed": "sandbox failed", "host": "no sandbox"}[m.box.phase]
	if m.box.phase == "ready" && m.cfg.Sandbox.Network == config.NetworkNone {
		sb += ", no network"
	}
	if t := m.box.total; t != nil && (m.box.phase == "starting" || m.box.phase == "building") {
		sb += ", " + totalText(*t)
	}
	if b := m.opts.Record.Branch; m.opts.Record.Worktree != "" {
		sb = clean(b) + "  " + sb
	}
	right := m.st.status.Render(sb)
	if m.box.phase == "failed" {
		right = m.st.errText.Render(sb)
	}
	if m.cfg.Yolo {
		right += m.st.warn.Render("  yolo")
	}
	if m.now().Before(m.quitHint) {
		right = m.st.warn.Render("ctrl-c again to quit")
	}
	parts := []string{model, s.variant + "/" + s.thinking, fmt.Sprintf("%d tools", s.tools), "~" + humanTokens(s.context) + " ctx", cost}
	// What does not fit gives way: the agent, the context, the tools,
	// then the cost; the model stays.
	for _, drop := range []int{1, 3, 2, 4} {
		if ansi.StringWidth(strings.Join(slices.DeleteFunc(slices.Clone(parts), func(p string) bool { return p == "" }), "  ")+"  ")+ansi.StringWidth(right) <= w {
			break
		}
		parts[drop] = ""
	}
	parts = slices.DeleteFunc(parts, func(p string) bool { return p == "" })
	return cut(m.st.status.Render(strings.Join(parts, "  ")+"  ")+right, w)
}

// totalText is a pull's or a build's total on the status line: "pull
// 52% 2.6MB/5.0MB", "step 3/5".
func totalText(t sandbox.Total) string {
	if t.Build {
		return fmt.Sprintf("step %d/%d", min(t.Done+1, t.Of), t.Of)
	}
	pct := int64(0)
	if t.Of > 0 {
		pct = t.Done * 100 / t.Of
	}
	return fmt.Sprintf("pull %d%% %s/%s", pct, sandbox.HumanBytes(t.Done), sandbox.HumanBytes(t.Of))
}

// busyView shows the running turn: reasoning, tools, output, spinner, in
// at most room rows.
func (m *Model) busyView(w, room int) []string {
	t := m.turn
	frame := spinnerFrames[t.frame%len(spinnerFrames)]
	spinner := m.st.accent.Render(frame) + m.st.dim.Render(" working... esc to interrupt")
	var out []string
	if t.reasoning != "" {
		n := (len(t.reasoning) + 3) / 4
		if t.expanded {
			out = append(out, m.st.reasoning.Render(cut(fmt.Sprintf("thinking… ~%d tokens  ctrl-r to collapse", n), w)))
			body := ansi.Wrap(clean(strings.TrimSpace(t.reasoning)), w-2, "")
			for _, l := range strings.Split(lastLines(body, reasonLines), "\n") {
				out = append(out, m.st.reasoning.Render(cut("  "+l, w)))
			}
		} else {
			out = append(out, m.st.reasoning.Render(cut(fmt.Sprintf("thinking… ~%d tokens  ctrl-r to expand", n), w)))
		}
	}
	for _, a := range t.tools {
		label := a.name
		if a.summary != "" {
			label += "(" + clean(a.summary) + ")"
		}
		out = append(out, m.st.tool.Render(cut(frame+" "+label, w)))
	}
	if o := strings.TrimRight(clean(tools.TextOrBinary([]byte(t.output))), "\n"); o != "" {
		shown := min(outputLines, max(room-len(out)-1, 1))
		for _, l := range strings.Split(lastLines(o, shown), "\n") {
			out = append(out, m.st.dim.Render(cut("  | "+l, w)))
		}
	}
	out = append(out, spinner)
	if len(out) > room {
		out = out[len(out)-room:]
	}
	return out
}

// queueView lists the prompts waiting for the next turn.
func (m *Model) queueView(w int) []string {
	lines := []string{m.st.queue.Render(fmt.Sprintf("queued: %d", len(m.queue)))}
	for i, q := range m.queue {
		if i == queueShown && len(m.queue) > queueShown+1 {
			lines = append(lines, m.st.queue.Render(fmt.Sprintf("  ... %d more", len(m.queue)-queueShown)))
			break
		}
		lines = append(lines, m.st.queue.Render(cut(fmt.Sprintf("  %d. %s", i+1, clip(strings.Join(strings.Fields(clean(q)), " "), queueCut)), w)))
	}
	return lines
}

// inputView is the prompt, in at most maxRows rows around the cursor.
func (m *Model) inputView(w, maxRows int) []string {
	ph := "ask shiro... (/ commands, @ files)"
	if m.busy {
		ph = "type to queue for the next turn..."
	}
	return m.input.View(m.st.accent.Render("> "), w, ph, m.st, maxRows)
}

// draftLine shows the draft under a form, when there is one: what was
// typed meanwhile is kept.
func (m *Model) draftLine(w int) []string {
	d := strings.Join(strings.Fields(m.input.Value()), " ")
	if d == "" {
		return nil
	}
	return []string{m.st.dim.Render(ansi.TruncateLeft("draft: "+clean(d), max(ansi.StringWidth("draft: "+d)-w+1, 0), "…"))}
}

// menuView draws the @ picker or the command menu under the input, in at
// most room rows.
func (m *Model) menuView(w, room int) []string {
	if items := m.fileMenu(); items != nil {
		_, q, _ := atToken([]rune(m.input.BeforeCursor()))
		switch {
		case m.files.loading || !m.files.loaded:
			return []string{m.st.dim.Render("  indexing files...")}
		case len(items) == 0:
			return []string{m.st.dim.Render(cut("  no file matches "+clean(q), w))}
		}
		p := newPicker(items...)
		p.sel = min(m.menu.sel, len(items)-1)
		return p.view(m.st, w, room)
	}
	items := m.commandMenu()
	if items == nil {
		return nil
	}
	p := &picker{sel: min(m.menu.sel, len(items)-1)}
	for _, c := range items {
		p.items = append(p.items, pickItem{label: fmt.Sprintf("/%-10s  %s", c.name, c.summary)})
	}
	out := p.view(m.st, w, max(room-1, 1))
	return append(out, m.st.dim.Render(cut("  up/down move | tab complete | enter run | esc dismiss", w)))
}

// infoView is a command's output in a box of at most room rows; a body
// taller than that scrolls under the title.
func (m *Model) infoView(w, room int) []string {
	inner := max(w-4, 10)
	hint := "esc to dismiss"
	if m.info.expandable {
		hint = "ctrl-o older · esc to dismiss"
	}
	title := cut(m.st.accent.Render(clean(m.info.title))+m.st.dim.Render("  "+hint), inner)
	body := hangingRows(inner, strings.Split(clean(m.info.body), "\n")...)
	shown := m.info.scroll.window(m.st, body, inner, max(room-3, 2), "pgup/pgdn, up/down scroll")
	box := m.st.infoBox.Width(max(w-2, 10)).Render(title + "\n" + strings.Join(shown, "\n"))
	return strings.Split(box, "\n")
}

// spendText is a session's spend: dollars, "unpriced" when no request was
// priced, with a "+" when some were not.
func spendText(u orchestrator.Usage) string {
	switch {
	case u.Unpriced && u.CostUSD == 0:
		return "unpriced"
	case u.Unpriced:
		return orchestrator.FormatUSD(u.CostUSD) + "+"
	}
	return orchestrator.FormatUSD(u.CostUSD)
}
