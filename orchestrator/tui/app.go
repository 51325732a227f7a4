package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/orchestrator/workcopy"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
	"github.com/shiroagent/shiro/tools/mcp"
)

// Session is what the UI drives; *orchestrator.Session implements it.
type Session interface {
	// Send runs one turn; its events reach the App's Events as
	// orchestrator.TurnEvents, in order, before it returns.
	Send(ctx context.Context, prompt string) error
	// The history, the model and the context estimate.
	Messages() []llm.Message
	Model() llm.Model
	SetModel(llm.Model)
	ContextTokens() int
	MeasureOverhead()
	// InterruptTools kills the commands in flight (ctrl-c).
	InterruptTools() []string
	// Allowed and AllowedPrefixes are what "always" granted (/tools).
	Allowed(name string) bool
	AllowedPrefixes(name string) [][]string
	// Unsend takes back a prompt the model never answered.
	Unsend(text string) bool
	// Usage is what every request of the session cost.
	Usage() orchestrator.Usage
	// Saved describes the session's record; Save writes it now, Resume
	// switches to another, Clear starts a new one.
	Saved() orchestrator.Saved
	Save() (string, error)
	Resume(query string) (store.Record, error)
	Clear() (string, error)
	// Variant is the agent variant in force (its Thinking the level);
	// SetVariant and SetThinking switch from the next model call.
	Variant() agent.Variant
	SetVariant(name string) error
	SetThinking(level string) error
	// Offered lists the tools the model is offered next.
	Offered() []orchestrator.OfferedTool
	// StartSandbox opens the sandbox (a prompt sent meanwhile waits for it).
	StartSandbox(ctx context.Context) (sandbox.Info, error)
	// TakeNewImage opens the sandbox again on the image a moved tag names
	// now (a yes to an ImageMovedEvent).
	TakeNewImage(ctx context.Context) (sandbox.Info, error)
	// Compact replaces the history with a model-written summary.
	Compact(ctx context.Context) (before, after int, err error)
	// Todos is the task list (the task panel, /todos).
	Todos() *sessiontools.TodoList
	// Memory is the project's memory, nil when memory is off (/notes).
	Memory() *sessiontools.Memory
	// CompactMemory merges never-recalled notes with the model (/memory).
	CompactMemory(ctx context.Context) (sessiontools.MemoryCompaction, error)
	// Skills are the loaded skills (/skills).
	Skills() []sessiontools.Skill
	// Plugins are the enabled plugins and PluginErrors the names that did
	// not resolve (/plugins).
	Plugins() []agent.Plugin
	PluginErrors() []string
	// MCPStatus describes the MCP servers; WaitMCP returns once every
	// one connected or failed (/mcp, the header).
	MCPStatus() []mcp.ServerStatus
	WaitMCP(ctx context.Context) error
	// Network is every connection of the sandbox so far (/network).
	Network() []egress.Record
	// CopyMode says the sandbox works on its own copy of the workspace:
	// PreviewFile reads a file of that copy (an approval's diff); Changes,
	// ChangePatch and Apply are /changes and /apply.
	CopyMode() bool
	PreviewFile(ctx context.Context, p string) (content string, exists bool, problem string, err error)
	Changes(ctx context.Context) (workcopy.Changes, error)
	ChangePatch(ctx context.Context, f checkpoint.FileChange) (string, error)
	Apply(ctx context.Context, ch workcopy.Changes, paths []string) (workcopy.Applied, error)
	// Checkpoints is the checkpoint store, nil with checkpoints off;
	// PlanUndo, Undo and Diff are /undo and /diff.
	Checkpoints() *checkpoint.Store
	PlanUndo(ctx context.Context, n int) (*orchestrator.UndoPlan, error)
	Undo(ctx context.Context, p *orchestrator.UndoPlan, overwriteUser bool) ([]checkpoint.FileChange, []string, bool, error)
	Diff(ctx context.Context, turn int) ([]orchestrator.FileDiff, error)
}

// Session's methods are *orchestrator.Session's.
var _ Session = (*orchestrator.Session)(nil)

