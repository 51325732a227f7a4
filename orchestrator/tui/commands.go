package tui

import (
	"cmp"
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/tools"
)

// command is one slash command. One registry drives the menu, /help and
// the parser.
type command struct {
	name    string
	aliases []string // parsed, not shown in the menu
	args    string   // the argument's name in /help; Tab adds a space when set
	summary string
	// offline commands work before a provider is configured.
	offline bool
	run     func(m *Model, arg string) tea.Cmd
}

// commands is the registry, in menu order.
func commands() []*command {
	return []*command{
		{name: "help", aliases: []string{"?"}, summary: "commands and keys", offline: true, run: (*Model).cmdHelp},
		{name: "agent", args: "[name]", summary: "switch the agent variant (no name: pick one)", offline: true, run: (*Model).cmdAgent},
		{name: "think", args: "[level]", summary: "set the thinking level (no level: pick one)", offline: true, run: (*Model).cmdThink},
		{name: "init", summary: "have the model write AGENTS.md for this project", run: (*Model).cmdInit},
		{name: "model", args: "[id]", summary: "switch the model (no id: pick from the list)", run: (*Model).cmdModel},
		{name: "models", summary: "list the provider's models and pick one", run: (*Model).cmdModels},
		{name: "provider", aliases: []string{"login"}, summary: "set up the provider, key and model", offline: true, run: (*Model).cmdProvider},
		{name: "tools", summary: "the tools, their sets and what is offered", offline: true, run: (*Model).cmdTools},
		{name: "context", summary: "instruction files and the context estimate", offline: true, run: (*Model).cmdContext},
		{name: "cost", summary: "tokens and spend of this session", offline: true, run: (*Model).cmdCost},
		{name: "compact", summary: "replace the history with a model-written summary", run: (*Model).cmdCompact},
		{name: "undo", args: "[n]", summary: "take back the last (n) turns: files and conversation", offline: true, run: (*Model).cmdUndo},
		{name: "jobs", summary: "the background jobs: state, uptime, last line; kill one", offline: true, run: (*Model).cmdJobs},
		{name: "diff", args: "[turn]", summary: "the files this session (or turn) changed", offline: true, run: (*Model).cmdDiff},
		{name: "changes", summary: "what the sandbox changed in its copy (copy mode)", offline: true, run: (*Model).cmdChanges},
		{name: "apply", summary: "bring the sandbox's changes into the workspace (copy mode)", offline: true, run: (*Model).cmdApply},
		{name: "todos", summary: "the task list", offline: true, run: (*Model).cmdTodos},
		{name: "notes", summary: "what shiro remembers about this project", offline: true, run: (*Model).cmdNotes},
		{name: "memory", summary: "merge the notes never recalled, with the model", run: (*Model).cmdMemory},
		{name: "skills", summary: "the skills the model can load", offline: true, run: (*Model).cmdSkills},
		{name: "plugins", summary: "active and failed plugins", offline: true, run: (*Model).cmdPlugins},
		{name: "mcp", summary: "MCP servers and their tools", offline: true, run: (*Model).cmdMCP},
		{name: "network", summary: "the sandbox's connections and their decisions", offline: true, run: (*Model).cmdNetwork},
		{name: "ports", args: "[add H:C|rm H]", summary: "ports of the sandbox published on this machine", offline: true, run: (*Model).cmdPorts},
		{name: "sessions", summary: "the last 15 sessions", offline: true, run: (*Model).cmdSessions},
		{name: "resume", args: "[id]", summary: "load a session by id or prefix (no id: pick one)", offline: true, run: (*Model).cmdResume},
		{name: "save", summary: "save the session now", offline: true, run: (*Model).cmdSave},
		{name: "clear", summary: "start over: empty history, clear the screen", offline: true, run: (*Model).cmdClear},
		{name: "exit", aliases: []string{"quit"}, summary: "quit shiro", offline: true, run: (*Model).cmdExit},
	}
}

// matchCommands lists the commands whose name starts with prefix (case
// does not matter), an exact name first.
func matchCommands(prefix string) []*command {
	p := strings.ToLower(prefix)
	var exact, rest []*command
	for _, c := range commands() {
		switch {
		case c.name == p:
			exact = append(exact, c)
		case strings.HasPrefix(c.name, p):
			rest = append(rest, c)
		}
	}
	return append(exact, rest...)
}

