package tools

import (
	"context"
	_ "embed"
)

//go:embed git_show.md
var gitShowDoc string

type gitShowParams struct {
	Ref  string `json:"ref" jsonschema:"minLength=1" desc:"Hash, branch, tag or revision (HEAD~2)."`
	Path string `json:"path,omitempty" desc:"Only this file or directory."`
}

// NewGitShow returns the git_show tool.
func NewGitShow() Tool { return newGitTool("git_show", gitShowDoc, runGitShow) }

func runGitShow(ctx context.Context, env *Env, p *gitShowParams) (Result, error) {
	// --end-of-options: a ref such as "--output=x" is a revision, never
	// an option.
	args := []string{"show", "--no-color", "--date=short", "--no-ext-diff", "--no-textconv", "--end-of-options", p.Ref}
	if env.GoGit {
		return goGitShow(ctx, env, p)
	}
	r, err := runGit(ctx, env, withPath(args, p.Path)...)
	if err != nil {
		return Result{}, err
	}
	if noGit(r) {
		return goGitShow(ctx, env, p)
	}
	return gitResult(r, "Nothing to show."), nil
}
