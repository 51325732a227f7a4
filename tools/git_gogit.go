package tools

import (
	"context"
	"errors"
	"os"
	"strings"
)

// GitRepo is a repository read in this process, without the git program
// (go-git: tools/gitrepo), so that nothing the repository configures
// runs. The git tools use it under --no-sandbox and when the sandbox has
// no git. Its methods print in the git CLI's formats (docs/tools.md lists
// where they differ).
type GitRepo interface {
	// Branch is the branch HEAD names, or HEAD when detached.
	Branch() (string, error)
	// Status is `git status --porcelain=v1`.
	Status() (string, error)
	Diff(staged bool, path string) (string, error)
	Log(limit int, path string) (string, error)
	Show(ref, path string) (string, error)
	Blame(path string, start, end int) (string, error)
}

// GitOpener opens the repository that holds the workspace ws, reading its
// worktree through root.
type GitOpener func(ws string, root *os.Root) (GitRepo, error)

// Errors a GitOpener and a GitRepo return for the tools to word.
var (
	// ErrNotRepository: the workspace is in no repository.
	ErrNotRepository = errors.New("not a git repository")
	// ErrNoCommits: HEAD has no commit yet.
	ErrNoCommits = errors.New("no commits")
)

// gitMissing is runGit's failure text when the sandbox has no git.
const gitMissing = "git is not installed or not on PATH."

// noGit reports a CLI run that failed for want of git: the tools then
// read the repository with go-git.
func noGit(r gitRun) bool { return r.failed != nil && r.failed.Text == gitMissing }

// withRepo opens the workspace's repository with go-git and runs f; what
// f returns ("" for empty) becomes the result, capped.
func withRepo(ctx context.Context, env *Env, empty string, f func(GitRepo) (string, error)) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if env.OpenGit == nil {
		return Errorf("%s", gitMissing), nil
	}
	repo, err := env.OpenGit(env.Workspace, env.Root)
	if errors.Is(err, ErrNotRepository) {
		return Errorf("%s is not a git repository.", env.Workspace), nil
	}
	if err != nil {
		return Errorf("%v", err), nil
	}
	out, err := f(repo)
	switch {
	case errors.Is(err, ErrNoCommits):
		return Text("No commits."), nil
	case err != nil:
		return Errorf("%s", Cap(err.Error())), nil
	}
	if strings.TrimSpace(out) == "" {
		return Text(empty), nil
	}
	return Text(Cap(strings.TrimRight(out, "\n"))), nil
}

func goGitStatus(ctx context.Context, env *Env) (Result, error) {
	var branch string
	res, err := withRepo(ctx, env, "", func(r GitRepo) (string, error) {
		b, err := r.Branch()
		if err != nil {
			return "", err
		}
		branch = b
		st, err := r.Status()
		if err != nil {
			return "", err
		}
		return describeStatus(branch, st), nil
	})
	return res, err
}

func goGitDiff(ctx context.Context, env *Env, p *gitDiffParams, empty string) (Result, error) {
	return withRepo(ctx, env, empty, func(r GitRepo) (string, error) { return r.Diff(p.Staged, p.Path) })
}

func goGitLog(ctx context.Context, env *Env, p *gitLogParams) (Result, error) {
	return withRepo(ctx, env, "No commits.", func(r GitRepo) (string, error) { return r.Log(p.Limit, p.Path) })
}

func goGitShow(ctx context.Context, env *Env, p *gitShowParams) (Result, error) {
	return withRepo(ctx, env, "Nothing to show.", func(r GitRepo) (string, error) { return r.Show(p.Ref, p.Path) })
}

func goGitBlame(ctx context.Context, env *Env, p *gitBlameParams, start, end int) (Result, error) {
	return withRepo(ctx, env, "No blame output.", func(r GitRepo) (string, error) { return r.Blame(p.Path, start, end) })
}
