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
	cmd.AddCommand(newCmdHelperInit(f), newCmdHelperServe(f), newCmdHelperReap(), newCmdHelperKill(), newCmdHelperGit(f))
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
	cmd.Flags().DurationVar(&idle, "idle", 30*time.Minute, "stop after this long with no session open")
	cmd.Flags().DurationVar(&poll, "poll", 0, "how often to count the open sessions (default: 1s, or a quarter of --idle when shorter)")
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
			opts := helper.ServeOptions{SessionID: session, Env: os.Environ(), OwnProcess: true}
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

func newCmdHelperReap() *cobra.Command {
	var opts helper.ReapOptions
	cmd := &cobra.Command{
		Use:   "reap",
		Short: "Hold one command at a time of a session and kill all it starts (started by serve)",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return helper.Reap(os.NewFile(helper.ReapFD, "reaper"), opts)
		},
	}
	cmd.Flags().StringVar(&opts.SessionID, "session", "", "session id (for a kill from outside)")
	cmd.Flags().IntVar(&opts.OOMScoreAdj, "oom-score-adj", 0, "raise the oom_score_adj of the reaper and its commands")
	return cmd
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
				return helper.KillSession(session)
			case marker != "":
				return helper.KillMarker(marker, false)
			}
			return usagef("want --session or --marker")
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "kill every process of this session (and its helper serve)")
	cmd.Flags().StringVar(&marker, "marker", "", "kill every process carrying this command marker")
	return cmd
}
