package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/trust"
)

// trustState decides the workspace w's trust for cfg's asks.
func (f *Factory) trustState(cfg config.Config, paths config.Paths, w *workspace.Workspace, flag bool) (trust.State, error) {
	ws := w.Path()
	asks := trust.ProjectAsks(cfg, w)
	home, _ := f.LookupEnv("HOME")
	var st *trust.Store
	if paths.DataDir != "" {
		st = trust.NewStore(paths.DataDir)
	}
	return trust.Check(st, ws, asks, flag, cfg.TrustPaths, home)
}

// gateTrust withholds the project's asks from cfg unless the workspace is
// trusted, with one notice line per ask withheld (and what changed since
// an earlier decision).
func (f *Factory) gateTrust(cfg *config.Config, paths config.Paths, w *workspace.Workspace, sf *SandboxFlags) (trust.State, error) {
	flag := sf != nil && sf.TrustProject
	state, err := f.trustState(*cfg, paths, w, flag)
	if err != nil {
		// An unreadable store trusts nothing; it does not stop shiro.
		fmt.Fprintf(f.ErrOut, "[notice] trust: %v\n", err)
	}
	if state.Trusted {
		return state, nil
	}
	if state.Known {
		fmt.Fprintln(f.ErrOut, "[notice] trust: the project's asks changed since you trusted this workspace:")
		for _, l := range state.Change.Lines() {
			fmt.Fprintf(f.ErrOut, "[notice] trust:   %s\n", l)
		}
	}
	for _, a := range state.Asks {
		fmt.Fprintf(f.ErrOut, "[notice] trust: skipped %s — the workspace is not trusted (--trust-project, or `shiro trust`)\n", a)
	}
	trust.Withhold(cfg, state.Asks)
	return state, nil
}

// TrustOptions are the inputs of `shiro trust`.
type TrustOptions struct {
	List   bool
	Revoke bool
	Path   string
}

// NewCmdTrust builds `shiro trust`.
func NewCmdTrust(f *Factory) *cobra.Command {
	opts := &TrustOptions{}
	cmd := &cobra.Command{
		Use:   "trust [--list | --revoke [PATH]]",
		Short: "Trust this workspace's project config to start its MCP servers and build its image",
		Long: `A workspace's .shiro/config.json may ask to run code or widen the sandbox:
its MCP servers (command lines run in the sandbox) and its image (a
reference to pull and run, a Dockerfile or devcontainer.json to build, whose
RUN steps run as root inside the build). Nothing asked happens until you
trust the workspace for exactly these asks; when they change, shiro asks
again and shows what changed.

  shiro trust               show this workspace's asks and trust them
  shiro trust --list        the trusted workspaces and what each was trusted for
  shiro trust --revoke      forget this workspace's decision (or PATH's)

Headless runs skip untrusted asks with a notice each; --trust-project lets
them happen once. trust.paths in your config trusts paths or patterns.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if !opts.Revoke {
					return usagef("a PATH goes with --revoke")
				}
				opts.Path = args[0]
			}
			if opts.List && opts.Revoke {
				return usagef("--list and --revoke exclude each other")
			}
			return runTrust(f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.List, "list", false, "list the trusted workspaces")
	cmd.Flags().BoolVar(&opts.Revoke, "revoke", false, "forget the decision for this workspace, or PATH")
	return cmd
}

func runTrust(f *Factory, opts *TrustOptions) error {
	paths, err := config.ResolvePaths(f.LookupEnv)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	if paths.DataDir == "" {
		return &ExitError{Code: 1, Err: errors.New("no data directory to keep trust decisions in")}
	}
	st := trust.NewStore(paths.DataDir)
	switch {
	case opts.List:
		entries, err := st.List()
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		if len(entries) == 0 {
			fmt.Fprintln(f.Out, "No trusted workspaces.")
		}
		for _, e := range entries {
			fmt.Fprintf(f.Out, "%s  (trusted %s)\n", termsafe.Name(e.Workspace), e.At.Format("2006-01-02 15:04"))
			for _, a := range e.Asks {
				fmt.Fprintf(f.Out, "  %s\n", a)
			}
		}
		return nil
	case opts.Revoke:
		p := opts.Path
		if p == "" {
			if p, err = f.workspace(); err != nil {
				return err
			}
		} else if p, err = filepath.Abs(p); err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		had, err := st.Revoke(p)
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		if !had {
			fmt.Fprintf(f.Out, "%s was not trusted.\n", p)
			return nil
		}
		fmt.Fprintf(f.Out, "Revoked: %s is no longer trusted.\n", p)
		return nil
	}
	w, err := f.openWorkspace()
	if err != nil {
		return err
	}
	defer w.Close()
	ws := w.Path()
	cfg, _, err := f.loadConfigAsked(w, nil, nil)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	asks := trust.ProjectAsks(cfg, w)
	if len(asks) == 0 {
		fmt.Fprintln(f.Out, "This workspace's project config asks for nothing that needs trust.")
		return nil
	}
	if before, ok, err := st.Get(ws); err == nil && ok && !before.Covers(asks) {
		fmt.Fprintln(f.Out, "Changed since you last trusted it:")
		for _, l := range trust.Diff(before.Asks, asks).Lines() {
			fmt.Fprintf(f.Out, "  %s\n", l)
		}
	}
	fmt.Fprintf(f.Out, "Trusting %s for:\n", trust.Identity(ws))
	for _, a := range asks {
		fmt.Fprintf(f.Out, "  %s\n", a)
		if c := a.Covered(); c != "" {
			fmt.Fprintf(f.Out, "    %s\n", c)
		}
	}
	if err := st.Remember(ws, asks); err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	fmt.Fprintln(f.Out, "Remembered; shiro asks again when these change (`shiro trust --revoke` forgets it).")
	return nil
}
