package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/moby/term"
	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/sandbox"
)

// NewCmdSandbox builds `shiro sandbox` and its subcommands.
func NewCmdSandbox(f *Factory, sf *SandboxFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Manage the sandbox containers",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCmdSandboxLs(f, sf), newCmdSandboxStop(f, sf, false), newCmdSandboxStop(f, sf, true),
		newCmdSandboxPrune(f, sf), newCmdSandboxShell(f, sf))
	return cmd
}

// sandboxSettings are the settings `shiro sandbox` acts with: the flags,
// then the configuration of the current directory.
func (f *Factory) sandboxSettings(sf *SandboxFlags) sandbox.Settings {
	settings := sandbox.Settings{Backend: sf.Backend, KubeContext: sf.KubeContext, Namespace: sf.Namespace}
	if w, err := f.openWorkspace(); err == nil {
		if cfg, _, err := f.loadConfigAsked(w, sf, nil); err == nil {
			settings = cfg.Sandbox
		}
		w.Close()
	}
	return settings
}

// managers are the engines `sandbox ls/stop/rm/prune` act on: the chosen
// backend's, and the default backend's (this machine's Docker engine)
// when another is chosen and it answers.
func (f *Factory) managers(ctx context.Context, sf *SandboxFlags) ([]sandbox.Manager, error) {
	settings := f.sandboxSettings(sf)
	chosen := cmp.Or(settings.Backend, sandbox.DefaultBackend)
	var out []sandbox.Manager
	if chosen != sandbox.DefaultBackend {
		if def, err := sandbox.Lookup(sandbox.DefaultBackend); err == nil {
			if m, err := def.Manage(ctx, sandbox.Settings{}); err == nil {
				out = append(out, m)
			}
		}
	}
	b, err := sandbox.Lookup(chosen)
	if err == nil {
		var m sandbox.Manager
		if m, err = b.Manage(ctx, settings); err == nil {
			return append(out, m), nil
		}
	}
	closeAll(out)
	return nil, err
}

func closeAll(ms []sandbox.Manager) {
	for _, m := range ms {
		m.Close()
	}
}

