package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/orchestrator/worktree"
	"github.com/shiroagent/shiro/sandbox"
)

// NewCmdAgents builds `shiro agents`: the worktree agents of the current
// repository (`shiro --worktree NAME`), and diff, merge, rm and prune.
func NewCmdAgents(f *Factory, sf *SandboxFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List this repository's worktree agents; diff, merge and remove them",
		Long: `List the worktree agents of the repository you are in (shiro --worktree NAME):
name, branch, running or ended, last activity, commits, changed files and
sandbox container. The subcommands show an agent's changes, merge its
branch into your current branch, and remove agents.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return agentsList(cmd.Context(), f, sf, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(newCmdAgentsDiff(f), newCmdAgentsMerge(f), newCmdAgentsRm(f, sf), newCmdAgentsPrune(f, sf))
	return cmd
}

// agentsHere is the repository of the current directory and the layout of
// its agents.
func (f *Factory) agentsHere() (worktree.Repository, worktree.Layout, config.Paths, error) {
	dir, err := f.workspace()
	if err != nil {
		return worktree.Repository{}, worktree.Layout{}, config.Paths{}, err
	}
	repo, err := worktree.FindRepository(dir)
	if errors.Is(err, worktree.ErrNoRepository) || errors.Is(err, worktree.ErrBareRepository) {
		return repo, worktree.Layout{}, config.Paths{}, fmt.Errorf("shiro agents works in a git checkout, and %s is in none: cd into the checkout whose agents you want", termsafe.Name(dir))
	}
	if err != nil {
		return repo, worktree.Layout{}, config.Paths{}, err
	}
	paths, err := config.ResolvePaths(f.LookupEnv)
	if err != nil {
		return repo, worktree.Layout{}, paths, err
	}
	folder, err := f.worktreesDir(paths)
	if err != nil {
		return repo, worktree.Layout{}, paths, err
	}
	return repo, worktree.LayoutFor(paths.DataDir, folder, repo.CommonDir), paths, nil
}

// sandboxesOf is the agents' view of the engines `shiro sandbox` manages.
type sandboxesOf []sandbox.Manager

func (ms sandboxesOf) List(ctx context.Context, ws string) ([]sandbox.Entry, error) {
	var out []sandbox.Entry
	for _, m := range ms {
		l, err := m.List(ctx, ws)
		if err != nil {
			return out, err
		}
		out = append(out, l...)
	}
	return out, nil
}

func (ms sandboxesOf) Remove(ctx context.Context, ws string, report func(sandbox.Item)) error {
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.Remove(ctx, ws, report))
	}
	return errors.Join(errs...)
}

func agentsList(ctx context.Context, f *Factory, sf *SandboxFlags, asJSON bool) error {
	_, l, paths, err := f.agentsHere()
	if err != nil {
		return err
	}
	opts := worktree.StatusOptions{Sessions: &store.Store{Dir: paths.SessionsDir()}}
	if agents, err := l.Agents(); err == nil && len(agents) > 0 {
		// Containers are listed when an engine answers; the agents are
		// listed regardless.
		if ms, err := f.managers(ctx, sf); err != nil {
			fmt.Fprintf(f.ErrOut, "[notice] sandbox containers not listed: %v\n", err)
		} else {
			defer closeAll(ms)
			opts.Sandboxes = sandboxesOf(ms)
		}
	}
	list, err := l.Statuses(ctx, opts)
	if err != nil {
		return err
	}
	if asJSON {
		type entry struct {
			worktree.Status
			Changed []string `json:"changed"`
		}
		out := make([]entry, 0, len(list))
		for _, s := range list {
			out = append(out, entry{s, s.Changed()})
		}
		enc := json.NewEncoder(termsafe.JSON(f.Out))
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(list) == 0 {
		fmt.Fprintln(f.Out, "No worktree agents in this repository (start one with shiro --worktree NAME).")
		return nil
	}
	tw := tabwriter.NewWriter(f.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tBRANCH\tSTATE\tLAST ACTIVITY\tCOMMITS\tCHANGED\tCONTAINER")
	var problems []string
	for _, s := range list {
		state := "ended"
		if s.Running {
			state = "running"
		}
		changed := strconv.Itoa(len(s.Changed()))
		if n := len(s.Uncommitted); n > 0 {
			changed += fmt.Sprintf(" (%d not committed)", n)
		}
		containers := make([]string, 0, len(s.Sandboxes))
		for _, e := range s.Sandboxes {
			containers = append(containers, termsafe.Name(e.String())+" ("+e.State+")")
		}
		if len(containers) == 0 {
			containers = append(containers, "-")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", s.Name, s.Branch, state, ago(s.LastActivity), s.Commits, changed, strings.Join(containers, ", "))
		for _, p := range s.Problems {
			problems = append(problems, s.Name+": "+termsafe.Name(p))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(f.ErrOut, "[notice] "+p)
	}
	return nil
}

// loadAgent is the record of the agent name of this repository.
func (f *Factory) loadAgent(name string) (worktree.Repository, worktree.Layout, *worktree.Agent, error) {
	repo, l, _, err := f.agentsHere()
	if err != nil {
		return repo, l, nil, err
	}
	a, err := l.Load(name)
	if errors.Is(err, worktree.ErrNoAgent) {
		err = fmt.Errorf("this repository has no worktree agent %s (shiro agents lists them)", name)
	}
	return repo, l, a, err
}

func newCmdAgentsDiff(f *Factory) *cobra.Command {
	var stat bool
	cmd := &cobra.Command{
		Use:   "diff NAME",
		Short: "Show what an agent's branch changed since it was made (git diff BASE...shiro/NAME)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, a, err := f.loadAgent(args[0])
			if err != nil {
				return err
			}
			diff, loose, err := worktree.Diff(cmd.Context(), a, stat)
			if err != nil {
				return err
			}
			if diff == "" {
				fmt.Fprintf(f.ErrOut, "%s has no commits that change files since %s.\n", a.Branch, shortID(a.Base))
			} else {
				fmt.Fprintln(f.Out, diff)
			}
			if len(loose) > 0 {
				fmt.Fprintf(f.ErrOut, "Not in this diff: %s not committed in the worktree %s (%s).\n", plural(len(loose), "file"), termsafe.Name(a.Path), termsafe.Name(fewOf(loose)))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&stat, "stat", false, "only a diffstat")
	return cmd
}

func newCmdAgentsMerge(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "merge NAME",
		Short: "Merge an agent's branch into your current branch (a fast-forward when possible)",
		Long: `Merge the branch shiro/NAME into the current branch of your checkout: a
fast-forward when possible, else a merge commit. It is refused while the agent
runs and when your checkout has changes that are not committed (staged or not).
A conflict is reported with its files, and your checkout is left as it was.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, l, a, err := f.loadAgent(args[0])
			if err != nil {
				return err
			}
			res, err := l.Merge(cmd.Context(), repo, a.Name)
			if err != nil {
				return err
			}
			branch := res.Into
			switch {
			case res.UpToDate:
				fmt.Fprintf(f.Out, "Already up to date: %s has nothing %s lacks.\n", a.Branch, termsafe.Name(branch))
			case res.FastForward:
				fmt.Fprintf(f.Out, "Fast-forwarded %s to %s (%s).\n", termsafe.Name(branch), a.Branch, shortID(res.Head))
			default:
				fmt.Fprintf(f.Out, "Merged %s into %s (merge commit %s).\n", a.Branch, termsafe.Name(branch), shortID(res.Head))
			}
			if n := len(res.Uncommitted); n > 0 {
				fmt.Fprintf(f.ErrOut, "Not merged: %s not committed in the worktree %s (%s).\n", plural(n, "file"), termsafe.Name(a.Path), termsafe.Name(fewOf(res.Uncommitted)))
			} else if !res.UpToDate {
				fmt.Fprintf(f.ErrOut, "When you are done with it: shiro agents rm %s\n", a.Name)
			}
			return nil
		},
	}
}

