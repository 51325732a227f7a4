package cli

import (
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/sandbox/helper"
)

// NewCmdHelper builds the hidden `shiro helper` commands that run inside
// the sandbox container.
func NewCmdHelper(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "helper",
		Short:  "In-container side of the sandbox (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
	}
	cmd.AddCommand(newCmdHelperInit(f), newCmdHelperServe(f), newCmdHelperKill())
	return cmd
}

func newCmdHelperInit(f *Factory) *cobra.Command {
	var idle, poll time.Duration
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Run as the container's PID 1: reap zombies, stop when idle",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return helper.Init(cmd.Context(), helper.InitOptions{IdleTimeout: idle, PollInterval: poll, Log: f.ErrOut})
		},
	}
	cmd.Flags().DurationVar(&idle, "idle", 30*time.Minute, "stop after this long with nothing running")
	cmd.Flags().DurationVar(&poll, "poll", 0, "how often to look for running processes (default: a fraction of --idle)")
	return cmd
}

func newCmdHelperServe(f *Factory) *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve one session's command channel on stdin/stdout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			touchLastUsed()
			return helper.Serve(cmd.Context(), f.In, f.Out, helper.ServeOptions{SessionID: session, Env: os.Environ()})
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "session id (prefix of every command's marker)")
	_ = cmd.MarkFlagRequired("session")
	return cmd
}

// touchLastUsed records when a session last opened, for `sandbox ls`.
func touchLastUsed() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	p := filepath.Join(filepath.Dir(filepath.Dir(exe)), "last-used")
	now := time.Now()
	if err := os.Chtimes(p, now, now); err != nil {
		if f, err := os.Create(p); err == nil {
			f.Close()
		}
	}
}

func newCmdHelperKill() *cobra.Command {
	var session, marker string
	cmd := &cobra.Command{
		Use:   "kill",
		Short: "Kill a session's (or one command's) processes",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			switch {
			case session != "":
				return helper.KillMarker(session+".", true)
			case marker != "":
				return helper.KillMarker(marker, false)
			}
			return usagef("want --session or --marker")
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "kill every process of this session")
	cmd.Flags().StringVar(&marker, "marker", "", "kill every process carrying this command marker")
	return cmd
}