func newCmdSandboxLs(f *Factory, sf *SandboxFlags) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List shiro's sandboxes (all workspaces)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := f.managers(cmd.Context(), sf)
			if err != nil {
				return err
			}
			defer closeAll(ms)
			list := []sandbox.Entry{}
			for _, m := range ms {
				l, err := m.List(cmd.Context(), "")
				if err != nil {
					return err
				}
				list = append(list, l...)
			}
			if asJSON {
				enc := json.NewEncoder(termsafe.JSON(f.Out))
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			if len(list) == 0 {
				fmt.Fprintln(f.Out, "No sandbox containers.")
				return nil
			}
			tw := tabwriter.NewWriter(f.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKSPACE\tCONTAINER\tIMAGE\tSTATE\tCREATED\tLAST USED")
			for _, e := range list {
				ws := termsafe.Name(e.Workspace)
				if e.Orphaned {
					ws += " (gone)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ws, termsafe.Name(e.String()), termsafe.Name(e.Image), e.State, ago(e.Created), ago(e.LastUsed))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&all, "all", true, "all workspaces (the default)")
	return cmd
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// newCmdSandboxStop builds `sandbox stop` (remove=false) and `sandbox rm`.
func newCmdSandboxStop(f *Factory, sf *SandboxFlags, remove bool) *cobra.Command {
	var all bool
	use, short := "stop", "Stop this workspace's sandbox container"
	if remove {
		use, short = "rm", "Remove this workspace's sandbox container"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws := ""
			if !all {
				var err error
				if ws, err = f.workspace(); err != nil {
					return err
				}
			}
			ms, err := f.managers(cmd.Context(), sf)
			if err != nil {
				return err
			}
			defer closeAll(ms)
			verb := map[bool]string{true: "removing", false: "stopping"}[remove]
			n := 0
			report := func(it sandbox.Item) {
				n++
				fmt.Fprintf(f.ErrOut, "%s %s\n", verb, describeItem(it, false))
			}
			var errs []error
			for _, m := range ms {
				if remove {
					errs = append(errs, m.Remove(cmd.Context(), ws, report))
				} else {
					errs = append(errs, m.Stop(cmd.Context(), ws, report))
				}
			}
			if n == 0 {
				fmt.Fprintln(f.ErrOut, "Nothing to "+use+".")
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every workspace's containers")
	return cmd
}

func newCmdSandboxPrune(f *Factory, sf *SandboxFlags) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove stopped sandbox containers, and those (and home volumes) of workspaces that no longer exist",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := f.managers(cmd.Context(), sf)
			if err != nil {
				return err
			}
			defer closeAll(ms)
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			n := 0
			report := func(it sandbox.Item) {
				n++
				fmt.Fprintf(f.Out, "%s %s\n", verb, describeItem(it, true))
			}
			var errs []error
			for _, m := range ms {
				errs = append(errs, m.Prune(cmd.Context(), dryRun, report))
			}
			if n == 0 {
				fmt.Fprintln(f.Out, "Nothing to prune.")
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only say what would be removed")
	return cmd
}

// describeItem writes what a sandbox command acts on: its kind and name,
// then its workspace (and, with state, its state) when known.
func describeItem(it sandbox.Item, state bool) string {
	s := it.Kind + " " + termsafe.Name(it.Name)
	switch {
	case it.Workspace != "" && state && it.State != "":
		s += " (" + termsafe.Name(it.Workspace) + ", " + it.State + ")"
	case it.Workspace != "":
		s += " (" + termsafe.Name(it.Workspace) + ")"
	}
	return s
}

func newCmdSandboxShell(f *Factory, sf *SandboxFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "shell",
		Short: "Open an interactive shell in this workspace's sandbox container",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sf.NoSandbox {
				return usagef("sandbox shell needs the container; drop --no-sandbox")
			}
			w, err := f.openWorkspace()
			if err != nil {
				return err
			}
			defer w.Close()
			ws := w.Path()
			cfg, paths, err := f.loadConfig(w, sf, nil)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			sb, err := orchestrator.OpenSandbox(ctx, f.sandboxConfig(cfg, paths, ws, sf))
			if err != nil {
				return err
			}
			defer sb.Close()
			sh, ok := sb.(sandbox.Sheller)
			if !ok {
				return fmt.Errorf("the %s sandbox has no interactive shell", sb.Info().Kind)
			}

			inFd, isTerm := term.GetFdInfo(f.In)
			opts := sandbox.ShellOptions{In: f.In, Out: f.Out, Term: os.Getenv("TERM")}
			if isTerm {
				// An interactive shell draws on the terminal as it is.
				opts.Out = f.terminal()
				state, err := term.SetRawTerminal(inFd)
				if err != nil {
					return fmt.Errorf("make the terminal raw: %w", err)
				}
				defer term.RestoreTerminal(inFd, state) //nolint:errcheck // nothing better to do on exit
				if ws, err := term.GetWinsize(inFd); err == nil {
					opts.Size = sandbox.TermSize{Height: uint(ws.Height), Width: uint(ws.Width)}
				}
				resize := make(chan sandbox.TermSize, 1)
				winch := make(chan os.Signal, 1)
				signal.Notify(winch, syscall.SIGWINCH)
				defer signal.Stop(winch)
				done := make(chan struct{})
				defer close(done)
				go func() {
					for {
						select {
						case <-winch:
							if ws, err := term.GetWinsize(inFd); err == nil {
								select {
								case resize <- sandbox.TermSize{Height: uint(ws.Height), Width: uint(ws.Width)}:
								default:
								}
							}
						case <-done:
							return
						}
					}
				}()
				opts.Resize = resize
			}
			code, err := sh.Shell(ctx, opts)
			if err != nil {
				return err
			}
			if code != 0 {
				return errSilent(code)
			}
			return nil
		},
	}
}
