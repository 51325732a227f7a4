package orchestrator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
	"github.com/shiroagent/shiro/sandbox/publish"
	"github.com/shiroagent/shiro/tools"
	"github.com/shiroagent/shiro/tools/gitrepo"
	"github.com/shiroagent/shiro/tools/jobs"
)

// SessionOptions assemble a session.
type SessionOptions struct {
	Workspace string
	// Opened is the workspace opened once for the run (its Path is
	// Workspace): the session reads and writes through it and leaves it
	// open. Nil opens Workspace here, and Close closes it.
	Opened  *workspace.Workspace
	Model   llm.Model
	Sandbox SandboxConfig
	// ToolSets decides which built-in tools are offered.
	ToolSets tools.EnabledSets
	Yolo     bool
	// Plugins names the built-in plugins to enable.
	Plugins []string
	// Events receives everything the session tells its front end, from
	// several goroutines (see Event); nil drops it. The session gives the
	// sandbox its progress writer, so Sandbox.Progress is not used.
	Events func(Event)
	// Asker is the person who answers approvals, the ask tool and the
	// egress proxy's questions; a session with one is interactive. Nil
	// (headless) refuses them all (see Asker).
	Asker Asker
	// NoInstructions skips AGENTS.md and friends.
	NoInstructions bool
	// Instructions are the instruction files loaded already (the chat UI
	// loads them to show their names); nil loads them. Their notices
	// join the session's.
	Instructions   *InstructionSet
	MaxSteps       int
	PruneThreshold int
	// Variant names the agent variant ("" is default). Reasoning, when
	// not empty, overrides the variant's thinking level (the --think flag
	// or the thinking key).
	Variant   string
	Reasoning llm.Reasoning
	// Store, when set, keeps the session's record: the session saves it as
	// the history changes and as requests are billed. Record is the record
	// to continue (a resumed session: its messages, task list and totals;
	// an empty one starts a new record). A failed save is a SaveErrorEvent.
	Store  *store.Store
	Record store.Record
	// History resumes an earlier conversation (without a Record).
	History []llm.Message

	// MCPServers are the user's MCP servers (run on the host) and
	// ProjectMCPServers the project's (stdio servers run in the sandbox,
	// remote ones are refused), name → the server's JSON object. NoMCP
	// skips them all. A server that fails is a NoticeEvent.
	MCPServers, ProjectMCPServers map[string]json.RawMessage
	NoMCP                         bool

	// DataDir holds per-project memory ("" leaves memory off).
	DataDir string
	// UserSkillsDir holds the user's skills ("" for none).
	UserSkillsDir string
	// NoMemory, NoSkills and NoSubagent leave out memory, skills and the
	// task tool.
	NoMemory, NoSkills, NoSubagent bool
	// Todos is a saved task list to restore (store.Record.Todos).
	Todos json.RawMessage
	// SessionID names the session's checkpoints (the session record's
	// id). With a DataDir, each turn that may change the workspace and
	// each approved mutating call is checkpointed in the data directory,
	// unless NoCheckpoints.
	SessionID     string
	NoCheckpoints bool
}

// Session is one conversation with its workspace, sandbox and tools.
type Session struct {
	mu       sync.Mutex // guards variant, runStart, turns
	ws       string
	root     *os.Root
	gate     *hostwrite.Gate      // every write into the workspace
	opened   *workspace.Workspace // closed by Close when the session opened it
	sandbox  *Lazy
	env      *tools.Env
	builtins []tools.Tool
	sets     tools.EnabledSets
	plugins  []agent.Plugin
	// pluginErrors name the plugins that did not resolve.
	pluginErrors []string
	agent        *agent.Agent
	// Session tools and their state.
	todos        *sessiontools.TodoList
	memory       *sessiontools.Memory // nil with memory off
	skills       []sessiontools.Skill
	sessionTools []agent.Tool
	mcp          *sessionMCP   // nil without MCP servers
	cp           *checkpoints  // nil without checkpoints
	jobs         *jobs.Manager // the background commands (jobs.go)
	copy         *sessionCopy  // nil unless the sandbox works on a copy
	events       func(Event)   // the front end's sink; nil drops
	book         *book
	// The agent variant and the thinking level in force; maxSteps is the
	// session's own cap (a variant's replaces it).
	variant  agent.Variant
	maxSteps int
	// runStart is when Announce started the run's clock, turns the
	// prompts Send took since.
	runStart time.Time
	turns    int
	// netMu guards network, the connections the sandbox made (ask mode).
	netMu   sync.Mutex
	network []egress.Record
	// ports are the published ports (ports.go).
	ports *publish.Publisher
	// Notices collected while the session was assembled (unknown plugins,
	// instruction files and skills that were refused).
	Notices []string
}

