package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/mcp"
)

// Timing of the live parts.
const (
	flushEvery = 60 * time.Millisecond // the live reply is re-rendered at most this often
	spinEvery  = 100 * time.Millisecond
)

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Model is the UI's one Bubble Tea model. Its parts are plain structs
// drawn by View; huh forms are child models.
type Model struct {
	rt   *runtime
	opts Options
	st   styles
	md   markdown
	out  *printQueue

	width, height int
	sized         bool // the terminal's size is known (or it is not a terminal)
	cfg           config.Config
	configured    bool
	stats         stats
	sessionID     string
	shortID       string // sessionID as shown: unique among the saved (store.Abbrev)
	resumed       int
	replayPending bool // the resumed conversation is printed once the width is known

	box     sandboxBox
	printed bool // something is in the transcript (the header is gone)

	input    editor
	history  historyNav
	menu     menuState
	files    fileIndex
	info     *infoPanel
	queue    []string
	busy     bool
	turnID   int
	turn     turnState
	approval *approvalPrompt
	// hostAsk is the form of a connection waiting for an answer (ask
	// mode); hostPending wait behind it.
	hostAsk     *hostPrompt
	hostPending []hostAskMsg
	pending     []approvalMsg // approvals waiting behind the one shown
	form        *formModal    // onboarding or a picker
	ask         *askPrompt    // a question of the ask tool
	asks        []askMsg      // questions waiting behind the one shown
	mcpAsk      *mcpPrompt    // an MCP server's sampling request or form (mcp_ask.go)
	mcpAsks     []mcpAskMsg   // those waiting behind it

	todos     []sessiontools.Todo // the task panel
	subagents []subagent          // the subagent panel of this turn
	notes     int                 // memory notes, for the header (-1: memory off)
	mcp       []mcp.ServerStatus  // the MCP servers, for the header

	printedLines int // transcript lines printed so far

	// The type-ahead guard of the forms (guard.go).
	clock     func() time.Time
	guardFor  time.Duration
	lastTyped time.Time // the last key that went to the input
	byModal   bool      // the message being handled is the shown modal's: a key it took, or its own
	guard     guard

	expand    []expandable // what ctrl-o shows, oldest first
	expandIdx int          // the one shown (counting back from the newest)

	ctrlC     int       // ctrl-c presses in a row, each within a second of the last
	lastCtrlC time.Time // the last one
	quitHint  time.Time // "ctrl-c again to quit" shows until then
	quitting  bool
	forced    bool
}

// sandboxBox is the sandbox's state in the header and status bar.
type sandboxBox struct {
	image    string
	phase    string // starting, building, ready, failed, host
	progress string
	// total is how far the image's pull or build has come, for the
	// status line; nil when none is under way.
	total *sandbox.Total
	info  sandbox.Info
	err   string
	fix   string // what to do about err (sandboxFix)
}

// fileIndex is the @ picker's list of files, walked on first use.
type fileIndex struct {
	loading, loaded bool
	files           []string
	err             string
}

// menuState is the command or file menu under the input.
type menuState struct {
	sel       int
	dismissed string // the input for which esc closed the menu
}

// infoPanel is a command's output (esc dismisses it; the next submit
// clears it). A body taller than the room scrolls.
type infoPanel struct {
	title, body string
	scroll      scroller
	expandable  bool // an item of ctrl-o: ctrl-o again shows the one before
}

func newModel(rt *runtime, opts Options, st styles) *Model {
	m := &Model{
		rt:            rt,
		opts:          opts,
		st:            st,
		md:            markdown{profile: st.profile},
		out:           rt.app.out,
		cfg:           opts.Config,
		configured:    opts.Configured,
		sessionID:     opts.Record.ID,
		resumed:       len(opts.Record.Messages),
		replayPending: len(opts.Record.Messages) > 0,
		box:           sandboxBox{image: opts.SandboxImage, phase: "starting"},
		clock:         time.Now,
		guardFor:      guardInterval,
	}
	if _, terminal := rt.app.reflow.width(); !terminal {
		m.sized = true // no size will come: draw for the defaults
	}
	if opts.Config.Sandbox.NoSandbox {
		m.box.phase = "host"
	}
	if rt.sess != nil {
		m.stats = rt.stats()
		m.sessionID = rt.sess.Saved().ID
		m.shortID = opts.Store.Short(m.sessionID)
		m.todos = rt.sess.Todos().Items()
		m.mcp = rt.sess.MCPStatus()
		m.notes = -1
		if mem := rt.sess.Memory(); mem != nil {
			m.notes = len(mem.Entries()) // before the program runs: no frame waits
		}
	}
	m.history.reset()
	return m
}

