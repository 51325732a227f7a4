package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/sandbox/gitshadow"
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
	cmd.AddCommand(newCmdHelperInit(f), newCmdHelperServe(f), newCmdHelperKill(), newCmdHelperGit(f))
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
	var session, gitRoot, gitLayout string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve one session's command channel on stdin/stdout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			touchLastUsed()
			opts := helper.ServeOptions{SessionID: session, Env: os.Environ()}
			if gitRoot != "" {
				var l gitshadow.Layout
				if err := json.Unmarshal([]byte(gitLayout), &l); err != nil {
					return usagef("--git-layout: %v", err)
				}
				opts.State = func() string { return gitshadow.Fingerprint(gitRoot, l) }
			}
			return helper.Serve(cmd.Context(), f.In, f.Out, opts)
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "session id (prefix of every command's marker)")
	cmd.Flags().StringVar(&gitRoot, "git-root", "", "the shadow git directory whose state to report after each command")
	cmd.Flags().StringVar(&gitLayout, "git-layout", "", "the shadow's layout (JSON)")
	_ = cmd.MarkFlagRequired("session")
	return cmd
}

// newCmdHelperGit runs the shadow git directory's side of the git
// boundary (export, import, keep).
func newCmdHelperGit(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:                "git",
		Short:              "Export, import or keep the sandbox's git state (internal)",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return gitshadow.HelperMain(args, f.In, f.Out)
		},
	}
}

// touchLastUsed records when a session last opened, for `sandbox ls`, in
// the state directory beside the (read-only) helper's.
func touchLastUsed() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	p := filepath.Join(filepath.Dir(filepath.Dir(exe)), "state", "last-used")
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