// NewSession opens the workspace and assembles the agent. The sandbox opens
// lazily, on the first command.
func NewSession(opts SessionOptions) (*Session, error) {
	// One open of the workspace, and its one write gate for everything the
	// session writes into it: the file tools, undo, copy mode's apply.
	ws, owned := opts.Opened, (*workspace.Workspace)(nil)
	if ws == nil {
		var err error
		if ws, err = workspace.Open(opts.Workspace); err != nil {
			return nil, err
		}
		owned = ws
	}
	root, gate := ws.Root(), ws.Gate()
	closeWS := func() {
		if owned != nil {
			owned.Close()
		}
	}
	variant, err := agent.ResolveVariant(opts.Variant, string(opts.Reasoning))
	if err != nil {
		closeWS()
		return nil, err
	}
	s := &Session{
		ws:       opts.Workspace,
		root:     root,
		gate:     gate,
		opened:   owned,
		builtins: tools.Builtins(),
		sets:     opts.ToolSets,
		variant:  variant,
		maxSteps: opts.MaxSteps,
		events:   opts.Events,
	}
	sc := opts.Sandbox
	sc.Opened = ws
	sc.Progress = progressWriter{s}
	if opts.Asker != nil {
		sc.askHost = opts.Asker.AskHost
	}
	sc.onConnection = func(r egress.Record) {
		s.netMu.Lock()
		s.network = append(s.network, r)
		s.netMu.Unlock()
		if s.book != nil {
			s.book.save(nil, false)
		}
		s.publish(NetworkEvent{r})
	}
	sc.tagMoved = func(m sandbox.TagMove) { s.publish(ImageMovedEvent{m}) }
	s.sandbox = NewLazy(sc)
	// The record says which image the session ran, exactly.
	s.sandbox.kept = func(info sandbox.Info) { s.book.setImage(info.Image, info.ImageDigest) }
	if s.sets == nil {
		s.sets, _ = tools.ParseToolSets(nil, false)
	}
	s.jobs = s.newJobs()
	s.env = &tools.Env{Workspace: opts.Workspace, Root: root, Gate: gate, Sandbox: s.sandbox, GoGit: opts.Sandbox.NoSandbox, OpenGit: gitrepo.Opener, Jobs: s.jobs}
	if opts.DataDir != "" && !opts.NoCheckpoints {
		st, err := OpenCheckpoints(opts.DataDir, opts.Workspace, root, gate)
		if err != nil {
			s.Notices = append(s.Notices, fmt.Sprintf("checkpoints are off (no /undo): %v", err))
		} else {
			s.cp = &checkpoints{store: st, session: opts.SessionID}
		}
	}
	if sc.CopyMode() {
		if s.copy, err = newSessionCopy(opts.DataDir, sc, root, gate, s.cp, s.sandbox); err != nil {
			if s.cp != nil {
				s.cp.store.Close()
			}
			closeWS()
			return nil, err
		}
	}
	plugins, unknown := agent.BuiltinsIn(opts.Workspace, opts.Plugins)
	s.plugins = plugins
	for _, n := range unknown {
		s.pluginErrors = append(s.pluginErrors, fmt.Sprintf("plugin %q: no such plugin", n))
	}
	s.Notices = append(s.Notices, s.pluginErrors...)
	instructions := ""
	if !opts.NoInstructions {
		set := opts.Instructions
		if set == nil {
			loaded := LoadInstructions(ws)
			set = &loaded
		}
		instructions = InstructionsBlock(set.Files)
		s.Notices = append(s.Notices, set.Notices...)
	}
	if opts.History == nil {
		opts.History = opts.Record.Messages
	}
	if opts.Todos == nil {
		opts.Todos = opts.Record.Todos
	}
	s.addSessionTools(opts)
	s.book = newBook(opts.Store, opts.Record, func(err error) { s.publish(SaveErrorEvent{err}) }, s.todos.JSON, s.Network)
	if s.cp != nil && opts.SessionID == "" {
		s.SetSessionID(s.Saved().ID) // the checkpoints follow the record
	}
	autoApprove := make([]string, len(s.sessionTools))
	for i, t := range s.sessionTools {
		autoApprove[i] = t.Name()
	}
	var approver agent.Approver
	if opts.Asker != nil {
		approver = s.approver(opts.Asker.Approve)
	}
	a, err := agent.New(agent.Config{
		Model: opts.Model,
		Tools: s.offered,
		System: func(offered []agent.Tool) string {
			in := PromptInput{Workspace: s.ws, Sandboxed: !opts.Sandbox.NoSandbox, Interactive: opts.Asker != nil, Instructions: instructions, Variant: s.Variant().Appendix, Appendices: agent.Appendices(plugins)}
			in.Guidance = map[string]string{}
			for _, t := range offered {
				in.Offered = append(in.Offered, t.Name())
				in.Guidance[t.Name()] = guidanceOf(t)
				if agent.IsGated(t) {
					in.Gated = append(in.Gated, t.Name())
				}
			}
			// A section naming a tool goes in only while that tool is offered.
			if s.memory != nil && slices.Contains(in.Offered, "recall") {
				in.Memory = s.memory.Block()
			}
			if slices.Contains(in.Offered, "skill") {
				in.Skills = sessiontools.SkillsCatalogue(s.skills)
			}
			if slices.Contains(in.Offered, "todo_write") {
				in.Todos = s.todos.Block()
			}
			return SystemPrompt(in)
		},
		AutoApprove:    autoApprove,
		Approver:       approver,
		Yolo:           opts.Yolo,
		Plugins:        withoutTools(plugins), // their tools are in s.offered
		MaxSteps:       cmp.Or(variant.MaxSteps, opts.MaxSteps),
		PruneThreshold: opts.PruneThreshold,
		Reasoning:      variant.Thinking,
		OnChange: func(msgs []llm.Message) {
			s.book.save(msgs, true)
			s.publish(HistoryEvent{msgs})
		},
		OnUsage: func(u llm.Usage) {
			total := s.book.add(s.agent.Model().Info().Model, u)
			s.publish(UsageEvent{Request: u, Total: total})
		},
	})
	if err != nil {
		if s.cp != nil {
			s.cp.store.Close()
		}
		closeWS()
		return nil, err
	}
	a.Replace(opts.History)
	a.SetUsage(llm.Usage{InputTokens: opts.Record.InputTokens, OutputTokens: opts.Record.OutputTokens})
	s.agent = a
	if err := s.openPorts(opts); err != nil {
		s.Close()
		return nil, err
	}
	s.startMCP(opts)
	return s, nil
}

