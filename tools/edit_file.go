package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/shiroagent/shiro/internal/confine"
)

//go:embed edit_file.md
var editFileDoc string

type editFileParams struct {
	Path       string `json:"path"`
	OldString  string `json:"oldString" jsonschema:"minLength=1"`
	NewString  string `json:"newString"`
	ReplaceAll bool   `json:"replaceAll,omitempty" jsonschema:"default=false"`
}

// NewEditFile returns the edit_file tool. Its Check says, before anyone is
// asked, that an edit cannot apply.
func NewEditFile() Tool {
	return newFileTool("edit_file", SetCore, true, editFileDoc, runEditFile).withCheck(func(env *Env, p *editFileParams) string {
		_, _, _, problem := planEditFile(env, p)
		return problem
	})
}

func runEditFile(_ context.Context, env *Env, p *editFileParams) (Result, error) {
	rel, content, n, problem := planEditFile(env, p)
	if problem != "" {
		return Errorf("%s", problem), nil
	}
	if err := writeAtomic(env, rel, []byte(content)); err != nil {
		return Errorf("%s", writeProblem(env, p.Path, err)), nil
	}
	return Text(fmt.Sprintf("Replaced %d occurrence(s) in %s", n, p.Path)), nil
}

// planEditFile reads the file and applies the edit in memory: the new
// content and the number of replacements, or why the edit cannot apply.
func planEditFile(env *Env, p *editFileParams) (rel, content string, n int, problem string) {
	if p.OldString == p.NewString {
		return "", "", 0, "oldString and newString are identical"
	}
	rel, content, problem = readForEdit(env, p.Path)
	if problem != "" {
		return "", "", 0, problem
	}
	n, problem = countMatches(content, p.OldString, p.ReplaceAll, p.Path)
	if problem != "" {
		return "", "", 0, problem
	}
	return rel, replace(content, p.OldString, p.NewString, p.ReplaceAll), n, ""
}

// readForEdit reads the whole file at the model's path p.
func readForEdit(env *Env, p string) (rel, content, problem string) {
	rel, err := resolvePath(env, p)
	if err != nil {
		return "", "", fileProblem(env.Root, p, err)
	}
	data, err := readRegular(env.Root, rel)
	if errors.Is(err, confine.ErrNotRegular) {
		return "", "", fmt.Sprintf("%s is not a regular file.", p)
	}
	if err != nil {
		return "", "", fileProblem(env.Root, p, err)
	}
	return rel, string(data), ""
}

// countMatches counts old in content and reports the model's problem when
// the edit cannot apply: no match, or several without replaceAll.
func countMatches(content, old string, replaceAll bool, p string) (int, string) {
	n := strings.Count(content, old)
	switch {
	case n == 0:
		return 0, fmt.Sprintf("oldString not found in %s", p)
	case n > 1 && !replaceAll:
		return n, fmt.Sprintf("oldString appears %d times in %s. Add surrounding context or set replaceAll.", n, p)
	}
	return n, ""
}

func replace(content, old, new string, all bool) string {
	if all {
		return strings.ReplaceAll(content, old, new)
	}
	return strings.Replace(content, old, new, 1)
}
