package tools

import (
	"context"
	"errors"
	"strings"

	"github.com/shiroagent/shiro/tools/gitrepo"
)

// gitMissing is runGit's failure text when the sandbox has no git.
const gitMissing = "git is not installed or not on PATH."

// noGit reports a CLI run that failed for want of git: the tools then
// read the repository with go-git.
func noGit(r gitRun) bool { return r.failed != nil && r.failed.Text == gitMissing }

// withRepo opens the workspace's repository with go-git and runs f; what
// f returns ("" for empty) becomes the result, capped.
func withRepo(ctx context.Context, env *Env, empty string, f func(*gitrepo.Repo) (string, error)) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	repo, err := gitrepo.Open(env.Workspace, env.Root)
	if errors.Is(err, gitrepo.ErrNotRepository) {
		return Errorf("%s is not a git repository.", env.Workspace), nil
	}
	if err != nil {
		return Errorf("%v", err), nil
	}
	out, err := f(repo)
	switch {
	case errors.Is(err, gitrepo.ErrNoCommits):
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
	res, err := withRepo(ctx, env, "", func(r *gitrepo.Repo) (string, error) {
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
	return withRepo(ctx, env, empty, func(r *gitrepo.Repo) (string, error) { return r.Diff(p.Staged, p.Path) })
}

func goGitLog(ctx context.Context, env *Env, p *gitLogParams) (Result, error) {
	return withRepo(ctx, env, "No commits.", func(r *gitrepo.Repo) (string, error) { return r.Log(p.Limit, p.Path) })
}

func goGitShow(ctx context.Context, env *Env, p *gitShowParams) (Result, error) {
	return withRepo(ctx, env, "Nothing to show.", func(r *gitrepo.Repo) (string, error) { return r.Show(p.Ref, p.Path) })
}

func goGitBlame(ctx context.Context, env *Env, p *gitBlameParams, start, end int) (Result, error) {
	return withRepo(ctx, env, "No blame output.", func(r *gitrepo.Repo) (string, error) { return r.Blame(p.Path, start, end) })
}