// addSessionTools assembles the session tools: todo_write always;
// remember, recall and forget with a data directory and memory on; skill
// when at least one skill loads; ask when a person can answer; task unless
// the subagent is off.
func (s *Session) addSessionTools(opts SessionOptions) {
	s.todos = &sessiontools.TodoList{OnChange: func(items []sessiontools.Todo) { s.publish(TodosEvent{items}) }}
	s.todos.Restore(opts.Todos)
	s.sessionTools = []agent.Tool{sessiontools.TodoWrite{List: s.todos}}
	if !opts.NoMemory && opts.DataDir != "" {
		s.memory = sessiontools.NewMemory(opts.DataDir, config.ProjectKey(opts.Workspace))
		s.sessionTools = append(s.sessionTools, sessiontools.MemoryTools(s.memory)...)
	}
	if !opts.NoSkills {
		var notices []string
		s.skills, notices = sessiontools.LoadSkills(sessiontools.DefaultSkillSources(opts.UserSkillsDir, s.root))
		s.Notices = append(s.Notices, notices...)
		if len(s.skills) > 0 {
			s.sessionTools = append(s.sessionTools, sessiontools.SkillTool{Skills: s.skills})
		}
	}
	if opts.Asker != nil {
		s.sessionTools = append(s.sessionTools, sessiontools.Ask{Asker: opts.Asker})
	}
	if !opts.NoSubagent {
		s.sessionTools = append(s.sessionTools, &sessiontools.Task{
			Model:    func() llm.Model { return s.agent.Model() },
			Tools:    s.builtinTools,
			Level:    func() llm.Reasoning { return s.Variant().Thinking },
			Usage:    func(u llm.Usage) { s.agent.AddUsage(u) },
			Progress: func(ev sessiontools.SubagentEvent) { s.publish(SubagentEvent{ev}) },
		})
	}
}