func newCmdAgentsRm(f *Factory, sf *SandboxFlags) *cobra.Command {
	var opts worktree.RemoveOptions
	cmd := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove agents: their worktree, sandbox container and HOME volume (the branch with --delete-branch)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, l, _, err := f.agentsHere()
			if err != nil {
				return err
			}
			for _, name := range args {
				if _, err := l.Load(name); err != nil {
					return fmt.Errorf("this repository has no worktree agent %s (shiro agents lists them)", name)
				}
			}
			ms := f.agentManagers(cmd.Context(), sf)
			defer closeAll(ms)
			opts.Sandboxes = sandboxesOf(ms)
			opts.Report = func(s string) { fmt.Fprintln(f.ErrOut, termsafe.Name(s)) }
			var errs []error
			for _, name := range args {
				if err := l.Remove(cmd.Context(), name, opts); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(f.Out, "Removed worktree agent %s%s.\n", name, branchFate(name, opts.DeleteBranch))
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVar(&opts.DeleteBranch, "delete-branch", false, "delete the agent's branch shiro/NAME too")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "remove a worktree whose changes are not committed")
	return cmd
}

// agentManagers are the engines whose containers rm and prune remove.
// Without one (no Docker, --no-sandbox) the agents still go: a container
// whose worktree is gone is removed by the next `shiro sandbox prune`.
func (f *Factory) agentManagers(ctx context.Context, sf *SandboxFlags) []sandbox.Manager {
	ms, err := f.managers(ctx, sf)
	if err != nil {
		fmt.Fprintf(f.ErrOut, "[notice] sandbox containers not removed: %v (shiro sandbox prune removes them once the engine answers)\n", err)
	}
	return ms
}

