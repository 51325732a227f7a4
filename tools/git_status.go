package tools

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
)

//go:embed git_status.md
var gitStatusDoc string

// gitStatusFiles is the most files git_status lists.
const gitStatusFiles = 200

type gitStatusParams struct{}

// NewGitStatus returns the git_status tool.
func NewGitStatus() Tool { return newGitTool("git_status", gitStatusDoc, runGitStatus) }

func runGitStatus(ctx context.Context, env *Env, _ *gitStatusParams) (Result, error) {
	if env.GoGit {
		return goGitStatus(ctx, env)
	}
	branch, err := runGit(ctx, env, "rev-parse", "--abbrev-ref", "HEAD")
	if err != nil {
		return Result{}, err
	}
	if noGit(branch) {
		return goGitStatus(ctx, env)
	}
	if branch.failed != nil && strings.Contains(branch.stderr, "unknown revision") {
		// No commit yet: HEAD names a branch that does not exist.
		if unborn, err := runGit(ctx, env, "symbolic-ref", "--short", "-q", "HEAD"); err != nil {
			return Result{}, err
		} else if unborn.failed == nil && unborn.out != "" {
			branch = unborn
		}
	}
	if branch.failed != nil {
		return *branch.failed, nil
	}
	status, err := runGit(ctx, env, "status", "--porcelain=v1")
	if err != nil {
		return Result{}, err
	}
	if status.failed != nil {
		return *status.failed, nil
	}
	// Not trimmed at the start: the first line may open with a space (" M").
	return Text(Cap(describeStatus(branch.out, strings.TrimRight(status.raw, "\n")))), nil
}

// describeStatus turns porcelain v1 lines into words: a header and one
// "<path>  (<labels>)" line per file.
func describeStatus(branch, porcelain string) string {
	if porcelain == "" {
		return fmt.Sprintf("On %s, working tree clean.", branch)
	}
	lines := strings.Split(porcelain, "\n")
	var b strings.Builder
	fmt.Fprintf(&b, "On %s, %d changed:", branch, len(lines))
	for i, l := range lines {
		if i == gitStatusFiles {
			fmt.Fprintf(&b, "\n... [%d more]", len(lines)-gitStatusFiles)
			break
		}
		if len(l) < 4 {
			continue
		}
		fmt.Fprintf(&b, "\n%s  (%s)", l[3:], statusLabels(l[0], l[1]))
	}
	return b.String()
}

// statusLabels describes a porcelain XY pair: the index column as
// "staged <label>" (unless space or ?), the worktree column as "<label>";
// "unknown" when neither says anything.
func statusLabels(index, worktree byte) string {
	var labels []string
	if index != ' ' && index != '?' {
		labels = append(labels, "staged "+statusLabel(index))
	}
	if worktree != ' ' {
		labels = append(labels, statusLabel(worktree))
	}
	if len(labels) == 0 {
		return "unknown"
	}
	return strings.Join(labels, ", ")
}

func statusLabel(c byte) string {
	switch c {
	case 'M':
		return "modified"
	case 'A':
		return "added"
	case 'D':
		return "deleted"
	case 'R':
		return "renamed"
	case 'C':
		return "copied"
	case 'U':
		return "conflicted"
	case '?':
		return "untracked"
	case '!':
		return "ignored"
	case 'T':
		return "type changed"
	}
	return "unknown"
}
