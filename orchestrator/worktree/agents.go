package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox"
)

// This file is `shiro agents`: the listing of a repository's worktree
// agents and what the user does with them afterwards (diff, merge, rm,
// prune).
//
// What it knows of the agents comes from shiro's records (Layout.State),
// which no sandbox can write, never from `git worktree list`: a worktree's
// administrative files are the repository's, and what is in an agent's
// worktree is the sandbox's. Git in an agent's worktree runs with its git
// directory and work tree named from the record, so a gitfile there is
// never followed.

// Agents reads every agent record of the layout, by name.
func (l Layout) Agents() ([]*Agent, error) {
	entries, err := os.ReadDir(l.State)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list worktree agents: %w", err)
	}
	var out []*Agent
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() || CheckName(name) != nil {
			continue // temporary files, locks
		}
		a, err := l.Load(name)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Agent) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Sandboxes finds and removes the sandboxes of a workspace: what `shiro
// sandbox ls` and `shiro sandbox rm` use (sandbox.Manager).
type Sandboxes interface {
	List(ctx context.Context, ws string) ([]sandbox.Entry, error)
	Remove(ctx context.Context, ws string, report func(sandbox.Item)) error
}

// Status is what `shiro agents` shows of an agent.
type Status struct {
	*Agent
	Running bool `json:"running"`
	// LastActivity is when the agent's newest session last saved, or the
	// agent was made.
	LastActivity time.Time `json:"lastActivity"`
	// Tip is the branch's commit ("" when the branch is gone); Commits
	// counts those since Base.
	Tip     string `json:"tip,omitempty"`
	Commits int    `json:"commits"`
	// Committed lists the files that differ between Base and Tip;
	// Uncommitted the worktree's changes not committed (untracked files
	// included).
	Committed   []string `json:"committed"`
	Uncommitted []string `json:"uncommitted"`
	// Sandboxes are the containers of the agent's worktree.
	Sandboxes []sandbox.Entry `json:"sandboxes"`
	// Problems say what is missing or could not be read.
	Problems []string `json:"problems,omitempty"`
}

// Changed is every file the agent changed, committed or not.
func (s Status) Changed() []string {
	out := slices.Concat(s.Committed, s.Uncommitted)
	slices.Sort(out)
	return slices.Compact(out)
}

// StatusOptions say where Statuses looks beyond the records: both may be
// nil.
type StatusOptions struct {
	Sessions  *store.Store
	Sandboxes Sandboxes
}

// Statuses is the status of every agent of the layout.
func (l Layout) Statuses(ctx context.Context, opts StatusOptions) ([]Status, error) {
	agents, err := l.Agents()
	if err != nil || len(agents) == 0 {
		return nil, err
	}
	var sessions []store.Record
	if opts.Sessions != nil {
		if sessions, err = opts.Sessions.List(0); err != nil {
			return nil, err
		}
	}
	out := make([]Status, 0, len(agents))
	for _, a := range agents {
		out = append(out, l.status(ctx, a, sessions, opts.Sandboxes))
	}
	return out, nil
}

func (l Layout) status(ctx context.Context, a *Agent, sessions []store.Record, sbs Sandboxes) Status {
	s := Status{Agent: a, Running: l.Running(a.Name), LastActivity: lastActivity(a, sessions), Committed: []string{}, Uncommitted: []string{}, Sandboxes: []sandbox.Entry{}}
	problem := func(err error) { s.Problems = append(s.Problems, err.Error()) }
	if tip, err := tip(ctx, a); err != nil {
		problem(err)
	} else {
		s.Tip = tip
		if files, err := committed(ctx, a, tip); err != nil {
			problem(err)
		} else {
			s.Committed = files
		}
		if n, err := Git(ctx, a.CommonDir, "rev-list", "--count", a.Base+".."+tip); err != nil {
			problem(err)
		} else {
			fmt.Sscan(n, &s.Commits)
		}
	}
	if u, err := uncommitted(ctx, a); err != nil {
		problem(err)
	} else {
		s.Uncommitted = u
	}
	if sbs != nil {
		if list, err := sbs.List(ctx, a.Path); err != nil {
			problem(fmt.Errorf("list the sandboxes of %s: %w", a.Name, err))
		} else {
			s.Sandboxes = append(s.Sandboxes, list...)
		}
	}
	return s
}