// Init loads the history, starts the sandbox and, when no provider is
// configured, opens onboarding.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.rt.loadHistory(), m.rt.measureOverhead()}
	if len(m.mcp) > 0 {
		cmds = append(cmds, m.rt.watchMCP())
	}
	if m.box.phase != "host" {
		cmds = append(cmds, m.rt.startSandbox())
	}
	if !m.configured {
		cmds = append(cmds, m.openOnboarding())
	} else if p := strings.TrimSpace(m.opts.Prompt); p != "" {
		cmds = append(cmds, m.submit(p))
	}
	return tea.Batch(cmds...)
}

// Update is the one place state changes. After every message the
// type-ahead guard looks at the form shown.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m.byModal = false
	cmd := m.update(msg)
	if g := m.syncGuard(); g != nil {
		cmd = tea.Batch(cmd, g)
	}
	return m, cmd
}

func (m *Model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height, m.sized = msg.Width, msg.Height, true
		if m.replayPending && m.rt.sess != nil {
			m.replayPending = false
			m.replay(m.rt.sess.Messages())
		}
		if strings.TrimSpace(m.turn.raw) != "" {
			m.turn.rendered = m.md.render(m.turn.raw, m.contentWidth())
		}
		return m.forwardToForm(msg)
	case tea.KeyMsg:
		return m.key(msg)
	case eventMsg:
		return m.event(msg)
	case turnEndMsg:
		return m.turnEnded(msg)
	case flushMsg:
		if msg.turn == m.turnID {
			m.turn.flushScheduled = false
			m.flushLive(false)
		}
		return nil
	case spinMsg:
		if msg.turn != m.turnID || !m.busy {
			return nil
		}
		m.turn.frame++
		return spin(m.turnID)
	case approvalMsg:
		return m.showApproval(msg)
	case hostAskMsg:
		return m.showHostAsk(msg)
	case hostAskGoneMsg:
		return m.dropHostAsk(msg.id)
	case approvalGoneMsg:
		m.dropApproval(msg.id)
		return nil
	case imageMovedMsg:
		return m.rt.askNewImage(msg.move)
	case totalMsg:
		if m.box.phase == "starting" || m.box.phase == "building" {
			t := msg.total
			m.box.total = &t
			if t.Build {
				m.box.phase = "building"
			}
		}
		return nil
	case progressMsg:
		if m.box.phase == "starting" || m.box.phase == "building" {
			m.box.progress = msg.line
			if strings.Contains(msg.line, "building") || strings.HasPrefix(msg.line, "Step") || strings.HasPrefix(msg.line, "#") {
				m.box.phase = "building"
			}
		}
		return nil
	case noticeMsg:
		m.printInfo(msg.text)
		return nil
	case sandboxMsg:
		m.sandboxReady(msg)
		return nil
	case interruptedMsg:
		if len(msg.names) > 0 {
			m.printLine(m.st.notice.Render("interrupted: " + strings.Join(msg.what, ", ")))
		}
		return nil
	case filesMsg:
		m.files.loading, m.files.loaded, m.files.files = false, true, msg.files
		if msg.err != nil {
			m.files.err = msg.err.Error()
		}
		return nil
	case historyMsg:
		// Prompts submitted before the file was read stay newest.
		m.history.entries = append(msg.entries, m.history.entries...)
		m.history.reset()
		return nil
	case compactedMsg:
		m.compacted(msg)
		return nil
	case changesMsg:
		return m.changesListed(msg)
	case appliedMsg:
		m.applied(msg)
		return nil
	case undoPlanMsg:
		return m.undoPlanned(msg)
	case undoneMsg:
		m.undone(msg)
		return nil
	case jobsStoppedMsg:
		return m.jobsStopped(msg)
	case diffMsg:
		m.showDiff(msg)
		return nil
	case portsMsg:
		m.portsDone(msg)
		return nil
	case askMsg:
		return m.showAsk(msg)
	case askGoneMsg:
		return m.dropAsk(msg.id)
	case mcpAskMsg:
		return m.showMCP(msg)
	case mcpAskGoneMsg:
		return m.dropMCP(msg.id)
	case todosMsg:
		m.todos = msg.items
		return nil
	case subagentMsg:
		m.subagentEvent(msg.ev)
		return nil
	case onboardModelsMsg:
		return m.pickOnboardingModel(msg)
	case mcpMsg:
		m.mcp = msg.servers
		m.stats = m.rt.stats()
		return nil
	case memoryMsg:
		return m.memoryCompacted(msg)
	case notesMsg:
		m.notes = len(msg.entries)
		if msg.show {
			m.showNotes(msg.entries)
		}
		return nil
	case modelsMsg, modelSetMsg, sessionsMsg, resumedMsg, savedMsg, clearedMsg:
		return m.commandResult(msg)
	case armMsg:
		return m.armTicked()
	case hintMsg:
		return nil // a redraw: the quit hint's time is over
	case overheadMsg:
		m.stats = m.rt.stats()
		return nil
	}
	return m.forwardToForm(msg)
}

