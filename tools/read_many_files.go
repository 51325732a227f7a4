package tools

import (
	"context"
	_ "embed"
	"strings"
	"sync"
)

//go:embed read_many_files.md
var readManyFilesDoc string

type readSpec struct {
	Path   string `json:"path"`
	Offset int    `json:"offset,omitempty" jsonschema:"minimum=1,default=1"`
	Limit  int    `json:"limit,omitempty" jsonschema:"minimum=1,default=2000"`
}

type readManyFilesParams struct {
	Files []readSpec `json:"files" jsonschema:"minItems=1,maxItems=20"`
}

// NewReadManyFiles returns the read_many_files tool.
func NewReadManyFiles() Tool {
	return newFileTool("read_many_files", SetEditPlus, false, readManyFilesDoc, runReadManyFiles)
}

// runReadManyFiles reads every entry concurrently and returns the blocks in
// the given order; an entry that cannot be read is reported in its block.
func runReadManyFiles(_ context.Context, env *Env, p *readManyFilesParams) (Result, error) {
	texts := make([]string, len(p.Files))
	var wg sync.WaitGroup
	for i, spec := range p.Files {
		wg.Go(func() {
			text, problem := readLines(env, spec.Path, spec.Offset, spec.Limit)
			if problem != "" {
				text = "[unreadable: " + problem + "]"
			}
			texts[i] = text
		})
	}
	wg.Wait()
	size := 0
	for i, t := range texts {
		size += len(t) + len(p.Files[i].Path) + 16
	}
	var b strings.Builder
	b.Grow(size)
	for i, t := range texts {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("===== ")
		b.WriteString(p.Files[i].Path)
		b.WriteString(" =====\n")
		b.WriteString(t)
	}
	return Text(b.String()), nil
}