// lastActivity is the newest save of a session that ran in the agent's
// worktree, or the agent's creation.
func lastActivity(a *Agent, sessions []store.Record) time.Time {
	last := a.Created
	for _, r := range sessions {
		if (r.Cwd == a.Path || strings.HasPrefix(r.Cwd, a.Path+string(filepath.Separator))) && r.UpdatedAt.After(last) {
			last = r.UpdatedAt
		}
	}
	return last
}

// tip is the commit of the agent's branch.
func tip(ctx context.Context, a *Agent) (string, error) {
	out, err := Git(ctx, a.CommonDir, "rev-parse", "--verify", "--quiet", "refs/heads/"+a.Branch+"^{commit}")
	if err != nil || out == "" {
		return "", fmt.Errorf("the branch %s of worktree agent %s is gone", a.Branch, a.Name)
	}
	return out, nil
}

// committed lists the files that differ between the agent's base and tip
// (from their merge base, as `git diff Base...tip`).
func committed(ctx context.Context, a *Agent, tip string) ([]string, error) {
	out, err := Git(ctx, a.CommonDir, "diff", "--no-ext-diff", "--no-renames", "--name-only", "-z", a.Base+"..."+tip)
	if err != nil {
		return nil, fmt.Errorf("compare %s with its base: %w", a.Branch, err)
	}
	return splitZ(out), nil
}

// adminDir is the agent's worktree's own git directory, found among the
// repository's worktrees by the path it records (the repository's files:
// the worktree's gitfile, which is the sandbox's directory, is not read).
func adminDir(a *Agent) (string, error) {
	dirs, _ := filepath.Glob(filepath.Join(a.CommonDir, "worktrees", "*", "gitdir"))
	want := []string{filepath.Join(a.Path, ".git")}
	// git may have written the path with symlinks resolved: those of the
	// folders above the worktree (shiro's, not the sandbox's).
	if parent, err := filepath.EvalSymlinks(filepath.Dir(a.Path)); err == nil {
		want = append(want, filepath.Join(parent, filepath.Base(a.Path), ".git"))
	}
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err == nil && slices.Contains(want, filepath.Clean(strings.TrimSpace(string(b)))) {
			return filepath.Dir(f), nil
		}
	}
	return "", fmt.Errorf("%s is no longer a worktree of the repository %s", a.Path, a.CommonDir)
}

// worktreeGit runs git on the agent's worktree, its git directory and work
// tree named (never found through the worktree's files).
func worktreeGit(ctx context.Context, a *Agent, args ...string) (string, error) {
	admin, err := adminDir(a)
	if err != nil {
		return "", err
	}
	if fi, err := os.Lstat(a.Path); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("the worktree %s of agent %s is gone", a.Path, a.Name)
	}
	return Git(ctx, a.Path, append([]string{"--git-dir=" + admin, "--work-tree=" + a.Path}, args...)...)
}

// uncommitted lists the worktree's changes that are not committed, new
// files included. Submodules are not entered: a repository the sandbox
// made there is not git's to walk on the host.
func uncommitted(ctx context.Context, a *Agent) ([]string, error) {
	changed, err := worktreeGit(ctx, a, "diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--ignore-submodules=all", "--name-only", "-z", "HEAD")
	if err != nil {
		return nil, err
	}
	untracked, err := worktreeGit(ctx, a, "ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return nil, err
	}
	out := slices.Concat(splitZ(changed), splitZ(untracked))
	slices.Sort(out)
	return slices.Compact(out), nil
}