// lookupCommand finds a command by name or alias.
func lookupCommand(name string) *command {
	name = strings.ToLower(name)
	for _, c := range commands() {
		if c.name == name {
			return c
		}
		for _, a := range c.aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// parseCommand splits "/name arg..." into the name and the trimmed rest.
func parseCommand(text string) (name, arg string) {
	text = strings.TrimPrefix(strings.TrimSpace(text), "/")
	name, arg, _ = strings.Cut(text, " ")
	if i := strings.IndexAny(name, "\t\n"); i >= 0 {
		name, arg = name[:i], name[i+1:]+" "+arg
	}
	return name, strings.TrimSpace(arg)
}

// runCommand runs a slash command line.
func (m *Model) runCommand(text string) tea.Cmd {
	name, arg := parseCommand(text)
	c := lookupCommand(name)
	if c == nil {
		m.printError(fmt.Sprintf("unknown command /%s - try /help", name))
		return nil
	}
	if !m.configured && !c.offline {
		m.printError(errNoProvider)
		return nil
	}
	return c.run(m, arg)
}

func (m *Model) cmdHelp(string) tea.Cmd {
	var b strings.Builder
	for _, c := range commands() {
		name := "/" + c.name
		if c.args != "" {
			name += " " + c.args
		}
		fmt.Fprintf(&b, "%-22s %s\n", name, c.summary)
	}
	b.WriteString(`
enter       send (while a turn runs: queue it for the next turn)
esc         cancel the turn and drop the queue; close a menu or panel
ctrl-c      kill the running command (the turn goes on); else clear the input; else cancel the turn; quit when idle with an empty input; twice within a second: quit from anywhere
ctrl-r      show or hide the reasoning while the model thinks
ctrl-o      a finished command's whole output or a step's reasoning (again: the one before)
up/down     prompt history; the lines of a long prompt; move in a menu; scroll a panel
pgup/pgdn   scroll a panel or an approval's diff
tab         complete a command or path
@path       pick a file (tab or enter inserts it)
ctrl-a/e    start or end of the line; ctrl-k/u/w delete to the end, the start, a word; ctrl-j a new line
forms       keys typed while a form opens go to your draft until you pause`)
	m.info = &infoPanel{title: "help", body: b.String()}
	return nil
}

func (m *Model) cmdModel(arg string) tea.Cmd {
	if arg == "" {
		return m.cmdModels("")
	}
	return m.switchModel(arg)
}

func (m *Model) cmdModels(string) tea.Cmd {
	m.printInfo("listing models...")
	return m.rt.listModels(m.cfg)
}

func (m *Model) cmdProvider(string) tea.Cmd { return m.openOnboarding() }

// cmdAgent switches the variant, or offers the five in a picker.
func (m *Model) cmdAgent(arg string) tea.Cmd {
	if arg != "" {
		return m.switchVariant(arg)
	}
	variants := agent.Variants()
	pick := &picker{}
	for i, v := range variants {
		label := fmt.Sprintf("%-8s %s", v.Name, v.Summary)
		if v.Name == m.stats.variant {
			label += " (current)"
			pick.sel = i
		}
		pick.items = append(pick.items, pickItem{label: label})
	}
	return m.openForm(&formModal{
		title: "Pick an agent",
		pick:  pick,
		done:  func(m *Model) tea.Cmd { return m.switchVariant(variants[pick.sel].Name) },
	})
}

func (m *Model) switchVariant(name string) tea.Cmd {
	if err := m.rt.sess.SetVariant(strings.ToLower(strings.TrimSpace(name))); err != nil {
		m.printError(err.Error())
		return nil
	}
	m.stats = m.rt.stats()
	m.printInfo(fmt.Sprintf("agent: %s  thinking: %s", m.stats.variant, m.stats.thinking))
	return nil
}

// cmdThink sets the thinking level, or offers the levels in a picker.
func (m *Model) cmdThink(arg string) tea.Cmd {
	if arg != "" {
		return m.switchThinking(arg)
	}
	pick := &picker{}
	for i, l := range agent.ThinkingLevels {
		label := string(l)
		if label == m.stats.thinking {
			label += " (current)"
			pick.sel = i
		}
		pick.items = append(pick.items, pickItem{label: label})
	}
	return m.openForm(&formModal{
		title: "Pick a thinking level",
		pick:  pick,
		done:  func(m *Model) tea.Cmd { return m.switchThinking(string(agent.ThinkingLevels[pick.sel])) },
	})
}

func (m *Model) switchThinking(level string) tea.Cmd {
	if err := m.rt.sess.SetThinking(strings.ToLower(strings.TrimSpace(level))); err != nil {
		m.printError(err.Error())
		return nil
	}
	m.stats = m.rt.stats()
	m.printInfo("thinking: " + m.stats.thinking)
	return nil
}

// cmdInit runs the built-in "write AGENTS.md" prompt as a turn.
func (m *Model) cmdInit(string) tea.Cmd { return m.startTurnAs("/init", orchestrator.InitPrompt) }

func (m *Model) cmdTools(string) tea.Cmd {
	offered := m.rt.sess.Offered()
	builtins := tools.Builtins()
	// The built-in tools, offered or withheld, then the others offered.
	rows := make([]orchestrator.OfferedTool, 0, len(builtins)+len(offered))
	state := map[string]string{}
	for _, t := range builtins {
		rows = append(rows, orchestrator.OfferedTool{Name: t.Name(), Kind: string(t.Set()), Gated: tools.IsGated(t)})
		state[t.Name()] = "withheld (set " + string(t.Set()) + " is off)"
		if v := m.rt.sess.Variant(); !v.Allows(t.Name()) {
			state[t.Name()] = "withheld by the " + v.Name + " agent"
		}
	}
	for _, t := range offered {
		if _, builtin := state[t.Name]; !builtin {
			rows = append(rows, t)
		}
		state[t.Name] = "offered"
	}
	width := 16 // the name column
	for _, r := range rows {
		width = max(width, len(r.Name))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d offered this turn of %d registered (allowed: always allowed this session)\n\n", len(offered), len(rows))
	for _, r := range rows {
		gate := "free"
		switch {
		case r.Gated && m.rt.sess.Allowed(r.Name):
			gate = "allowed"
		case r.Gated && m.cfg.Yolo:
			gate = "yolo"
		case r.Gated:
			gate = "asks"
		}
		fmt.Fprintf(&b, "%-*s %-10s %-7s %s\n", width, r.Name, r.Kind, gate, state[r.Name])
	}
	for _, r := range rows {
		if p := m.rt.sess.AllowedPrefixes(r.Name); len(p) > 0 {
			fmt.Fprintf(&b, "\n%s allowed this session for %s", r.Name, prefixList(p))
		}
	}
	m.info = &infoPanel{title: "tools", body: strings.TrimRight(b.String(), "\n")}
	return nil
}

func (m *Model) cmdContext(string) tea.Cmd {
	m.stats = m.rt.stats()
	var b strings.Builder
	b.WriteString(m.instructionsSummary())
	threshold := m.cfg.CompactThreshold
	if threshold <= 0 {
		threshold = agent.DefaultPruneThreshold
	}
	fmt.Fprintf(&b, "context: ~%s tokens in %d messages (%d%% of the %s pruning threshold)",
		humanTokens(m.stats.context), len(m.rt.sess.Messages()), m.stats.context*100/threshold, humanTokens(threshold))
	m.info = &infoPanel{title: "context", body: b.String()}
	return nil
}

// instructionsSummary lists the instruction files read and those refused,
// with why, one per line.
func (m *Model) instructionsSummary() string {
	var b strings.Builder
	if len(m.opts.Instructions) == 0 {
		b.WriteString("no AGENTS.md found (nor CLAUDE.md, .shiro.md) - /init writes one\n")
	} else {
		b.WriteString("instructions: " + strings.Join(m.opts.Instructions, ", ") + "\n")
	}
	for _, n := range m.opts.InstructionsRefused {
		b.WriteString("refused: " + n + "\n")
	}
	return b.String()
}

func (m *Model) cmdCost(string) tea.Cmd {
	m.stats = m.rt.stats()
	u := m.stats.usage
	body := fmt.Sprintf("model     %s/%s\nbilled    %d in / %d out tokens\nspend     %s\ncontext   ~%s tokens\nagent     %s  thinking: %s",
		m.stats.provider, m.stats.model, u.InputTokens, u.OutputTokens, spendText(u), humanTokens(m.stats.context), m.stats.variant, m.stats.thinking)
	m.info = &infoPanel{title: "cost", body: body}
	return nil
}

func (m *Model) cmdCompact(string) tea.Cmd {
	m.beginBusy()
	m.printInfo("compacting the session...")
	return tea.Batch(m.rt.startCompact(m.turnID), spin(m.turnID))
}

func (m *Model) cmdTodos(string) tea.Cmd {
	m.info = &infoPanel{title: "tasks", body: todosText(m.todos)}
	return nil
}

func (m *Model) cmdNotes(string) tea.Cmd {
	if m.rt.sess.Memory() == nil {
		m.info = &infoPanel{title: "memory", body: "memory is off in this session (--no-memory)"}
		return nil
	}
	return m.rt.readNotes(true)
}

// showNotes is /notes' panel: every note, newest first.
func (m *Model) showNotes(entries []sessiontools.MemoryEntry) {
	if len(entries) == 0 {
		m.info = &infoPanel{title: "memory: 0 notes about this project", body: "nothing recorded yet - the model keeps notes with remember"}
		return
	}
	var b strings.Builder
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		fmt.Fprintf(&b, "(%s) %s", e.Kind, e.Text)
		if e.Hits > 0 {
			fmt.Fprintf(&b, " [recalled %dx]", e.Hits)
		}
		b.WriteByte('\n')
	}
	m.info = &infoPanel{title: fmt.Sprintf("memory: %d notes about this project", len(entries)), body: strings.TrimRight(b.String(), "\n")}
}

func (m *Model) cmdMemory(string) tea.Cmd {
	if m.rt.sess.Memory() == nil {
		m.printError("memory is off in this session (--no-memory)")
		return nil
	}
	if m.busy {
		m.printError("wait for the turn to end before /memory")
		return nil
	}
	m.beginBusy()
	m.printInfo("compacting memory...")
	return tea.Batch(m.rt.startMemoryCompact(m.turnID), spin(m.turnID))
}

func (m *Model) cmdSkills(string) tea.Cmd {
	skills := m.rt.sess.Skills()
	if len(skills) == 0 {
		m.info = &infoPanel{title: "skills", body: "no skills loaded (--no-skills, or none found)"}
		return nil
	}
	var b strings.Builder
	for _, sk := range skills {
		fmt.Fprintf(&b, "%-10s %-8s %s\n", sk.Name, sk.Origin, sk.Description)
	}
	b.WriteString("\nadd your own as Markdown files in .shiro/skills/ (this project) or in your config directory's skills/")
	m.info = &infoPanel{title: "skills", body: b.String()}
	return nil
}

func (m *Model) cmdPlugins(string) tea.Cmd {
	var b strings.Builder
	plugins := m.rt.sess.Plugins()
	if len(plugins) == 0 {
		b.WriteString("no plugins active (--no-plugins or an empty plugins list): the guard is off\n")
	}
	for _, p := range plugins {
		fmt.Fprintf(&b, "%-10s %s\n", p.Name, p.Description)
	}
	for _, e := range m.rt.sess.PluginErrors() {
		b.WriteString("failed: " + e + "\n")
	}
	m.info = &infoPanel{title: "plugins", body: strings.TrimRight(b.String(), "\n")}
	return nil
}

func (m *Model) cmdMCP(string) tea.Cmd {
	servers := m.rt.sess.MCPStatus()
	m.mcp = servers
	if len(servers) == 0 {
		m.info = &infoPanel{title: "mcp", body: "no MCP servers (add them under mcpServers in your config; --no-mcp skips them)"}
		return nil
	}
	var b strings.Builder
	for _, s := range servers {
		where := s.Where
		if where == "" {
			where = "-"
		}
		origin := "user"
		if s.Project {
			origin = "project"
		}
		fmt.Fprintf(&b, "%s  (%s config, %s, %s)\n", s.Name, origin, cmp.Or(s.Transport, "?"), where)
		switch {
		case s.Connecting:
			b.WriteString("  connecting...\n")
		case s.Err != nil:
			b.WriteString("  " + s.Notice() + "\n")
		default:
			fmt.Fprintf(&b, "  %d tools: %s\n", len(s.Tools), strings.Join(s.Tools, ", "))
		}
		for _, sk := range s.Skipped {
			b.WriteString("  skipped: " + sk + "\n")
		}
	}
	b.WriteString("\nevery MCP tool asks before each call (a: always, for this session)")
	m.info = &infoPanel{title: "mcp", body: b.String()}
	return nil
}

func (m *Model) cmdSessions(string) tea.Cmd { return m.rt.listSessions(false) }

func (m *Model) cmdResume(arg string) tea.Cmd {
	if arg == "" {
		return m.rt.listSessions(true)
	}
	return m.rt.resume(arg)
}

// openSessionPicker offers the saved sessions to resume (/resume with no
// id).
func (m *Model) openSessionPicker(msg sessionsMsg) tea.Cmd {
	if len(msg.recs) == 0 {
		m.printInfo("no saved sessions to resume")
		return nil
	}
	pick := &picker{}
	for i, r := range msg.recs {
		pick.items = append(pick.items, pickItem{label: sessionLine(r, msg.counts[i], msg.short, idWidth(msg))})
	}
	return m.openForm(&formModal{
		title: "Resume which session?",
		pick:  pick,
		done:  func(m *Model) tea.Cmd { return m.rt.resume(msg.recs[pick.sel].ID) },
	})
}

// sessionLine describes a saved session: its id as shown (padded to w),
// date, messages, title.
func sessionLine(r store.Record, n int, short map[string]string, w int) string {
	return fmt.Sprintf("%-*s  %s  %dmsg  %s", w, shownID(r.ID, short), r.UpdatedAt.Local().Format("2006-01-02 15:04"), n, clean(r.Title))
}

// shownID is id's abbreviation in short, else its first store.MinAbbrev
// characters.
func shownID(id string, short map[string]string) string {
	if s, ok := short[id]; ok {
		return s
	}
	return id[:min(len(id), store.MinAbbrev)]
}

// idWidth is the width of the longest id msg shows.
func idWidth(msg sessionsMsg) int {
	w := 0
	for _, r := range msg.recs {
		w = max(w, len(shownID(r.ID, msg.short)))
	}
	return w
}

func (m *Model) cmdSave(string) tea.Cmd { return m.rt.save() }

func (m *Model) cmdClear(string) tea.Cmd { return m.rt.clear() }

func (m *Model) cmdExit(string) tea.Cmd {
	m.quitting = true
	return tea.Quit
}

// commandResult shows what a command's background work found.
func (m *Model) commandResult(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case modelsMsg:
		note := ""
		if msg.warning != "" {
			note = "could not list models: " + msg.warning
		}
		if len(msg.ids) == 0 {
			if note != "" {
				m.printLine(m.st.warn.Render(cut(clean(note), m.contentWidth())))
			}
			m.printError("no models to pick from - use /model <id> or /provider")
			return nil
		}
		return m.openModelPicker(msg.ids, note)
	case modelSetMsg:
		if msg.err != nil {
			m.printError(msg.err.Error())
			return nil
		}
		m.cfg, m.configured = msg.cfg, true
		m.stats = m.rt.stats()
		m.printInfo(fmt.Sprintf("model: %s/%s", msg.cfg.Provider, msg.cfg.Model))
	case sessionsMsg:
		if msg.err != nil {
			m.printError(msg.err.Error())
			return nil
		}
		if msg.pick {
			return m.openSessionPicker(msg)
		}
		var b strings.Builder
		for i, r := range msg.recs {
			b.WriteString(sessionLine(r, msg.counts[i], msg.short, idWidth(msg)) + "\n")
		}
		body := strings.TrimRight(b.String(), "\n")
		if body == "" {
			body = "no saved sessions"
		}
		m.info = &infoPanel{title: "sessions", body: body + "\n\n/resume <id> loads one"}
	case resumedMsg:
		if msg.err != nil {
			m.printError(msg.err.Error())
			return nil
		}
		m.sessionID = msg.rec.ID // the session's checkpoints follow it (Resume)
		m.shortID = msg.short
		m.stats = m.rt.stats()
		m.replay(m.rt.sess.Messages())
		m.printInfo(fmt.Sprintf("resumed %s: %d messages - %s", msg.short, msg.n, msg.rec.Title))
	case savedMsg:
		switch {
		case msg.err != nil:
			m.printError(msg.err.Error())
		case msg.id == "":
			m.printInfo("nothing to save yet")
		default:
			m.printInfo("saved " + msg.id)
		}
	case clearedMsg:
		m.sessionID = msg.id
		m.shortID = msg.short
		m.stats = m.rt.stats()
		m.printed = false
		// Wipe the screen and the scrollback, then the header shows again.
		m.out.push("\x1b[3J\x1b[2J\x1b[H")
		return nil
	}
	return nil
}
