package cli

import (
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
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/kube"
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

// kubeCluster connects to the Kubernetes backend when the settings (the
// flags, then the configuration of the current directory) choose it; nil
// when they do not.
func (f *Factory) kubeCluster(ctx context.Context, sf *SandboxFlags) (*kube.Cluster, error) {
	settings := sandbox.Settings{Backend: sf.Backend, KubeContext: sf.KubeContext, Namespace: sf.Namespace}
	if w, err := f.openWorkspace(); err == nil {
		if cfg, _, err := f.loadConfigAsked(w, sf, nil); err == nil {
			settings = cfg.Sandbox
		}
		w.Close()
	}
	if settings.Backend != sandbox.BackendKubernetes {
		return nil, nil
	}
	return kube.Connect(ctx, kube.ConnectOptions{Context: settings.KubeContext, Namespace: settings.Namespace})
}

// sandboxEngines are the backends `sandbox ls/stop/rm/prune` act on: the
// Docker engine (unless the Kubernetes backend is chosen and no engine
// answers) and the cluster when the Kubernetes backend is chosen.
func (f *Factory) sandboxEngines(ctx context.Context, sf *SandboxFlags) (*docker.Engine, *kube.Cluster, error) {
	cl, err := f.kubeCluster(ctx, sf)
	if err != nil {
		return nil, nil, err
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		if cl == nil {
			return nil, nil, err
		}
		eng = nil
	}
	return eng, cl, nil
}

// kubeEntry is a pod in `sandbox ls --json`.
type kubeEntry struct {
	kube.PodInfo
	Backend string `json:"backend"`
}

func newCmdSandboxLs(f *Factory, sf *SandboxFlags) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List shiro's containers (all workspaces)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			eng, cl, err := f.sandboxEngines(cmd.Context(), sf)
			if err != nil {
				return err
			}
			var list []docker.ContainerInfo
			if eng != nil {
				defer eng.Close()
				if list, err = eng.List(cmd.Context(), ""); err != nil {
					return err
				}
			}
			var pods []kube.PodInfo
			if cl != nil {
				if pods, err = cl.List(cmd.Context(), ""); err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(termsafe.JSON(f.Out))
				enc.SetIndent("", "  ")
				if cl == nil {
					return enc.Encode(list)
				}
				all := make([]any, 0, len(list)+len(pods))
				for _, c := range list {
					all = append(all, c)
				}
				for _, p := range pods {
					all = append(all, kubeEntry{PodInfo: p, Backend: sandbox.BackendKubernetes})
				}
				return enc.Encode(all)
			}
			if len(list)+len(pods) == 0 {
				fmt.Fprintln(f.Out, "No sandbox containers.")
				return nil
			}
			tw := tabwriter.NewWriter(f.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKSPACE\tCONTAINER\tIMAGE\tSTATE\tCREATED\tLAST USED")
			gone := func(ws string, orphaned bool) string {
				if orphaned {
					return termsafe.Name(ws) + " (gone)"
				}
				return termsafe.Name(ws)
			}
			for _, c := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", gone(c.Workspace, c.Orphaned), c.Container, c.Image, c.State, ago(c.Created), ago(c.LastUsed))
			}
			for _, p := range pods {
				fmt.Fprintf(tw, "%s\tpod/%s/%s\t%s\t%s\t%s\t-\n", gone(p.Workspace, p.Orphaned), p.Namespace, p.Pod, p.Image, p.State, ago(p.Created))
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
			eng, cl, err := f.sandboxEngines(cmd.Context(), sf)
			if err != nil {
				return err
			}
			verb := map[bool]string{true: "removing", false: "stopping"}[remove]
			var errs []error
			n := 0
			if eng != nil {
				defer eng.Close()
				list, err := eng.List(cmd.Context(), ws)
				if err != nil {
					return err
				}
				ids := make([]string, 0, len(list))
				for _, c := range list {
					if remove || c.State == "running" {
						ids = append(ids, c.ID)
						fmt.Fprintf(f.ErrOut, "%s %s (%s)\n", verb, c.Container, termsafe.Name(c.Workspace))
					}
				}
				n += len(ids)
				if remove {
					errs = append(errs, eng.Remove(cmd.Context(), ids...))
				} else {
					errs = append(errs, eng.Stop(cmd.Context(), ids...))
				}
			}
			if cl != nil {
				// A pod stops by being deleted; rm deletes its claim too (the
				// workspace's copy in the cluster and its HOME).
				pods, err := cl.List(cmd.Context(), ws)
				if err != nil {
					return err
				}
				var names []string
				for _, p := range pods {
					if remove || p.State == kube.StateRunning || p.State == kube.StatePending {
						names = append(names, p.Pod)
						fmt.Fprintf(f.ErrOut, "%s pod %s/%s (%s)\n", verb, p.Namespace, p.Pod, termsafe.Name(p.Workspace))
					}
				}
				n += len(names)
				if remove {
					errs = append(errs, cl.Remove(cmd.Context(), names...))
					claims, err := cl.RemoveClaims(cmd.Context(), ws)
					for _, c := range claims {
						fmt.Fprintf(f.ErrOut, "removed claim %s/%s\n", cl.Namespace(), c)
					}
					n += len(claims)
					errs = append(errs, err)
				} else {
					errs = append(errs, cl.Stop(cmd.Context(), names...))
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
			eng, cl, err := f.sandboxEngines(cmd.Context(), sf)
			if err != nil {
				return err
			}
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			n := 0
			var errs []error
			if eng != nil {
				defer eng.Close()
				rep, err := eng.Prune(cmd.Context(), dryRun)
				for _, c := range rep.Containers {
					fmt.Fprintf(f.Out, "%s container %s (%s, %s)\n", verb, c.Container, termsafe.Name(c.Workspace), c.State)
				}
				for _, v := range rep.Volumes {
					fmt.Fprintf(f.Out, "%s volume %s\n", verb, v)
				}
				n += len(rep.Containers) + len(rep.Volumes)
				errs = append(errs, err)
			}
			if cl != nil {
				rep, err := cl.Prune(cmd.Context(), dryRun)
				for _, p := range rep.Pods {
					fmt.Fprintf(f.Out, "%s pod %s/%s (%s, %s)\n", verb, p.Namespace, p.Pod, termsafe.Name(p.Workspace), p.State)
				}
				for _, c := range rep.Claims {
					fmt.Fprintf(f.Out, "%s claim %s/%s\n", verb, cl.Namespace(), c)
				}
				for _, c := range rep.ConfigMaps {
					fmt.Fprintf(f.Out, "%s config map %s/%s\n", verb, cl.Namespace(), c)
				}
				n += len(rep.Pods) + len(rep.Claims) + len(rep.ConfigMaps)
				errs = append(errs, err)
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
