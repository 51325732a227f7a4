package tools

import (
	"context"
	_ "embed"
	"fmt"
)

//go:embed write_file.md
var writeFileDoc string

type writeFileParams struct {
	Path    string `json:"path" desc:"Workspace-relative path."`
	Content string `json:"content" desc:"The whole new content, exactly as on disk."`
}

// NewWriteFile returns the write_file tool.
func NewWriteFile() Tool {
	return newFileTool("write_file", SetCore, true, writeFileDoc, func(_ context.Context, env *Env, p *writeFileParams) (Result, error) {
		rel, err := resolvePath(env, p.Path)
		if err == nil {
			err = writeAtomic(env, rel, []byte(p.Content))
		}
		if err != nil {
			return Errorf("%s", writeProblem(env, p.Path, err)), nil
		}
		return Text(fmt.Sprintf("Wrote %d chars to %s", charCount(p.Content), p.Path)), nil
	})
}
