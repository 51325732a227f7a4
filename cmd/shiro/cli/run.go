package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/moby/term"
	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/tools"
)

// RunOptions are the inputs of `shiro` itself.
type RunOptions struct {
	Prompt         string
	Print          bool
	JSON           bool
	Continue       bool
	Resume         string
	NoInstructions bool
	// NoMemory, NoSkills and NoSubagent leave out memory, skills and the
	// task subagent.
	NoMemory   bool
	NoSkills   bool
	NoSubagent bool
	Sandbox    *SandboxFlags
	Model      *ModelFlags

	// Worktree names the worktree agent the session runs as (--worktree),
	// From the commit a new agent starts from (--from).
	Worktree, From string

	// NoMCP starts no MCP server.
	NoMCP bool
	// Apply applies the sandbox's changes at the end of a headless run in
	// copy mode.
	Apply bool
	// Parallel are --parallel N and --check (parallel.go).
	Parallel ParallelOptions
	// OutputSchema is the JSON Schema file the final answer of a headless
	// run must satisfy (--output-schema).
	OutputSchema string
}

func runRoot(cmd *cobra.Command, f *Factory, opts *RunOptions) error {
	if opts.Parallel.N != 0 || opts.Parallel.Check != "" {
		return runParallel(cmd, f, opts)
	}
	if len(opts.Model.Models) > 1 {
		return usagef("--model is given %d times: only --parallel takes more than one (one per agent)", len(opts.Model.Models))
	}
	if !opts.Print {
		if opts.JSON {
			return usagef("--json needs -p")
		}
		if opts.Apply {
			return usagef("--apply needs -p (in the chat UI, /apply applies the sandbox's changes)")
		}
		if opts.OutputSchema != "" {
			return usagef("--output-schema needs -p")
		}
		return runTUI(cmd.Context(), f, opts)
	}
	return runHeadless(cmd.Context(), f, opts)
}

