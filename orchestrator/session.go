package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools"
)

// SessionOptions assemble a session.
type SessionOptions struct {
	Workspace string
	Model     llm.Model
	Sandbox   SandboxConfig
	// ToolSets decides which built-in tools are offered.
	ToolSets tools.EnabledSets
	Yolo     bool
	// Plugins names the built-in plugins to enable.
	Plugins []string
	// Interactive says a person answers approvals and questions.
	Interactive bool
	Approver    agent.Approver
	// NoInstructions skips AGENTS.md and friends.
	NoInstructions bool
	// Instructions are the instruction files loaded already (the chat UI
	// loads them to show their names); nil loads them. Their notices
	// join the session's.
	Instructions   *InstructionSet
	MaxSteps       int
	PruneThreshold int
	Reasoning      llm.Reasoning
	// History resumes an earlier conversation.
	History []llm.Message
	// OnChange is called after every change of the history.
	OnChange func([]llm.Message)

	// MCPServers are the user's MCP servers (run on the host) and
	// ProjectMCPServers the project's (stdio servers run in the sandbox,
	// remote ones are refused), name → the server's JSON object. NoMCP
	// skips them all.
	MCPServers, ProjectMCPServers map[string]json.RawMessage
	NoMCP                         bool
	// OnNotice, when set, receives the notices that arrive while the
	// session starts (an MCP server that failed), from background
	// goroutines, possibly at the same time; without it they are emitted
	// as notice events by the next Send.
	OnNotice func(string)

	// DataDir holds per-project memory ("" leaves memory off).
	DataDir string
	// UserSkillsDir holds the user's skills ("" for none).
	UserSkillsDir string
	// NoMemory, NoSkills and NoSubagent leave out memory, skills and the
	// task tool.
	NoMemory, NoSkills, NoSubagent bool
	// Todos is a saved task list to restore (store.Record.Todos).
	Todos json.RawMessage
	// OnTodos is called after every change of the task list (the TUI's
	// task panel).
	OnTodos func([]sessiontools.Todo)
	// Asker answers the ask tool; the tool is offered only in an
	// interactive session that has one.
	Asker sessiontools.Asker
	// OnSubagent receives the task subagents' progress (the TUI's
	// subagent panel); it must not block.
	OnSubagent func(sessiontools.SubagentEvent)
	// SessionID names the session's checkpoints (the session record's
	// id). With a DataDir, each turn that may change the workspace and
	// each approved mutating call is checkpointed in the data directory,
	// unless NoCheckpoints.
	SessionID     string
	NoCheckpoints bool
}

// Session is one conversation with its workspace, sandbox and tools.
type Session struct {
	ws       string
	root     *os.Root
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
	mcp          *sessionMCP  // nil without MCP servers
	cp           *checkpoints // nil without checkpoints
	onChange     func([]llm.Message)
	// Notices collected while the session was assembled (unknown plugins,
	// instruction files and skills that were refused).
	Notices []string
}