// offered is what the agent is offered, decided here and only here: the
// built-in tools of the enabled sets, adapted, then the session tools, the
// tools of the MCP servers connected so far (which belong to no set) and the
// plugins' tools, first name wins, less what the agent variant withholds.
func (s *Session) offered() []agent.Tool {
	list := s.offeredList()
	out := make([]agent.Tool, len(list))
	for i, o := range list {
		out[i] = o.tool
	}
	return out
}

type offeredTool struct {
	tool agent.Tool
	kind string
}

func (s *Session) offeredList() []offeredTool {
	v := s.Variant()
	var out []offeredTool
	seen := map[string]bool{}
	add := func(t agent.Tool, kind string) {
		if n := t.Name(); !seen[n] && v.Allows(n) {
			seen[n] = true
			out = append(out, offeredTool{tool: t, kind: kind})
		}
	}
	for _, t := range s.offeredBuiltins() {
		add(toolAdapter{t: t, env: s.env, cp: s.cp, notes: s.withJobNotes}, string(t.Set()))
	}
	for _, t := range s.sessionTools {
		add(t, KindSession)
	}
	for _, t := range s.mcpTools() {
		add(t, KindMCP)
	}
	for _, p := range s.plugins {
		for _, t := range p.Tools {
			add(t, KindPlugin)
		}
	}
	return out
}

// withoutTools copies plugins without their tools, which the session
// offers itself (so that a variant can withhold them).
func withoutTools(plugins []agent.Plugin) []agent.Plugin {
	out := make([]agent.Plugin, len(plugins))
	for i, p := range plugins {
		p.Tools = nil
		out[i] = p
	}
	return out
}

// builtinTools adapts the offered built-in tools for the agent.
func (s *Session) builtinTools() []agent.Tool { return s.adapt(s.offeredBuiltins()) }

// offeredBuiltins are the built-in tools of the enabled sets, the file
// tools running on the sandbox's copy in copy mode.
func (s *Session) offeredBuiltins() []tools.Tool {
	list := tools.Offered(s.builtins, s.sets)
	if s.copy != nil {
		list = s.copy.wrap(list)
	}
	return list
}

// adapt wraps tools of the tools package (built-in, MCP) for the agent.
func (s *Session) adapt(list []tools.Tool) []agent.Tool {
	out := make([]agent.Tool, len(list))
	for i, t := range list {
		out[i] = toolAdapter{t: t, env: s.env, cp: s.cp}
	}
	return out
}

// Todos is the session's task list (for a task panel and for saving).
func (s *Session) Todos() *sessiontools.TodoList { return s.todos }

// TodosJSON is the task list as saved in session records (nil without one).
func (s *Session) TodosJSON() json.RawMessage {
	if s.todos == nil {
		return nil
	}
	return s.todos.JSON()
}

