package cli

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/orchestrator"
)

// SandboxFlags are the flags of every command that executes something.
type SandboxFlags struct {
	NoSandbox bool
	Image     string
	Env       []string
	Memory    string
	CPUs      float64
	Pids      int64
	Network   string
	Idle      time.Duration
}

// bind registers the flags on cmd's persistent flag set.
func (s *SandboxFlags) bind(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.BoolVar(&s.NoSandbox, "no-sandbox", false, "run commands on the host instead of in a container (no isolation)")
	fl.StringVar(&s.Image, "image", "", "sandbox image (a local image reference); default the built-in image")
	fl.StringArrayVar(&s.Env, "env", nil, "pass an environment variable into the sandbox: NAME (value from the host) or NAME=value; repeatable")
	fl.StringVar(&s.Memory, "memory", "", "sandbox memory limit, e.g. 4g or 512m (default 4g)")
	fl.Float64Var(&s.CPUs, "cpus", 0, "sandbox CPU limit (default 2)")
	fl.Int64Var(&s.Pids, "pids", 0, "sandbox process limit (default 1024)")
	fl.StringVar(&s.Network, "network", "", "sandbox network: bridge (default) or none")
	fl.DurationVar(&s.Idle, "idle-timeout", 0, "stop the sandbox container after this long with nothing running (default 30m)")
	_ = fl.MarkHidden("idle-timeout")
}

// config turns the flags into the orchestrator's sandbox configuration.
func (s *SandboxFlags) config(f *Factory, ws string) (orchestrator.SandboxConfig, error) {
	mem, err := parseBytes(s.Memory)
	if err != nil {
		return orchestrator.SandboxConfig{}, usagef("--memory: %v", err)
	}
	return orchestrator.SandboxConfig{
		Workspace: ws,
		NoSandbox: s.NoSandbox,
		Image:     s.Image,
		Env:       s.Env,
		Memory:    mem,
		CPUs:      s.CPUs,
		Pids:      s.Pids,
		Network:   s.Network,
		Idle:      s.Idle,
		Version:   f.Version,
		Progress:  f.ErrOut,
		LookupEnv: f.LookupEnv,
	}, nil
}

// workspace is the absolute current directory.
func (f *Factory) workspace() (string, error) {
	wd, err := f.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the workspace: %w", err)
	}
	return filepath.Abs(wd)
}

// NewCmdRoot builds the shiro command tree.
func NewCmdRoot(f *Factory) *cobra.Command {
	sf := &SandboxFlags{}
	cmd := &cobra.Command{
		Use:           "shiro",
		Short:         "A terminal coding agent whose tools run in a container",
		Version:       f.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(f.ErrOut, "The chat UI is not built yet. Available now: `shiro tool bash '{\"command\":\"...\"}'`, `shiro sandbox`, `shiro image build`.")
			return cmd.Help()
		},
	}
	cmd.SetIn(f.In)
	cmd.SetOut(f.Out)
	cmd.SetErr(f.ErrOut)
	cmd.SetFlagErrorFunc(flagErrors)
	sf.bind(cmd)
	cmd.AddCommand(
		NewCmdTool(f, sf, nil),
		NewCmdSandbox(f, sf),
		NewCmdImage(f, nil),
		NewCmdHelper(f),
	)
	return cmd
}