func splitZ(s string) []string {
	out := []string{}
	for p := range strings.SplitSeq(s, "\x00") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Diff is what the agent's branch changed since its base (`git diff
// Base...shiro/NAME`, with stat only a diffstat), and the files of its
// worktree that are not committed (not part of the diff).
func Diff(ctx context.Context, a *Agent, stat bool) (diff string, notCommitted []string, err error) {
	t, err := tip(ctx, a)
	if err != nil {
		return "", nil, err
	}
	// Each line is prefixed (then the prefix taken off) so that Git's
	// trimming keeps a diffstat's first line as git writes it.
	const prefix = ">"
	args := []string{"diff", "--no-ext-diff", "--line-prefix=" + prefix}
	if stat {
		args = append(args, "--stat")
	}
	out, err := Git(ctx, a.CommonDir, append(args, a.Base+"..."+t)...)
	if err != nil {
		return "", nil, fmt.Errorf("diff %s: %w", a.Branch, err)
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	diff = strings.Join(lines, "\n")
	if strings.TrimSpace(diff) == "" {
		diff = ""
	}
	notCommitted, _ = uncommitted(ctx, a) // a worktree that is gone has nothing uncommitted
	return diff, notCommitted, nil
}

// MergeResult says what Merge did.
type MergeResult struct {
	// UpToDate: the branch had nothing the checkout lacks.
	UpToDate bool
	// FastForward: the checkout's branch moved to the agent's tip;
	// otherwise a merge commit was made.
	FastForward bool
	// Into is the checkout's branch; Head its commit after the merge.
	Into, Head string
	// Uncommitted are the agent's worktree's changes the merge did not
	// bring (they are not committed).
	Uncommitted []string
}

// ConflictError is Merge's error when the agent's branch conflicts with
// the checkout: nothing was merged (or the merge was aborted) and the
// checkout is as it was.
type ConflictError struct {
	Name, Branch string
	Paths        []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("merging %s conflicts in %s; nothing was merged and your checkout is as it was (merge it yourself with git merge %s, or have the agent rebase its branch)",
		e.Branch, strings.Join(e.Paths, ", "), e.Branch)
}

// Merge merges the agent name's branch into the current branch of the
// checkout repo: a fast-forward when possible, else a merge commit. It
// refuses a checkout with changes (staged or not), a detached HEAD, a
// checkout that is an agent's worktree, and a running agent; on a conflict
// it aborts and returns a *ConflictError, the checkout as it was.
//
// Git runs on content the sandbox wrote, with hooks and fsmonitor off;
// merge drivers and filters the user's own configuration defines still
// run when the agent's .gitattributes names them.
func (l Layout) Merge(ctx context.Context, repo Repository, name string) (MergeResult, error) {
	a, err := l.Load(name)
	if err != nil {
		return MergeResult{}, err
	}
	release, err := l.Hold(name)
	if err != nil {
		return MergeResult{}, fmt.Errorf("%w; merge it when it has ended", err)
	}
	defer release()
	if repo.CommonDir != filepath.Clean(a.CommonDir) {
		return MergeResult{}, fmt.Errorf("worktree agent %s belongs to %s, not to the repository of %s", name, a.CommonDir, repo.Top)
	}
	if within(repo.Top, l.Root) {
		return MergeResult{}, fmt.Errorf("%s is a worktree agent's checkout; run shiro agents merge in your own checkout", repo.Top)
	}
	t, err := tip(ctx, a)
	if err != nil {
		return MergeResult{}, err
	}
	branch, err := Git(ctx, repo.Top, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil || branch == "" {
		return MergeResult{}, fmt.Errorf("%s has no current branch (HEAD is detached): check out the branch to merge %s into", repo.Top, a.Branch)
	}
	if op, err := inProgress(ctx, repo.Top); err != nil {
		return MergeResult{}, err
	} else if op != "" {
		return MergeResult{}, fmt.Errorf("your checkout %s is in the middle of a %s: finish or abort it, then merge %s", repo.Top, op, a.Branch)
	}
	if dirty, err := Git(ctx, repo.Top, "status", "--porcelain=v1", "--untracked-files=no"); err != nil {
		return MergeResult{}, err
	} else if dirty != "" {
		return MergeResult{}, fmt.Errorf("your checkout %s has changes that are not committed: commit or stash them, then merge %s", repo.Top, a.Branch)
	}
	head, err := Git(ctx, repo.Top, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return MergeResult{}, err
	}
	res := MergeResult{Into: branch, Head: head}
	res.Uncommitted, _ = uncommitted(ctx, a)
	if _, err := Git(ctx, repo.Top, "merge-base", "--is-ancestor", t, head); err == nil {
		res.UpToDate = true
		return res, nil
	}
	_, ffErr := Git(ctx, repo.Top, "merge-base", "--is-ancestor", head, t)
	if ffErr != nil {
		// A conflict is found before the checkout is touched.
		if paths, ok := mergeTreeConflicts(ctx, repo.Top, head, t); ok && len(paths) > 0 {
			return MergeResult{}, &ConflictError{Name: a.Name, Branch: a.Branch, Paths: paths}
		}
	}
	origHead, _ := Git(ctx, repo.Top, "rev-parse", "--quiet", "--verify", "ORIG_HEAD")
	// The tip is merged by its id (the branch cannot move under the
	// merge), under the message a merge of the branch has.
	msg := fmt.Sprintf("Merge branch '%s' into %s", a.Branch, branch)
	_, mergeErr := Git(ctx, repo.Top, "merge", "--no-edit", "--ff", "--no-stat", "--no-verify", "-m", msg, t)
	if mergeErr != nil {
		return MergeResult{}, undoMerge(ctx, repo, a, head, origHead, mergeErr)
	}
	res.FastForward = ffErr == nil
	if res.Head, err = Git(ctx, repo.Top, "rev-parse", "--verify", "HEAD^{commit}"); err != nil {
		return MergeResult{}, err
	}
	return res, nil
}

// mergeTreeConflicts merges head and tip in the object store only (`git
// merge-tree --write-tree`, git 2.38 and later) and returns the paths that
// conflict; ok is false when git could not say (an older git: the merge
// itself then finds the conflict, and is aborted).
func mergeTreeConflicts(ctx context.Context, top, head, tip string) (paths []string, ok bool) {
	out, err := Git(ctx, top, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", head, tip)
	fields := splitZ(out)
	if len(fields) == 0 || !isObjectID(fields[0]) {
		return nil, false
	}
	if err == nil {
		return nil, true
	}
	return fields[1:], len(fields) > 1
}

func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

// inProgress names the operation the checkout top is in the middle of (a
// merge, rebase, cherry-pick, revert), "" when none: Merge refuses then,
// so that what it aborts can only be its own merge.
func inProgress(ctx context.Context, top string) (string, error) {
	gitDir, err := Git(ctx, top, "rev-parse", "--path-format=absolute", "--git-dir")
	if err != nil {
		return "", err
	}
	for _, s := range []struct{ file, op string }{
		{"MERGE_HEAD", "merge"}, {"rebase-merge", "rebase"}, {"rebase-apply", "rebase"},
		{"CHERRY_PICK_HEAD", "cherry-pick"}, {"REVERT_HEAD", "revert"},
	} {
		if _, err := os.Lstat(filepath.Join(gitDir, s.file)); err == nil {
			return s.op, nil
		}
	}
	return "", nil
}

// undoMerge puts the checkout back after a failed merge: the conflict's
// paths are kept for the error, the merge is aborted, ORIG_HEAD is put
// back, and HEAD and the index are checked to be as before.
func undoMerge(ctx context.Context, repo Repository, a *Agent, head, origHead string, mergeErr error) error {
	// The merge may have been cancelled: put the checkout back regardless.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	conflicts, _ := Git(ctx, repo.Top, "diff", "--name-only", "-z", "--diff-filter=U")
	paths := splitZ(conflicts)
	gitDir, err := Git(ctx, repo.Top, "rev-parse", "--path-format=absolute", "--git-dir")
	if err != nil {
		return errors.Join(mergeErr, err)
	}
	if _, err := os.Lstat(filepath.Join(gitDir, "MERGE_HEAD")); err == nil {
		if _, err := Git(ctx, repo.Top, "merge", "--abort"); err != nil {
			return fmt.Errorf("merging %s failed and so did git merge --abort (see git status in %s): %w", a.Branch, repo.Top, errors.Join(mergeErr, err))
		}
	}
	if origHead != "" {
		_, _ = Git(ctx, repo.Top, "update-ref", "--no-deref", "ORIG_HEAD", origHead)
	} else {
		_, _ = Git(ctx, repo.Top, "update-ref", "--no-deref", "-d", "ORIG_HEAD")
	}
	now, err := Git(ctx, repo.Top, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil || now != head {
		return fmt.Errorf("merging %s failed and HEAD is no longer %s (see git status and git reflog in %s): %w", a.Branch, head, repo.Top, mergeErr)
	}
	if dirty, err := Git(ctx, repo.Top, "status", "--porcelain=v1", "--untracked-files=no"); err != nil || dirty != "" {
		return fmt.Errorf("merging %s failed and left changes in %s (see git status there): %w", a.Branch, repo.Top, mergeErr)
	}
	if len(paths) > 0 {
		return &ConflictError{Name: a.Name, Branch: a.Branch, Paths: paths}
	}
	return fmt.Errorf("merge %s into %s: %w", a.Branch, repo.Top, mergeErr)
}

// RemoveOptions are Remove's choices.
type RemoveOptions struct {
	// DeleteBranch deletes the agent's branch too (it is kept otherwise).
	DeleteBranch bool
	// Force removes a worktree that has changes not committed.
	Force bool
	// Sandboxes removes the worktree's containers and HOME volumes (nil:
	// they are left).
	Sandboxes Sandboxes
	// Report is told each thing before it goes.
	Report func(what string)
}

// ErrUncommitted is Remove's error for a worktree with changes not
// committed, without Force.
var ErrUncommitted = errors.New("has changes that are not committed")

// Remove removes the agent name: its sandboxes, its worktree, its record,
// and with DeleteBranch its branch. It refuses a running agent, and
// without Force one whose worktree has changes not committed.
func (l Layout) Remove(ctx context.Context, name string, opts RemoveOptions) error {
	a, err := l.Load(name)
	if err != nil {
		return err
	}
	release, err := l.Hold(name)
	if err != nil {
		return fmt.Errorf("%w; remove it when it has ended", err)
	}
	defer release()
	return l.remove(ctx, a, opts)
}

func (l Layout) remove(ctx context.Context, a *Agent, opts RemoveOptions) error {
	report := func(format string, args ...any) {
		if opts.Report != nil {
			opts.Report(fmt.Sprintf(format, args...))
		}
	}
	// The record is shiro's, but a path from it is checked before
	// anything there is deleted: the agent's own directory, named so.
	if filepath.Base(a.Path) != a.Name || filepath.Base(filepath.Dir(a.Path)) != RepoKey(a.CommonDir) || !filepath.IsAbs(a.Path) {
		return fmt.Errorf("the record of worktree agent %s names %s, which is not an agent's worktree; remove it by hand", a.Name, a.Path)
	}
	if !opts.Force {
		if u, err := uncommitted(ctx, a); err == nil && len(u) > 0 {
			return fmt.Errorf("the worktree of agent %s %w (%s): commit them there, or remove it with --force", a.Name, ErrUncommitted, strings.Join(u, ", "))
		}
	}
	if opts.Sandboxes != nil {
		err := opts.Sandboxes.Remove(ctx, a.Path, func(it sandbox.Item) { report("removing %s %s", it.Kind, it.Name) })
		if err != nil {
			return fmt.Errorf("remove the sandbox of worktree agent %s: %w", a.Name, err)
		}
	}
	report("removing worktree %s", a.Path)
	if _, err := adminDir(a); err == nil {
		// --force twice: uncommitted changes were decided on above, and a
		// lock does not keep it. (Without --force git would run status
		// in the worktree, submodules and all.)
		if _, err := Git(ctx, a.CommonDir, "worktree", "remove", "--force", "--force", a.Path); err != nil {
			return fmt.Errorf("remove the worktree of agent %s: %w", a.Name, err)
		}
	}
	if err := os.RemoveAll(a.Path); err != nil {
		return fmt.Errorf("remove the worktree of agent %s: %w", a.Name, err)
	}
	if opts.DeleteBranch {
		if _, err := tip(ctx, a); err == nil {
			report("deleting branch %s", a.Branch)
			if _, err := Git(ctx, a.CommonDir, "branch", "-D", a.Branch); err != nil {
				return fmt.Errorf("delete the branch of agent %s: %w", a.Name, err)
			}
		}
	}
	if err := os.Remove(l.recordPath(a.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	_ = os.Remove(l.lockPath(a.Name)) // held by us until release: a new session makes its own
	return nil
}

// PruneOptions are Prune's choices.
type PruneOptions struct {
	// OlderThan: agents whose last activity is older are removed.
	OlderThan time.Duration
	// DryRun only says which.
	DryRun bool
	// Sessions give the agents' last activity (nil: their creation).
	Sessions *store.Store
	RemoveOptions
}

// Pruned is one agent Prune removed (or, in a dry run, would), or kept
// for Err.
type Pruned struct {
	Name string
	Err  error
}

// Prune removes the ended agents whose last activity is older than
// OlderThan. An agent that cannot go (changes not committed without Force)
// is reported with its error; the others still go.
func (l Layout) Prune(ctx context.Context, opts PruneOptions) ([]Pruned, error) {
	if opts.OlderThan <= 0 {
		return nil, errors.New("prune needs an age greater than zero (--older-than)")
	}
	statuses, err := l.Statuses(ctx, StatusOptions{Sessions: opts.Sessions})
	if err != nil {
		return nil, err
	}
	var out []Pruned
	for _, s := range statuses {
		if s.Running || time.Since(s.LastActivity) < opts.OlderThan {
			continue
		}
		if opts.DryRun {
			p := Pruned{Name: s.Name}
			if !opts.Force && len(s.Uncommitted) > 0 {
				p.Err = fmt.Errorf("the worktree of agent %s %w: commit them there, or prune with --force", s.Name, ErrUncommitted)
			}
			out = append(out, p)
			continue
		}
		out = append(out, Pruned{Name: s.Name, Err: l.Remove(ctx, s.Name, opts.RemoveOptions)})
	}
	return out, nil
}