// Memory is the project's memory, nil when memory is off.
func (s *Session) Memory() *sessiontools.Memory { return s.memory }

// Plugins are the enabled plugins, in order.
func (s *Session) Plugins() []agent.Plugin { return s.plugins }

// PluginErrors are the messages of plugin names that did not resolve.
func (s *Session) PluginErrors() []string { return s.pluginErrors }

// Skills are the loaded skills, sorted by name.
func (s *Session) Skills() []sessiontools.Skill { return s.skills }

// Kinds of OfferedTool besides the built-in tools' sets.
const (
	KindSession = "session"
	KindMCP     = "mcp"
	KindPlugin  = "plugin"
)

// OfferedTool describes a tool the model is offered (/tools, the header).
type OfferedTool struct {
	Name string
	// Kind is a built-in tool's set, else KindSession, KindMCP or
	// KindPlugin.
	Kind string
	// Gated tools ask before each call.
	Gated bool
}

// Offered lists every tool the model is offered on the next step, as the
// agent is offered them.
func (s *Session) Offered() []OfferedTool {
	var out []OfferedTool
	for _, o := range s.offeredList() {
		out = append(out, OfferedTool{Name: o.tool.Name(), Kind: o.kind, Gated: agent.IsGated(o.tool)})
	}
	return out
}

// Variant is the agent variant in force, its Thinking the level in force.
func (s *Session) Variant() agent.Variant {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.variant
}

// SetVariant switches the agent variant from the next model call, with the
// variant's own thinking level (a later SetThinking overrides it).
func (s *Session) SetVariant(name string) error {
	v, err := agent.ResolveVariant(name, "")
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.variant = v
	s.mu.Unlock()
	s.agent.SetReasoning(v.Thinking)
	s.agent.SetMaxSteps(cmp.Or(v.MaxSteps, s.maxSteps))
	return nil
}

// SetThinking sets the thinking level from the next model call.
func (s *Session) SetThinking(level string) error {
	l, err := agent.ParseThinking(level)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.variant.Thinking = l
	s.mu.Unlock()
	s.agent.SetReasoning(l)
	return nil
}

// StartSandbox opens the sandbox now rather than on the first command (the
// TUI starts it in the background at start-up) and describes it. Commands
// that arrive meanwhile wait for the same opening.
func (s *Session) StartSandbox(ctx context.Context) (sandbox.Info, error) {
	sb, err := s.sandbox.Get(ctx)
	if err != nil {
		return sandbox.Info{}, err
	}
	return sb.Info(), nil
}

// TakeNewImage takes the image a moved tag names now (the user said yes
// to an ImageMovedEvent): the sandbox session closes, and the sandbox
// opens again, now, pulling the tag, on a new container. What ran in the
// old session (background processes) ends with it.
func (s *Session) TakeNewImage(ctx context.Context) (sandbox.Info, error) {
	if err := s.sandbox.Reopen(true); err != nil {
		return sandbox.Info{}, err
	}
	return s.StartSandbox(ctx)
}

// Network returns the connections the sandbox made so far, in the order
// they were decided or closed.
func (s *Session) Network() []egress.Record {
	s.netMu.Lock()
	defer s.netMu.Unlock()
	return slices.Clone(s.network)
}

// Workspace is the session's workspace directory.
func (s *Session) Workspace() string { return s.ws }

