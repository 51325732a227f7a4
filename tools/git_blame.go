package tools

import (
	"context"
	_ "embed"
	"fmt"
)

//go:embed git_blame.md
var gitBlameDoc string

// gitBlameSpan is how many lines after startLine git_blame shows when no
// endLine is given.
const gitBlameSpan = 40

type gitBlameParams struct {
	Path      string `json:"path" jsonschema:"minLength=1"`
	StartLine int    `json:"startLine,omitempty" jsonschema:"minimum=1" desc:"First line (1-based); alone, 41 lines from it."`
	EndLine   int    `json:"endLine,omitempty" jsonschema:"minimum=1"`
}

// NewGitBlame returns the git_blame tool.
func NewGitBlame() Tool { return newGitTool("git_blame", gitBlameDoc, runGitBlame) }

func runGitBlame(ctx context.Context, env *Env, p *gitBlameParams) (Result, error) {
	args := []string{"blame", "--date=short", "-w", "--no-textconv"}
	var start, end int
	if p.StartLine > 0 || p.EndLine > 0 {
		start, end = max(p.StartLine, 1), p.EndLine
		if end == 0 {
			end = start + gitBlameSpan
		}
		args = append(args, "-L", fmt.Sprintf("%d,%d", start, end))
	}
	if env.GoGit {
		return goGitBlame(ctx, env, p, start, end)
	}
	r, err := runGit(ctx, env, append(args, "--", p.Path)...)
	if err != nil {
		return Result{}, err
	}
	if noGit(r) {
		return goGitBlame(ctx, env, p, start, end)
	}
	return gitResult(r, "No blame output."), nil
}