// plainSession answers the capabilities of Session for a session that has
// none of them: no copy of the workspace, no checkpoints, no connections.
// The bench's session and the tests' fake embed it.
type plainSession struct{}

func (plainSession) Network() []egress.Record { return nil }
func (plainSession) CopyMode() bool           { return false }
func (plainSession) PreviewFile(context.Context, string) (string, bool, string, error) {
	return "", false, "", orchestrator.ErrNotCopyMode
}
func (plainSession) Changes(context.Context) (workcopy.Changes, error) {
	return workcopy.Changes{}, orchestrator.ErrNotCopyMode
}
func (plainSession) ChangePatch(context.Context, checkpoint.FileChange) (string, error) {
	return "", orchestrator.ErrNotCopyMode
}
func (plainSession) Apply(context.Context, workcopy.Changes, []string) (workcopy.Applied, error) {
	return workcopy.Applied{}, orchestrator.ErrNotCopyMode
}
func (plainSession) Checkpoints() *checkpoint.Store { return nil }
func (plainSession) TakeNewImage(context.Context) (sandbox.Info, error) {
	return sandbox.Info{}, errors.New("this session cannot change its image")
}
func (plainSession) PlanUndo(context.Context, int) (*orchestrator.UndoPlan, error) {
	return nil, orchestrator.ErrNoCheckpoints
}
func (plainSession) Undo(context.Context, *orchestrator.UndoPlan, bool) ([]checkpoint.FileChange, []string, bool, error) {
	return nil, nil, false, orchestrator.ErrNoCheckpoints
}
func (plainSession) Diff(context.Context, int) ([]orchestrator.FileDiff, error) {
	return nil, orchestrator.ErrNoCheckpoints
}

// Options configure the UI.
type Options struct {
	Version   string
	Workspace string
	// Opened is the workspace opened once for the run (its Path is
	// Workspace): previews and the @ picker read through its root. The
	// caller closes it after the UI.
	Opened *workspace.Workspace
	Paths  config.Paths
	// Config is the resolved configuration; model switches and onboarding
	// start from it.
	Config config.Config
	// Configured is false when the provider cannot be used (no API key):
	// onboarding opens and prompts are refused until it is done.
	Configured bool
	// Store keeps sessions; Record is this session's (a resumed one carries
	// its messages, which the session already holds).
	Store  *store.Store
	Record store.Record
	// SandboxImage names the sandbox shown in the header ("" with
	// NoSandbox).
	SandboxImage string
	// Notices are shown in the header (config warnings, unknown plugins).
	Notices []string
	// Instructions are the names of the loaded instruction files, and
	// InstructionsRefused the notices of those that were not read (a
	// symlink out of the repository, a FIFO), for /context.
	Instructions        []string
	InstructionsRefused []string
	// Prompt is submitted at start.
	Prompt string
	// Input and Output default to the process's stdin and stdout.
	Input  io.Reader
	Output io.Writer
}

// Result is what a finished UI leaves behind, for the farewell.
type Result struct {
	SessionID string
	Messages  int
	Title     string
}

// ErrForceQuit is Run's error after a third ctrl-c in a row: the terminal is
// restored but the turn and the sandbox were not waited for.
var ErrForceQuit = errors.New("forced quit")

// App is the interactive UI of one session. Make it before the session
// (hand its Events and Asker to the session's options), then Run it.
type App struct {
	opts Options
	root *os.Root // the workspace, read for approval previews

	pump   chan tea.Msg  // to the program, in order, through one goroutine
	stop   chan struct{} // closed when Run ends: nothing waits on the UI then
	out    *printQueue   // transcript lines to print above the program
	reflow *reflowWriter // the terminal, as Bubble Tea writes to it
	sess   Session       // set by Run
	once   sync.Once

	askSeq   atomic.Int64 // numbers the questions of the ask tool
	turn     atomic.Int64 // the UI's turn whose Send runs: its TurnEvents' turn
	progress *progressWriter
}