// NewSession opens the workspace and assembles the agent. The sandbox opens
// lazily, on the first command.
func NewSession(opts SessionOptions) (*Session, error) {
	root, err := os.OpenRoot(opts.Workspace)
	if err != nil {
		return nil, fmt.Errorf("open the workspace: %w", err)
	}
	s := &Session{
		ws:       opts.Workspace,
		root:     root,
		sandbox:  NewLazy(opts.Sandbox),
		builtins: tools.Builtins(),
		sets:     opts.ToolSets,
	}
	if s.sets == nil {
		s.sets, _ = tools.ParseToolSets(nil, false)
	}
	s.env = &tools.Env{Workspace: opts.Workspace, Root: root, Sandbox: s.sandbox, GoGit: opts.Sandbox.NoSandbox}
	s.onChange = opts.OnChange
	if opts.DataDir != "" && !opts.NoCheckpoints {
		st, err := OpenCheckpoints(opts.DataDir, opts.Workspace, root)
		if err != nil {
			s.Notices = append(s.Notices, fmt.Sprintf("checkpoints are off (no /undo): %v", err))
		} else {
			s.cp = &checkpoints{store: st, session: opts.SessionID}
		}
	}
	plugins, unknown := agent.Builtins(opts.Plugins)
	s.plugins = plugins
	for _, n := range unknown {
		s.pluginErrors = append(s.pluginErrors, fmt.Sprintf("plugin %q: no such plugin", n))
	}
	s.Notices = append(s.Notices, s.pluginErrors...)
	instructions := ""
	if !opts.NoInstructions {
		set := opts.Instructions
		if set == nil {
			loaded := LoadInstructions(opts.Workspace)
			set = &loaded
		}
		instructions = InstructionsBlock(set.Files)
		s.Notices = append(s.Notices, set.Notices...)
	}
	s.addSessionTools(opts)
	autoApprove := make([]string, len(s.sessionTools))
	for i, t := range s.sessionTools {
		autoApprove[i] = t.Name()
	}
	a, err := agent.New(agent.Config{
		Model: opts.Model,
		Tools: s.offered,
		System: func(offered []agent.Tool) string {
			in := PromptInput{Workspace: s.ws, Sandboxed: !opts.Sandbox.NoSandbox, Interactive: opts.Interactive, Instructions: instructions, Appendices: agent.Appendices(plugins)}
			for _, t := range offered {
				in.Offered = append(in.Offered, t.Name())
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
		Approver:       opts.Approver,
		Yolo:           opts.Yolo,
		Plugins:        plugins,
		MaxSteps:       opts.MaxSteps,
		PruneThreshold: opts.PruneThreshold,
		Reasoning:      opts.Reasoning,
		OnChange:       opts.OnChange,
	})
	if err != nil {
		if s.cp != nil {
			s.cp.store.Close()
		}
		root.Close()
		return nil, err
	}
	a.Replace(opts.History)
	s.agent = a
	s.startMCP(opts)
	return s, nil
}

// addSessionTools assembles the session tools: todo_write always;
// remember, recall and forget with a data directory and memory on; skill
// when at least one skill loads; ask when a person can answer; task unless
// the subagent is off.
func (s *Session) addSessionTools(opts SessionOptions) {
	s.todos = &sessiontools.TodoList{OnChange: opts.OnTodos}
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
	if opts.Interactive && opts.Asker != nil {
		s.sessionTools = append(s.sessionTools, sessiontools.Ask{Asker: opts.Asker})
	}
	if !opts.NoSubagent {
		s.sessionTools = append(s.sessionTools, &sessiontools.Task{
			Model:     func() llm.Model { return s.agent.Model() },
			Tools:     s.builtinTools,
			Reasoning: opts.Reasoning,
			Progress:  opts.OnSubagent,
		})
	}
}

// offered is what the agent is offered: the built-in tools of the enabled
// sets, adapted, then the session tools and the tools of the MCP servers
// connected so far (which belong to no set).
func (s *Session) offered() []agent.Tool {
	return append(append(s.builtinTools(), s.sessionTools...), s.mcpTools()...)
}

// builtinTools adapts the offered built-in tools for the agent.
func (s *Session) builtinTools() []agent.Tool { return s.adapt(tools.Offered(s.builtins, s.sets)) }

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

// Offered lists every tool the model is offered on the next step: the
// built-in tools of the enabled sets, the session tools, the MCP tools,
// then the plugins' tools (first name wins, as the agent offers them).
func (s *Session) Offered() []OfferedTool {
	var out []OfferedTool
	seen := map[string]bool{}
	add := func(name, kind string, gated bool) {
		if !seen[name] {
			seen[name] = true
			out = append(out, OfferedTool{Name: name, Kind: kind, Gated: gated})
		}
	}
	for _, t := range tools.Offered(s.builtins, s.sets) {
		add(t.Name(), string(t.Set()), tools.IsGated(t))
	}
	for _, t := range s.sessionTools {
		add(t.Name(), KindSession, agent.IsGated(t))
	}
	for _, t := range s.mcpTools() {
		add(t.Name(), KindMCP, agent.IsGated(t))
	}
	for _, p := range s.plugins {
		for _, t := range p.Tools {
			add(t.Name(), KindPlugin, agent.IsGated(t))
		}
	}
	return out
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

// Workspace is the session's workspace directory.
func (s *Session) Workspace() string { return s.ws }

// Agent is the session's agent.
func (s *Session) Agent() *agent.Agent { return s.agent }

// Send runs one turn, after waiting for the MCP servers still starting
// (bounded; see awaitMCP).
//
// A turn that may change the workspace is checkpointed before it starts,
// before each approved mutating call and when it ends (see /undo); a
// checkpoint that fails is reported as a notice and the turn goes on.
func (s *Session) Send(ctx context.Context, prompt string, emit func(agent.Event)) error {
	s.awaitMCP(ctx, emit)
	if s.cp != nil && mayChange(s.offered()) {
		s.cp.begin(ctx, len(s.agent.Messages()), prompt)
		defer func() {
			for _, e := range s.cp.end(ctx) {
				emit(agent.Event{Type: agent.EventNotice, Text: "checkpoint failed (this turn may not be undoable): " + e})
			}
		}()
	}
	return s.agent.Send(ctx, prompt, emit)
}

// Close closes the MCP servers, releases the sandbox session (killing what
// it started), the checkpoint store and the workspace.
func (s *Session) Close() error {
	var cpErr error
	if s.cp != nil {
		cpErr = s.cp.store.Close()
	}
	return errors.Join(s.closeMCP(), s.sandbox.Close(), cpErr, s.root.Close())
}

// toolAdapter runs a built-in tool for the agent, with live output.
type toolAdapter struct {
	t   tools.Tool
	env *tools.Env
	cp  *checkpoints // nil without checkpoints
}

func (a toolAdapter) Name() string            { return a.t.Name() }
func (a toolAdapter) Description() string     { return a.t.Description() }
func (a toolAdapter) Schema() json.RawMessage { return a.t.Schema() }
func (a toolAdapter) Gated() bool             { return a.t.Gated() } // agent.IsGated adds the mcp__ rule

func (a toolAdapter) Run(ctx context.Context, input json.RawMessage, output func(string)) (agent.Result, error) {
	if a.cp != nil && agent.IsGated(a) {
		a.cp.beforeCall(ctx, a.t.Name()) // the call is approved: Run is only called then
	}
	env := *a.env
	env.Output = func(_ string, chunk []byte) { output(string(chunk)) }
	res, err := a.t.Run(ctx, &env, input)
	out := agent.Result{Output: res.Text, IsError: res.IsError}
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
