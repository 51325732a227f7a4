package tools

import (
	"context"
	_ "embed"
)

//go:embed git_diff.md
var gitDiffDoc string

type gitDiffParams struct {
	Staged bool   `json:"staged,omitempty" jsonschema:"default=false" desc:"Show the index against HEAD."`
	Path   string `json:"path,omitempty" desc:"Only this file or directory."`
}

// NewGitDiff returns the git_diff tool.
func NewGitDiff() Tool { return newGitTool("git_diff", gitDiffDoc, runGitDiff) }

func runGitDiff(ctx context.Context, env *Env, p *gitDiffParams) (Result, error) {
	args := []string{"diff", "--no-color", "--no-ext-diff", "--no-textconv"}
	empty := "No uncommitted changes."
	if p.Staged {
		args = append(args, "--staged")
		empty = "Nothing staged."
	}
	if env.GoGit {
		return goGitDiff(ctx, env, p, empty)
	}
	r, err := runGit(ctx, env, withPath(args, p.Path)...)
	if err != nil {
		return Result{}, err
	}
	if noGit(r) {
		return goGitDiff(ctx, env, p, empty)
	}
	return gitResult(r, empty), nil
}
