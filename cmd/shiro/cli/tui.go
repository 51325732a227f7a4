package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/moby/term"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/orchestrator/trust"
	"github.com/shiroagent/shiro/orchestrator/tui"
)

// askTrust asks, with the trust form, whether the project's asks may
// happen (unless the workspace is trusted already), and withholds them on
// "no".
func (f *Factory) askTrust(cfg *config.Config, paths config.Paths, w *workspace.Workspace, sf *SandboxFlags) error {
	ws := w.Path()
	state, err := f.trustState(*cfg, paths, w, sf != nil && sf.TrustProject)
	if err != nil {
		fmt.Fprintf(f.ErrOut, "[notice] trust: %v\n", err)
	}
	if state.Trusted {
		return nil
	}
	q := tui.TrustQuestion{Workspace: trust.Identity(ws), Changed: state.Change.Lines()}
	for _, a := range state.Asks {
		q.Asks = append(q.Asks, a.String())
	}
	choice, err := tui.AskTrust(f.In, f.terminal(), q)
	if errors.Is(err, tui.ErrTrustAborted) {
		return errSilent(130)
	}
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	switch choice {
	case tui.TrustRemember:
		if err := trust.NewStore(paths.DataDir).Remember(ws, state.Asks); err != nil {
			fmt.Fprintf(f.ErrOut, "[notice] trust: %v\n", err)
		}
	case tui.TrustNo:
		trust.Withhold(cfg, state.Asks)
	}
	return nil
}

// runTUI starts the interactive UI: the session is built around the UI's
// approver, progress and save hooks, the sandbox starts in the background,
// and the UI runs until the user quits.
func runTUI(ctx context.Context, f *Factory, opts *RunOptions) error {
	if _, isTerm := term.GetFdInfo(f.In); !isTerm {
		return &ExitError{Code: 1, Err: errors.New("the chat UI needs a terminal; run headless with -p")}
	}
	sw, err := f.openSessionWorkspace(ctx, opts)
	if err != nil {
		return err
	}
	defer sw.Close()
	w, ws := sw.Workspace, sw.Path()
	cfg, paths, err := f.loadConfigAsked(w, opts.Sandbox, opts.Model)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	if err := f.askTrust(&cfg, paths, w, opts.Sandbox); err != nil {
		return err
	}
	st := &store.Store{Dir: paths.SessionsDir()}
	rec, err := resumeRecord(st, sw, opts)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	if rec.ID == "" {
		rec = newRecord(sw, cfg)
	}
	// Loaded once: the header and /context show what the prompt holds.
	var instructions orchestrator.InstructionSet
	if !opts.NoInstructions {
		instructions = orchestrator.LoadInstructions(w)
	}
	image := cfg.Sandbox.Image
	if image == "" {
		image = images.Tag()
	}
	app, err := tui.New(tui.Options{
		Version:             f.Version,
		Workspace:           ws,
		Opened:              w,
		Paths:               paths,
		Config:              cfg,
		Configured:          !(cfg.APIKeyRequired() && cfg.APIKey == ""),
		Store:               st,
		Record:              rec,
		SandboxImage:        image,
		Instructions:        instructions.Names(),
		InstructionsRefused: instructions.Notices,
		Prompt:              opts.Prompt,
		Input:               f.In,
		Output:              f.terminal(),
	})
	if err != nil {
		return err
	}
	model, err := orchestrator.NewModel(cfg, app.Notice)
	var missing *orchestrator.MissingKeyError
	switch {
	case errors.As(err, &missing):
		model = orchestrator.UnconfiguredModel(cfg.Provider, cfg.Model)
	case err != nil:
		app.Close()
		return &ExitError{Code: 1, Err: err}
	}
	so := f.sessionOptions(cfg, paths, ws, opts, model, rec)
	so.Opened = w
	so.Store = st
	so.Instructions = &instructions
	so.Events, so.Asker = app.Events, app.Asker()
	sess, err := orchestrator.NewSession(so)
	if err != nil {
		app.Close()
		return err
	}
	app.AddNotices(sess.Notices...)
	res, runErr := app.Run(ctx, sess)
	if errors.Is(runErr, tui.ErrForceQuit) {
		// The third ctrl-c: the terminal is restored; do not wait for the
		// sandbox or the turn.
		fmt.Fprintln(f.ErrOut, "shiro: forced exit")
		return errSilent(130)
	}
	if err := sess.Close(); err != nil {
		fmt.Fprintf(f.ErrOut, "shiro: closing the sandbox: %v\n", err)
	}
	if runErr != nil {
		return runErr
	}
	if res.Messages == 0 {
		fmt.Fprintln(f.Out, "Bye.")
		return nil
	}
	fmt.Fprintf(f.Out, "Saved %d message(s): %q\nResume with: shiro -c   or   shiro -r %s\n", res.Messages, res.Title, (&store.Store{Dir: paths.SessionsDir()}).Short(res.SessionID))
	return nil
}
