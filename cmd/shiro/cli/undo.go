package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/moby/term"
	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/store"
)

// UndoOptions are the inputs of `shiro undo`.
type UndoOptions struct {
	Turn     int
	List     bool
	JSON     bool
	Continue bool
	Resume   string
	// Yes overwrites files changed after the turn without asking.
	Yes bool
}

// NewCmdUndo builds `shiro undo`: put the workspace back to before a turn.
func NewCmdUndo(f *Factory, runF func(*UndoOptions) error) *cobra.Command {
	opts := &UndoOptions{}
	cmd := &cobra.Command{
		Use:   "undo [TURN]",
		Short: "Put the workspace back to before a turn of a session",
		Long: `Put the workspace back to how it was before the last turn of this
directory's newest session (-c, the default) or of the session -r names;
with TURN, to before that turn (the later ones are undone too). Every file
the turns changed comes back, whatever changed it (a file tool or a command
in the sandbox): contents, modes, symlinks, created and deleted files. The
conversation is cut back to before the turn, so the next "shiro -c" does
not see it.

Undo restores the workspace only: packages installed in the container and
the container's HOME stay as they are. Ignored files and files over 10 MiB
are not recorded. A file changed after the turn ended is left as it is
unless you say yes (or pass --yes).

  shiro undo --list          the session's turns and what each changed
  shiro undo --list --json   the same as JSON
  shiro undo                 undo the last turn
  shiro undo 3               undo turns 3 and later`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				n, err := strconv.Atoi(args[0])
				if err != nil || n < 1 {
					return usagef("TURN must be a turn number (see shiro undo --list), not %q", args[0])
				}
				opts.Turn = n
			}
			if opts.JSON && !opts.List {
				return usagef("--json needs --list")
			}
			if opts.Continue && opts.Resume != "" {
				return usagef("-c and -r exclude each other")
			}
			if runF != nil {
				return runF(opts)
			}
			return runUndo(cmd, f, opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&opts.List, "list", false, "list the session's turns and what each changed")
	fl.BoolVar(&opts.JSON, "json", false, "with --list: print JSON")
	fl.BoolVarP(&opts.Continue, "continue", "c", false, "this directory's newest session (the default)")
	fl.StringVarP(&opts.Resume, "resume", "r", "", "the session with this id or unique prefix")
	fl.BoolVarP(&opts.Yes, "yes", "y", false, "also overwrite files changed after the turn, without asking")
	return cmd
}

func runUndo(cmd *cobra.Command, f *Factory, opts *UndoOptions) error {
	ctx := cmd.Context()
	ws, err := f.workspace()
	if err != nil {
		return err
	}
	paths, err := config.ResolvePaths(f.LookupEnv)
	if err != nil {
		return err
	}
	sessions := &store.Store{Dir: paths.SessionsDir()}
	var rec store.Record
	if opts.Resume != "" {
		rec, err = sessions.Resolve(opts.Resume)
	} else {
		rec, err = sessions.Latest(ws)
	}
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	w, err := workspace.Open(ws)
	if err != nil {
		return err
	}
	defer w.Close()
	st, err := orchestrator.OpenCheckpoints(paths.DataDir, ws, w.Root(), w.Gate())
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	defer st.Close()
	if opts.List {
		turns, err := orchestrator.ListTurns(ctx, st, rec.ID)
		if err != nil {
			return &ExitError{Code: 1, Err: err}
		}
		return printTurns(f, rec, turns, opts.JSON)
	}
	plan, err := orchestrator.PlanUndo(ctx, st, rec.ID, opts.Turn)
	if errors.Is(err, orchestrator.ErrNothingToUndo) || errors.Is(err, checkpoint.ErrNoCheckpoint) {
		return &ExitError{Code: 1, Err: fmt.Errorf("session %s: %w", rec.ID[:8], err)}
	}
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	overwrite := opts.Yes
	if len(plan.UserChanged) > 0 && !opts.Yes {
		fmt.Fprintf(f.ErrOut, "These files changed after the turn ended:\n")
		for _, p := range plan.UserChanged {
			fmt.Fprintf(f.ErrOut, "  %s\n", termsafe.Name(p))
		}
		if _, isTerm := term.GetFdInfo(f.In); isTerm {
			fmt.Fprintf(f.ErrOut, "Overwrite them too? [y/N] ")
			line, _ := bufio.NewReader(f.In).ReadString('\n')
			overwrite = strings.EqualFold(strings.TrimSpace(line), "y") || strings.EqualFold(strings.TrimSpace(line), "yes")
		}
		if !overwrite {
			fmt.Fprintf(f.ErrOut, "They are left as they are (--yes overwrites them).\n")
		}
	}
	done, _, err := orchestrator.ApplyUndo(ctx, st, plan, overwrite, orchestrator.FollowCopies(paths.DataDir, ws, st, w.Root()))
	if err != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("undo: %w", err)}
	}
	for _, c := range done {
		fmt.Fprintf(f.Out, "%s %s\n", undoVerb(c), termsafe.Name(c.Path))
	}
	for _, p := range plan.Unrestorable {
		fmt.Fprintf(f.ErrOut, "[notice] %s changed but is over 10 MiB and was not recorded: not restored\n", termsafe.Name(p))
	}
	msgs, ok := orchestrator.Rewind(rec.Messages, plan)
	if ok {
		rec.Messages = msgs
		if err := sessions.Save(&rec); err != nil {
			return &ExitError{Code: 1, Err: err}
		}
	} else {
		fmt.Fprintf(f.ErrOut, "[notice] the conversation no longer holds turn %d where it was (compacted?): it is left as it is\n", plan.Turn)
	}
	fmt.Fprintf(f.Out, "Undid %d turn(s) from turn %d (%d file(s)); the conversation is back to before %q.\n", plan.Turns, plan.Turn, len(done), plan.Prompt)
	return nil
}

// undoVerb says what the undo did to a file: the change reversed.
func undoVerb(c checkpoint.FileChange) string {
	switch c.Action {
	case checkpoint.Created:
		return "restored"
	case checkpoint.Deleted:
		return "removed "
	}
	return "reverted"
}

func printTurns(f *Factory, rec store.Record, turns []orchestrator.TurnInfo, asJSON bool) error {
	if asJSON {
		if turns == nil {
			turns = []orchestrator.TurnInfo{}
		}
		enc := json.NewEncoder(termsafe.JSON(f.Out))
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Session string                  `json:"session"`
			Turns   []orchestrator.TurnInfo `json:"turns"`
		}{rec.ID, turns})
	}
	if len(turns) == 0 {
		fmt.Fprintf(f.Out, "Session %s has no recorded turn.\n", rec.ID[:8])
		return nil
	}
	fmt.Fprintf(f.Out, "Session %s - %s\n", rec.ID[:8], rec.Title)
	for _, t := range turns {
		fmt.Fprintf(f.Out, "turn %d  %s  %q  %d file(s)\n", t.Turn, ago(t.Time), t.Prompt, len(t.Changes))
		for _, c := range t.Changes {
			by := ""
			if len(c.Tools) > 0 {
				by = " (" + strings.Join(c.Tools, ", ") + ")"
			}
			fmt.Fprintf(f.Out, "    %-8s %s%s\n", c.Action, termsafe.Name(c.Path), by)
		}
	}
	return nil
}
