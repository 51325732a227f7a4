package tools

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
)

//go:embed multi_edit.md
var multiEditDoc string

type editSpec struct {
	OldString  string `json:"oldString" jsonschema:"minLength=1"`
	NewString  string `json:"newString"`
	ReplaceAll bool   `json:"replaceAll,omitempty" jsonschema:"default=false"`
}

type multiEditParams struct {
	Path  string     `json:"path"`
	Edits []editSpec `json:"edits" jsonschema:"minItems=1"`
}

// NewMultiEdit returns the multi_edit tool. Its Check says, before anyone
// is asked, that the edits cannot apply.
func NewMultiEdit() Tool {
	return newFileTool("multi_edit", SetEditPlus, true, multiEditDoc, runMultiEdit).withCheck(func(env *Env, p *multiEditParams) string {
		_, _, _, problem := planMultiEdit(env, p)
		return problem
	})
}

func runMultiEdit(_ context.Context, env *Env, p *multiEditParams) (Result, error) {
	rel, content, counts, problem := planMultiEdit(env, p)
	if problem != "" {
		return Errorf("%s", problem), nil
	}
	if err := writeAtomic(env, rel, []byte(content)); err != nil {
		return Errorf("%s", writeProblem(env, p.Path, err)), nil
	}
	return Text(fmt.Sprintf("Applied %d edit(s) to %s (%s)", len(p.Edits), p.Path, strings.Join(counts, ", "))), nil
}

// planMultiEdit reads the file and applies the edits in memory: the new
// content and each edit's count, or why the edits cannot apply.
func planMultiEdit(env *Env, p *multiEditParams) (rel, content string, counts []string, problem string) {
	for i, e := range p.Edits {
		if e.OldString == e.NewString {
			return "", "", nil, fmt.Sprintf("edit %d: oldString and newString are identical", i+1)
		}
	}
	rel, original, problem := readForEdit(env, p.Path)
	if problem != "" {
		return "", "", nil, problem
	}
	content = original
	counts = make([]string, len(p.Edits))
	for i, e := range p.Edits {
		n := strings.Count(content, e.OldString)
		switch {
		case n == 0:
			return "", "", nil, fmt.Sprintf("edit %d: oldString not found in %s. No edits were applied.", i+1, p.Path)
		case n > 1 && !e.ReplaceAll:
			return "", "", nil, fmt.Sprintf("edit %d: oldString appears %d times in %s. Add surrounding context or set replaceAll. No edits were applied.", i+1, n, p.Path)
		case !e.ReplaceAll:
			n = 1
		}
		content = replace(content, e.OldString, e.NewString, e.ReplaceAll)
		counts[i] = fmt.Sprintf("%dx", n)
	}
	if content == original {
		return "", "", nil, fmt.Sprintf("No change to %s: the edits cancel out.", p.Path)
	}
	return rel, content, counts, ""
}