// headlessPrompt is the prompt argument, or trimmed stdin when it is piped.
func headlessPrompt(f *Factory, arg string) (string, error) {
	if strings.TrimSpace(arg) != "" {
		return arg, nil
	}
	if _, isTerm := term.GetFdInfo(f.In); !isTerm && f.In != nil {
		b, err := io.ReadAll(io.LimitReader(f.In, 4<<20))
		if err != nil {
			return "", fmt.Errorf("read the prompt from stdin: %w", err)
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
	}
	return "", &ExitError{Code: 1, Err: errors.New("-p needs a prompt argument or piped stdin")}
}

func runHeadless(ctx context.Context, f *Factory, opts *RunOptions) error {
	sw, err := f.openSessionWorkspace(ctx, opts)
	if err != nil {
		return err
	}
	defer sw.Close()
	w, ws := sw.Workspace, sw.Path()
	cfg, paths, err := f.loadConfig(w, opts.Sandbox, opts.Model)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	model, err := orchestrator.NewModel(cfg, func(s string) { fmt.Fprintf(f.ErrOut, "[notice] %s\n", s) })
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	prompt, err := headlessPrompt(f, opts.Prompt)
	if err != nil {
		return err
	}
	var schema *outputSchema
	if opts.OutputSchema != "" {
		if schema, err = loadOutputSchema(opts.OutputSchema); err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		prompt = schema.prompt(prompt)
	}
	st := &store.Store{Dir: paths.SessionsDir()}
	rec, err := resumeRecord(st, sw, opts)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	if rec.ID == "" {
		rec = newRecord(sw, cfg)
	}
	if !cfg.Yolo {
		fmt.Fprintln(f.ErrOut, "shiro: headless without --yolo: write_file, edit_file, multi_edit, bash and MCP tools will be denied.")
	}
	printer := newHeadlessPrinter(f.Out, f.ErrOut, opts.JSON)
	printer.version = f.Version
	printer.holdText = schema != nil // stdout gets the checked answer alone
	so := f.sessionOptions(cfg, paths, ws, opts, model, rec)
	so.Opened = w
	so.Store = st
	so.Events = printer.sessionEvent // no Asker: headless refuses
	sess, err := orchestrator.NewSession(so)
	if err != nil {
		return err
	}
	for _, n := range sess.Notices {
		fmt.Fprintf(f.ErrOut, "[notice] %s\n", n)
	}
	sess.Announce()
	sendErr := sess.Send(ctx, prompt)
	printer.flushNotices()
	if schema != nil && sendErr == nil && !printer.sawError && ctx.Err() == nil {
		out, err := schema.check(finalAnswer(sess.Messages()))
		if err != nil {
			printer.event(agent.Event{Type: agent.EventError, Error: "--output-schema: " + err.Error()})
		} else {
			printer.answer(out)
		}
	}
	// In copy mode the run ends saying what waits in the sandbox's copy
	// (or applying it) — unless nothing opened the sandbox and nothing is
	// to be applied: then there is nothing new to say.
	if sess.CopyMode() && ctx.Err() == nil && (opts.Apply || sess.SandboxOpened()) {
		if err := finishCopy(ctx, sess, printer, opts.Apply); err != nil {
			fmt.Fprintf(f.ErrOut, "shiro: %v\n", err)
			printer.sawError = true
		}
	} else if opts.Apply && !sess.CopyMode() {
		fmt.Fprintln(f.ErrOut, "[notice] --apply: the sandbox worked on the workspace itself (not a copy), so there is nothing to apply")
	}
	if closeErr := sess.Close(); closeErr != nil {
		fmt.Fprintf(f.ErrOut, "[notice] closing the session: %v\n", closeErr)
	}
	status := 0
	if printer.sawError || sendErr != nil {
		status = 1
	}
	if sc := (signalCause{}); errors.As(context.Cause(ctx), &sc) {
		status = 128 + int(sc.sig) // what exitCode makes of it
	}
	sess.Report(status)
	if status == 1 {
		return errSilent(1)
	}
	return nil
}

// finishCopy ends a headless run in copy mode: the sandbox's changes
// applied (apply) or said to be waiting, with their diff stat.
func finishCopy(ctx context.Context, sess *orchestrator.Session, p *headlessPrinter, apply bool) error {
	ch, err := sess.Changes(ctx)
	if err != nil {
		return fmt.Errorf("list the sandbox's changes: %w", err)
	}
	if !apply {
		p.copyChanges(ch, nil)
		return nil
	}
	res, err := sess.Apply(ctx, ch, nil)
	if err != nil {
		return err
	}
	p.copyChanges(ch, &res)
	return nil
}

// newRecord starts the record of a new session in sw, naming its worktree
// agent.
func newRecord(sw *sessionWorkspace, cfg config.Config) store.Record {
	rec := store.NewRecord(sw.Path(), cfg.Provider, cfg.Model)
	if sw.Agent != nil {
		rec.Worktree, rec.Branch = sw.Agent.Name, sw.Agent.Branch
	}
	return rec
}

// resumeRecord loads the session -c or -r asks for (an empty record when
// neither).
func resumeRecord(st *store.Store, sw *sessionWorkspace, opts *RunOptions) (store.Record, error) {
	switch {
	case opts.Continue && opts.Resume != "":
		return store.Record{}, usagef("-c and -r exclude each other")
	case opts.Continue:
		rec, err := st.Latest(sw.Path())
		if errors.Is(err, store.ErrNoSessionHere) && sw.Agent != nil {
			return rec, fmt.Errorf("the worktree agent %s has no saved session yet: leave out -c to start one", sw.Agent.Name)
		}
		return rec, err
	case opts.Resume != "":
		return st.Resolve(opts.Resume)
	}
	return store.Record{}, nil
}

// sessionOptions are the parts of a session that headless and interactive
// runs share, from the resolved configuration and the resumed record.
func (f *Factory) sessionOptions(cfg config.Config, paths config.Paths, ws string, opts *RunOptions, model llm.Model, rec store.Record) orchestrator.SessionOptions {
	sets, _ := tools.ParseToolSets(cfg.ToolSets, cfg.ToolSetsPresent)
	so := orchestrator.SessionOptions{
		Workspace:      ws,
		Model:          model,
		Sandbox:        f.sandboxConfig(cfg, paths, ws, opts.Sandbox),
		ToolSets:       sets,
		Yolo:           cfg.Yolo,
		Plugins:        cfg.Plugins,
		NoInstructions: opts.NoInstructions,
		PruneThreshold: cfg.CompactThreshold,
		Variant:        cfg.Agent,
		Reasoning:      llm.Reasoning(cfg.Thinking),
		Record:         rec,
		DataDir:        paths.DataDir,
		UserSkillsDir:  filepath.Join(paths.ConfigDir, "skills"),
		NoMemory:       opts.NoMemory,
		NoSkills:       opts.NoSkills,
		NoSubagent:     opts.NoSubagent,
		SessionID:      rec.ID,
	}
	so.MCPServers, so.ProjectMCPServers, so.NoMCP = cfg.MCPServers, cfg.ProjectMCPServers, opts.NoMCP
	return so
}