// New prepares the UI.
func New(opts Options) (*App, error) {
	if opts.Opened == nil {
		return nil, errors.New("the UI needs the opened workspace")
	}
	root := opts.Opened.Root()
	if opts.Store == nil {
		opts.Store = &store.Store{Dir: opts.Paths.SessionsDir()}
	}
	if opts.Input == nil {
		opts.Input = os.Stdin
	}
	if opts.Output == nil {
		opts.Output = os.Stdout
	}
	a := &App{
		opts:   opts,
		root:   root,
		pump:   make(chan tea.Msg, 1024),
		stop:   make(chan struct{}),
		out:    newPrintQueue(),
		reflow: newReflowWriter(opts.Output),
	}
	a.progress = &progressWriter{app: a}
	return a, nil
}

// preview reads a file an edit would change, for its approval's diff: in
// copy mode the sandbox's copy of it.
func (a *App) preview(p string) (string, bool, string) {
	if a.sess.CopyMode() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		content, exists, problem, err := a.sess.PreviewFile(ctx, p)
		if err != nil {
			return "", false, "cannot read the sandbox's copy: " + err.Error()
		}
		return content, exists, problem
	}
	return confine.ReadPreview(a.root, a.opts.Workspace, p)
}

// AddNotices adds lines to the header (call before Run).
func (a *App) AddNotices(notices ...string) { a.opts.Notices = append(a.opts.Notices, notices...) }

// Close releases what New took when Run is not called (the session could
// not be built). Run closes them itself.
func (a *App) Close() {
	a.once.Do(func() { close(a.stop) })
}

// post hands msg to the pump; false once the UI has stopped.
func (a *App) post(msg tea.Msg) bool {
	select {
	case <-a.stop:
		return false
	default:
	}
	select {
	case a.pump <- msg:
		return true
	case <-a.stop:
		return false
	}
}

// Events shows what the session publishes (hand it to the session's
// options): its turns' events, notices, the sandbox's progress, the task
// list, the subagents and failed saves. It never blocks for long: each
// event becomes one message of the pump. The history, the usage and the
// connections are read when they are drawn, so their events are dropped.
func (a *App) Events(e orchestrator.Event) {
	switch e := e.(type) {
	case orchestrator.TurnEvent:
		a.post(eventMsg{turn: int(a.turn.Load()), ev: e.Event})
	case orchestrator.NoticeEvent:
		a.Notice(e.Text)
	case orchestrator.ProgressEvent:
		if e.Total != nil {
			a.post(totalMsg{total: *e.Total})
		}
		a.progress.Write([]byte(e.Text))
	case orchestrator.TodosEvent:
		a.post(todosMsg{items: e.Items})
	case orchestrator.SubagentEvent:
		a.post(subagentMsg{ev: e.SubagentEvent})
	case orchestrator.SaveErrorEvent:
		a.post(noticeMsg{text: "saving the session failed: " + e.Err.Error()})
	case orchestrator.ImageMovedEvent:
		a.post(imageMovedMsg{move: e.TagMove})
	case orchestrator.JobEvent:
		a.jobEvent(e)
	}
}

// Notice shows a line from the orchestrator (an endpoint fallback).
func (a *App) Notice(text string) { a.post(noticeMsg{text: text}) }

// progressWriter splits the sandbox's progress into lines for the header.
type progressWriter struct {
	app *App
	mu  sync.Mutex
	buf strings.Builder
}

func (w *progressWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	s := w.buf.String()
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(s[:i]); line != "" {
			w.app.post(progressMsg{line: line})
		}
		s = s[i+1:]
	}
	w.buf.Reset()
	w.buf.WriteString(s)
	return len(p), nil
}

// Asker is the user (hand it to the session's options): each question
// blocks its caller until the user answers, the turn is aborted (the
// connection stops waiting), or the UI stops.
func (a *App) Asker() orchestrator.Asker { return asker{a} }

// asker puts the session's questions to the App's user.
type asker struct{ a *App }

func (k asker) Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	return k.a.approve(ctx, req)
}

func (k asker) Ask(ctx context.Context, q sessiontools.Question) ([]string, error) {
	return k.a.ask(ctx, q)
}

func (k asker) AskHost(ctx context.Context, req egress.Request) egress.Answer {
	return k.a.askHost(ctx, req)
}

