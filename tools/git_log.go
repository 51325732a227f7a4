package tools

import (
	"context"
	_ "embed"
	"strconv"
	"strings"
)

//go:embed git_log.md
var gitLogDoc string

type gitLogParams struct {
	Limit int    `json:"limit,omitempty" jsonschema:"minimum=1,maximum=40,default=15"`
	Path  string `json:"path,omitempty" desc:"Only commits touching this file or directory."`
}

// NewGitLog returns the git_log tool.
func NewGitLog() Tool { return newGitTool("git_log", gitLogDoc, runGitLog) }

func runGitLog(ctx context.Context, env *Env, p *gitLogParams) (Result, error) {
	args := []string{"log", "-n" + strconv.Itoa(p.Limit), "--date=short", "--pretty=format:%h  %ad  %an  %s"}
	if env.GoGit {
		return goGitLog(ctx, env, p)
	}
	r, err := runGit(ctx, env, withPath(args, p.Path)...)
	if err != nil {
		return Result{}, err
	}
	if noGit(r) {
		return goGitLog(ctx, env, p)
	}
	if r.failed != nil && strings.Contains(r.stderr, "does not have any commits yet") {
		return Text("No commits."), nil
	}
	return gitResult(r, "No commits."), nil
}