// forwardToForm passes a message to the open form (a text field's own
// messages, window sizes, blinks).
func (m *Model) forwardToForm(msg tea.Msg) tea.Cmd {
	if md := m.modal(); md != nil {
		m.byModal = true // what it opens next continues it (a text field completes asynchronously)
		return md.update(m, msg)
	}
	return nil
}

func spin(turn int) tea.Cmd {
	return tea.Tick(spinEvery, func(time.Time) tea.Msg { return spinMsg{turn: turn} })
}

type (
	flushMsg struct{ turn int }
	spinMsg  struct{ turn int }
	hintMsg  struct{}
)

// printLine queues transcript lines. The first one brings the header
// along, so that it stays in the scrollback above the conversation. Every
// line is scrubbed and cut into rows no wider than the terminal: a row the
// terminal wraps itself is one the renderer cannot clear.
func (m *Model) printLine(lines ...string) {
	w := m.contentWidth()
	if !m.printed {
		m.printed = true
		m.out.push(append(rows(w, m.headerView()), "")...)
	}
	r := rows(w, lines...)
	m.printedLines += len(r)
	m.out.push(r...)
}

// printInfo prints a dim line of the UI's own (its parts from outside
// cleaned by the caller).
func (m *Model) printInfo(text string) { m.printLine(m.st.info.Render(text)) }

// printError prints an error: its first line, cleaned.
func (m *Model) printError(text string) {
	m.printLine(m.st.errText.Render("error: " + firstLine(clean(text))))
}

// sandboxReady records the end of the sandbox's start.
func (m *Model) sandboxReady(msg sandboxMsg) {
	if msg.err != nil {
		m.box.phase, m.box.err, m.box.fix = "failed", msg.err.Error(), sandboxFix(msg.err)
		if m.printed {
			m.printError("the sandbox did not start: " + m.box.err)
			m.printInfo(m.box.fix)
		}
		return
	}
	m.box.phase, m.box.info, m.box.progress, m.box.total = "ready", msg.info, "", nil
	if msg.info.Kind == "local" {
		m.box.phase = "host"
	}
}

// sandboxFix is what to do when the sandbox cannot start: the fix the
// error names for its cause (an unreachable engine says why: permission on
// the socket, no socket, a remote that refused, TLS), else start Docker.
func sandboxFix(err error) string {
	fix := "start Docker (or point DOCKER_HOST at an engine)"
	var f interface{ FixText() string }
	if errors.As(err, &f) {
		fix = f.FixText()
	}
	return "fix: " + fix + ", then restart shiro; or run shiro --no-sandbox (commands then run on this machine, unconfined); bash, grep and git fail until then"
}

// submit handles an entered line: queued while a turn runs, else run.
func (m *Model) submit(text string) tea.Cmd {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	m.info = nil
	if m.busy {
		m.queue = append(m.queue, text)
		return nil
	}
	return m.run(text)
}

// run executes a line now: a slash command or a prompt.
func (m *Model) run(text string) tea.Cmd {
	if strings.HasPrefix(text, "/") {
		return m.runCommand(text)
	}
	if !m.configured {
		// The prompt stays in the input for when a provider is set up.
		m.input.Set(text)
		m.printError(errNoProvider + " (your prompt is kept)")
		return nil
	}
	return m.startTurn(text)
}

const errNoProvider = "no provider configured yet - run /provider"

// startTurn prints the prompt and runs it.
func (m *Model) startTurn(prompt string) tea.Cmd { return m.startTurnAs(prompt, prompt) }

// startTurnAs runs prompt, shown in the transcript as shown (a command's
// built-in prompt shows as the command).
func (m *Model) startTurnAs(shown, prompt string) tea.Cmd {
	if m.printed {
		m.printLine("")
	}
	m.printLine(m.st.user.Render("> " + clean(shown)))
	m.beginBusy()
	m.turn.prompt = prompt
	return tea.Batch(m.rt.startTurn(m.turnID, prompt), spin(m.turnID))
}

// beginBusy starts a turn's live state.
func (m *Model) beginBusy() {
	m.turnID++
	m.busy = true
	m.turn = turnState{}
}