func branchFate(name string, deleted bool) string {
	if deleted {
		return " and its branch " + worktree.Branch(name)
	}
	return "; its branch " + worktree.Branch(name) + " is kept (git branch -D " + worktree.Branch(name) + " deletes it)"
}

func newCmdAgentsPrune(f *Factory, sf *SandboxFlags) *cobra.Command {
	var opts worktree.PruneOptions
	olderThan := "7d"
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove the ended agents whose last activity is older than --older-than",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			age, err := parseAge(olderThan)
			if err != nil {
				return usagef("--older-than: %v", err)
			}
			opts.OlderThan = age
			_, l, paths, err := f.agentsHere()
			if err != nil {
				return err
			}
			opts.Sessions = &store.Store{Dir: paths.SessionsDir()}
			if !opts.DryRun {
				ms := f.agentManagers(cmd.Context(), sf)
				defer closeAll(ms)
				opts.Sandboxes = sandboxesOf(ms)
				opts.Report = func(s string) { fmt.Fprintln(f.ErrOut, termsafe.Name(s)) }
			}
			pruned, err := l.Prune(cmd.Context(), opts)
			if err != nil {
				return err
			}
			var errs []error
			n := 0
			for _, p := range pruned {
				switch {
				case p.Err != nil:
					fmt.Fprintf(f.Out, "kept %s: %v\n", p.Name, p.Err)
					if !opts.DryRun {
						errs = append(errs, p.Err)
					}
				case opts.DryRun:
					n++
					fmt.Fprintf(f.Out, "would remove %s\n", p.Name)
				default:
					n++
					fmt.Fprintf(f.Out, "removed %s%s\n", p.Name, branchFate(p.Name, opts.DeleteBranch))
				}
			}
			if n == 0 && len(errs) == 0 {
				fmt.Fprintf(f.Out, "No ended worktree agent idle for longer than %s.\n", olderThan)
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVar(&olderThan, "older-than", olderThan, "remove agents idle for longer than this: e.g. 36h, 7d, 2w")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "only say which agents would be removed")
	cmd.Flags().BoolVar(&opts.DeleteBranch, "delete-branch", false, "delete the agents' branches too")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "remove worktrees whose changes are not committed too")
	return cmd
}

// parseAge reads a duration as time.ParseDuration does, with days (d) and
// weeks (w) besides: "7d", "2w", "36h", "1d12h".
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var total time.Duration
	for _, unit := range []struct {
		suffix string
		d      time.Duration
	}{{"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}} {
		if i := strings.Index(s, unit.suffix); i >= 0 {
			n, err := strconv.Atoi(s[:i])
			if err != nil || n < 0 {
				return 0, fmt.Errorf("%q is not an age like 36h, 7d or 2w", s)
			}
			total += time.Duration(n) * unit.d
			s = s[i+1:]
		}
	}
	if s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%q is not an age like 36h, 7d or 2w", s)
		}
		total += d
	}
	if total <= 0 {
		return 0, errors.New("the age must be more than zero")
	}
	return total, nil
}

// fewOf writes up to five of names, and how many more.
func fewOf(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