// errStopped is an approval's error when the UI is gone.
var errStopped = errors.New("the UI has stopped")

func (a *App) approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
	reply := make(chan agent.Decision, 1)
	detail := buildPreview(a.preview, req)
	if !a.post(approvalMsg{req: req, detail: detail, reply: reply}) {
		return agent.Deny, errStopped
	}
	select {
	case d := <-reply:
		return d, nil
	case <-ctx.Done():
		a.post(approvalGoneMsg{id: req.ID})
		return agent.Deny, ctx.Err()
	case <-a.stop:
		return agent.Deny, errStopped
	}
}

// Run shows the UI until the user quits, then waits for everything it
// started and saves the session. It does not close sess.
func (a *App) Run(ctx context.Context, sess Session) (Result, error) {
	select {
	case <-a.stop:
		return Result{}, errors.New("run the UI: it was closed")
	default:
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.sess = sess

	// Ask once, before the program reads the terminal, so that nothing
	// queries the terminal while Bubble Tea owns it.
	lipgloss.SetHasDarkBackground(true)
	st := newStyles(a.opts.Output, termenv.Ascii, true)
	rt := &runtime{app: a, sess: sess, ctx: ctx}
	m := newModel(rt, a.opts, st)

	p := tea.NewProgram(m,
		tea.WithContext(ctx),
		tea.WithInput(a.opts.Input),
		tea.WithOutput(a.reflow.output()),
		tea.WithoutSignalHandler(),
	)
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); a.pumpTo(p) }()
	go func() { defer bg.Done(); a.printTo(p) }()

	final, err := p.Run()
	a.once.Do(func() { close(a.stop) })
	fm, _ := final.(*Model)
	if fm != nil && fm.forced {
		return a.result(), ErrForceQuit
	}
	cancel() // aborts a running turn, a sandbox start, a model listing
	rt.jobs.wait()
	bg.Wait()
	// Lines queued after the last frame go straight to the terminal.
	if rest := a.out.take(); len(rest) > 0 {
		fmt.Fprintln(a.opts.Output, strings.Join(rest, "\n"))
	}
	if _, serr := sess.Save(); serr != nil {
		fmt.Fprintf(a.opts.Output, "shiro: saving the session failed: %v\n", serr)
	}
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		err = nil // the context ended the program (a signal): not a UI failure
	}
	if err != nil {
		return a.result(), fmt.Errorf("run the UI: %w", err)
	}
	return a.result(), nil
}

func (a *App) result() Result {
	if a.sess == nil {
		return Result{SessionID: a.opts.Record.ID}
	}
	s := a.sess.Saved()
	return Result{SessionID: s.ID, Messages: s.Messages, Title: s.Title}
}

// pumpTo forwards posted messages to the program, in order, until the UI
// stops.
func (a *App) pumpTo(p *tea.Program) {
	for {
		select {
		case msg := <-a.pump:
			p.Send(msg)
		case <-a.stop:
			return
		}
	}
}

// printTo prints queued transcript lines above the program, in order.
func (a *App) printTo(p *tea.Program) {
	for {
		select {
		case <-a.out.ready:
			if lines := a.out.take(); len(lines) > 0 {
				p.Send(tea.Println(strings.Join(lines, "\n"))())
			}
		case <-a.stop:
			return
		}
	}
}

// printQueue holds transcript lines until the printer goroutine prints
// them. Update only appends (no IO); one consumer keeps the order.
type printQueue struct {
	mu    sync.Mutex
	lines []string
	ready chan struct{}
	all   []string // every line ever pushed, for tests (kept when keep is set)
	keep  bool
}

func newPrintQueue() *printQueue { return &printQueue{ready: make(chan struct{}, 1)} }

func (q *printQueue) push(lines ...string) {
	q.mu.Lock()
	q.lines = append(q.lines, lines...)
	if q.keep {
		q.all = append(q.all, lines...)
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *printQueue) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	lines := q.lines
	q.lines = nil
	return lines
}

// group tracks the goroutines the runtime starts so that Run can wait for
// them; after wait, nothing new starts.
type group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f in a goroutine unless the group is closed.
func (g *group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

func (g *group) wait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