// busyJob runs work as a turn of its own (the spinner shows, esc
// interrupts it) and hands the message it returns to the UI.
func (m *Model) busyJob(work func(ctx context.Context) tea.Msg) tea.Cmd {
	m.beginBusy()
	rt := m.rt
	return tea.Batch(rt.job(m.turnID, func(ctx context.Context) turnEndMsg {
		rt.app.post(work(ctx))
		return turnEndMsg{}
	}), spin(m.turnID))
}

// turnEnded drops the turn's live state, says how it ended when it did
// not end well, and runs the next queued line.
func (m *Model) turnEnded(msg turnEndMsg) tea.Cmd {
	if msg.turn != m.turnID {
		return nil
	}
	m.endReasoning()
	m.flushLive(true)
	switch {
	case m.turn.cancelledBy != "":
		m.printLine(m.st.notice.Render("turn cancelled (" + m.turn.cancelledBy + ")"))
	case msg.err != nil || m.turn.errText != "":
		m.printLine(m.st.errText.Render(describeError(msg.err, m.turn.errText)))
		if msg.unsent {
			m.printInfo("the prompt was not kept: up, enter sends it again")
		}
	}
	m.busy = false
	m.turn = turnState{}
	m.stats = m.rt.stats()
	m.approval, m.pending = nil, nil
	m.ask, m.asks = nil, nil
	m.subagents = nil
	return tea.Batch(m.drain(), m.countNotes())
}

// drain runs the next queued line; a slash command that starts no turn
// lets the one after it run too, so the queue never stalls.
func (m *Model) drain() tea.Cmd {
	var cmds []tea.Cmd
	for len(m.queue) > 0 && !m.busy && !m.quitting {
		next := m.queue[0]
		m.queue = m.queue[1:]
		cmds = append(cmds, m.run(next))
	}
	return tea.Batch(cmds...)
}

// showApproval opens the prompt for a gated call (or queues it behind the
// one shown).
func (m *Model) showApproval(msg approvalMsg) tea.Cmd {
	if m.approval != nil {
		m.pending = append(m.pending, msg)
		return nil
	}
	m.endReasoning()
	m.flushLive(true)
	m.approval = newApprovalPrompt(msg)
	return nil
}

// decide answers the shown approval and opens the next one.
func (m *Model) decide(d agent.Decision) tea.Cmd {
	a := m.approval
	if a == nil {
		return nil
	}
	m.approval = nil
	cmds := []tea.Cmd{answer(a.msg.reply, d)}
	if d == agent.Always {
		// Later calls of this tool in the same step are allowed already.
		var keep []approvalMsg
		for _, p := range m.pending {
			if p.req.Tool == a.msg.req.Tool {
				cmds = append(cmds, answer(p.reply, agent.Always))
				continue
			}
			keep = append(keep, p)
		}
		m.pending = keep
	}
	if len(m.pending) > 0 {
		next := m.pending[0]
		m.pending = m.pending[1:]
		cmds = append(cmds, m.showApproval(next))
	}
	return tea.Batch(cmds...)
}

// dropApproval removes an approval whose turn was aborted.
func (m *Model) dropApproval(id string) {
	if m.approval != nil && m.approval.msg.req.ID == id {
		m.approval = nil
		if len(m.pending) > 0 {
			next := m.pending[0]
			m.pending = m.pending[1:]
			m.approval = newApprovalPrompt(next)
		}
		return
	}
	for i, p := range m.pending {
		if p.req.ID == id {
			m.pending = append(m.pending[:i], m.pending[i+1:]...)
			return
		}
	}
}

// compacted reports /compact.
func (m *Model) compacted(msg compactedMsg) {
	switch {
	case msg.err != nil:
		m.printError(msg.err.Error())
	case msg.before == 0:
		m.printInfo("nothing to compact yet")
	default:
		m.printInfo(fmt.Sprintf("compacted %d messages into %d", msg.before, msg.after))
	}
	m.stats = m.rt.stats()
}

// countNotes reads the number of memory notes for the header, off the
// Update path (nil with memory off).
func (m *Model) countNotes() tea.Cmd {
	if m.rt.sess.Memory() == nil {
		return nil
	}
	return m.rt.readNotes(false)
}

// memoryCompacted reports /memory.
func (m *Model) memoryCompacted(msg memoryMsg) tea.Cmd {
	switch {
	case msg.err != nil:
		m.printError(msg.err.Error())
	case msg.res.Changed:
		m.printInfo(fmt.Sprintf("memory compacted: %d entries into %d", msg.res.Before, msg.res.After))
	default:
		m.printInfo(fmt.Sprintf("memory left as is (%d entries): %s", msg.res.Before, msg.res.Reason))
	}
	return m.countNotes()
}
