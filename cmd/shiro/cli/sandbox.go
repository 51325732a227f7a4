package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/moby/term"
	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/sandbox/docker"
)

// NewCmdSandbox builds `shiro sandbox` and its subcommands.
func NewCmdSandbox(f *Factory, sf *SandboxFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Manage the sandbox containers",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newCmdSandboxLs(f), newCmdSandboxStop(f, false), newCmdSandboxStop(f, true),
		newCmdSandboxPrune(f), newCmdSandboxShell(f, sf))
	return cmd
}

func newCmdSandboxLs(f *Factory) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List shiro's containers (all workspaces)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			eng, err := docker.Connect(cmd.Context())
			if err != nil {
				return err
			}
			defer eng.Close()
			list, err := eng.List(cmd.Context(), "")
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(f.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			if len(list) == 0 {
				fmt.Fprintln(f.Out, "No sandbox containers.")
				return nil
			}
			tw := tabwriter.NewWriter(f.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKSPACE\tCONTAINER\tIMAGE\tSTATE\tCREATED\tLAST USED")
			for _, c := range list {
				ws := c.Workspace
				if c.Orphaned {
					ws += " (gone)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ws, c.Container, c.Image, c.State, ago(c.Created), ago(c.LastUsed))
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
func newCmdSandboxStop(f *Factory, remove bool) *cobra.Command {
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
			eng, err := docker.Connect(cmd.Context())
			if err != nil {
				return err
			}
			defer eng.Close()
			list, err := eng.List(cmd.Context(), ws)
			if err != nil {
				return err
			}
			ids := make([]string, 0, len(list))
			for _, c := range list {
				if remove || c.State == "running" {
					ids = append(ids, c.ID)
					fmt.Fprintf(f.ErrOut, "%s %s (%s)\n", map[bool]string{true: "removing", false: "stopping"}[remove], c.Container, c.Workspace)
				}
			}
			if len(ids) == 0 {
				fmt.Fprintln(f.ErrOut, "Nothing to "+use+".")
				return nil
			}
			if remove {
				return eng.Remove(cmd.Context(), ids...)
			}
			return eng.Stop(cmd.Context(), ids...)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every workspace's containers")
	return cmd
}

func newCmdSandboxPrune(f *Factory) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove stopped sandbox containers, and those (and home volumes) of workspaces that no longer exist",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			eng, err := docker.Connect(cmd.Context())
			if err != nil {
				return err
			}
			defer eng.Close()
			rep, err := eng.Prune(cmd.Context(), dryRun)
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			for _, c := range rep.Containers {
				fmt.Fprintf(f.Out, "%s container %s (%s, %s)\n", verb, c.Container, c.Workspace, c.State)
			}
			for _, v := range rep.Volumes {
				fmt.Fprintf(f.Out, "%s volume %s\n", verb, v)
			}
			if len(rep.Containers)+len(rep.Volumes) == 0 {
				fmt.Fprintln(f.Out, "Nothing to prune.")
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only say what would be removed")
	return cmd
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
			ws, err := f.workspace()
			if err != nil {
				return err
			}
			cfg, paths, err := f.loadConfig(ws, sf, nil)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			eng, sb, err := orchestrator.OpenDocker(ctx, f.sandboxConfig(cfg, paths, ws, sf))
			if err != nil {
				return err
			}
			defer eng.Close()
			defer sb.Close()

			inFd, isTerm := term.GetFdInfo(f.In)
			opts := docker.ShellOptions{In: f.In, Out: f.Out, Term: os.Getenv("TERM")}
			if isTerm {
				state, err := term.SetRawTerminal(inFd)
				if err != nil {
					return fmt.Errorf("make the terminal raw: %w", err)
				}
				defer term.RestoreTerminal(inFd, state) //nolint:errcheck // nothing better to do on exit
				if ws, err := term.GetWinsize(inFd); err == nil {
					opts.Size = docker.Size{Height: uint(ws.Height), Width: uint(ws.Width)}
				}
				resize := make(chan docker.Size, 1)
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
								case resize <- docker.Size{Height: uint(ws.Height), Width: uint(ws.Width)}:
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
			code, err := sb.Shell(ctx, opts)
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