// Send runs one turn, after waiting for the MCP servers still starting
// (bounded; see awaitMCP).
//
// Its events go to the sink as TurnEvents, in order, before Send returns.
// A turn that may change the workspace is checkpointed before it starts,
// before each approved mutating call and when it ends (see /undo); a
// checkpoint that fails is reported as a notice and the turn goes on.
func (s *Session) Send(ctx context.Context, prompt string) error {
	emit := func(e agent.Event) { s.publish(TurnEvent{e}) }
	s.mu.Lock()
	s.turns++
	s.mu.Unlock()
	s.awaitMCP(ctx)
	if s.copy != nil {
		notice := func(n string) { emit(agent.Event{Type: agent.EventNotice, Text: n}) }
		for _, n := range s.copy.beforeTurn(ctx, notice) {
			notice(n)
		}
		defer s.copy.afterTurn()
	}
	if s.cp != nil && mayChange(s.offered()) {
		s.cp.begin(ctx, len(s.agent.Messages()), prompt)
		defer func() {
			for _, e := range s.cp.end(ctx) {
				emit(agent.Event{Type: agent.EventNotice, Text: "checkpoint failed (this turn may not be undoable): " + e})
			}
		}()
	}
	return s.agent.Send(ctx, s.withJobNotes(prompt), emit)
}

// Close closes the MCP servers, releases the sandbox session (killing what
// it started), the checkpoint store and the workspace.
func (s *Session) Close() error {
	// Ports first (no connection outlives the sandbox), then the jobs,
	// then the sandbox: the connections that close with it are recorded
	// before the record's last save.
	s.closePorts()
	sbErr := errors.Join(s.closeMCP(), s.jobs.Close(), s.sandbox.Close())
	var cpErr error
	if s.copy != nil {
		cpErr = s.copy.close()
	}
	if s.cp != nil {
		cpErr = errors.Join(cpErr, s.cp.store.Close())
	}
	var wsErr error
	if s.opened != nil {
		wsErr = s.opened.Close()
	}
	return errors.Join(s.book.close(), sbErr, cpErr, wsErr)
}

// toolAdapter runs a built-in tool for the agent, with live output.
type toolAdapter struct {
	t   tools.Tool
	env *tools.Env
	cp  *checkpoints // nil without checkpoints
	// notes, when set, adds to each result the notes of the background
	// jobs that ended (the main agent's tools; a subagent's have none).
	notes func(string) string
}

func (a toolAdapter) Name() string            { return a.t.Name() }
func (a toolAdapter) Description() string     { return a.t.Description() }
func (a toolAdapter) Guidance() string        { return guidanceOf(a.t) }
func (a toolAdapter) Schema() json.RawMessage { return a.t.Schema() }
func (a toolAdapter) Gated() bool             { return a.t.Gated() } // agent.IsGated adds the mcp__ rule

func (a toolAdapter) Run(ctx context.Context, input json.RawMessage, output func(string)) (agent.Result, error) {
	if a.cp != nil && agent.IsGated(a) {
		a.cp.beforeCall(ctx, a.t.Name()) // the call is approved: Run is only called then
	}
	env := *a.env
	env.Output = func(_ string, chunk []byte) { output(string(chunk)) }
	if c, ok := agent.CallFrom(ctx); ok {
		ctx = sandbox.WithCaller(ctx, sandbox.Caller{ID: c.ID, Tool: c.Name, Summary: callSummary(input)})
	}
	res, err := a.t.Run(ctx, &env, input)
	out := agent.Result{Output: res.Text, IsError: res.IsError}
	if a.notes != nil && err == nil {
		out.Output = a.notes(out.Output)
	}
	if e := res.Exit; e != nil {
		out.Exit = &agent.Exit{Code: e.Code, TimedOut: e.TimedOut, Interrupted: e.Interrupted, Killed: e.Killed, Signal: e.Signal}
	}
	return out, err
}

// Check implements agent.Checker for the tools that can check a call
// before the user is asked (the edit tools).
func (a toolAdapter) Check(ctx context.Context, input json.RawMessage) string {
	c, ok := a.t.(tools.Checker)
	if !ok {
		return ""
	}
	return c.Check(ctx, a.env, input)
}

// callSummary is a short form of a tool call's input for the network
// record: its command, else its JSON, cut at 120 characters.
func callSummary(input json.RawMessage) string {
	var in struct {
		Command string `json:"command"`
	}
	s := string(input)
	if json.Unmarshal(input, &in) == nil && in.Command != "" {
		s = in.Command
	}
	if r := []rune(s); len(r) > 120 {
		s = string(r[:120]) + "..."
	}
	return s
}
