package tools

import (
	"context"
	_ "embed"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

//go:embed glob.md
var globDoc string

const defaultGlobLimit = 200

type globParams struct {
	Pattern        string `json:"pattern" jsonschema:"minLength=1"`
	Limit          int    `json:"limit,omitempty" jsonschema:"minimum=1,default=200"`
	IncludeIgnored bool   `json:"includeIgnored,omitempty" jsonschema:"default=false" desc:"Also files the ignore rules skip."`
}

// NewGlob returns the glob tool.
func NewGlob() Tool {
	return newFileTool("glob", SetCore, false, globDoc, runGlob)
}

func runGlob(ctx context.Context, env *Env, p *globParams) (Result, error) {
	pattern := p.Pattern
	if filepath.IsAbs(pattern) {
		ws := filepath.ToSlash(filepath.Clean(env.Workspace))
		rest, ok := strings.CutPrefix(pattern, ws+"/")
		if !ok {
			return Errorf("Path escapes workspace: %s", p.Pattern), nil
		}
		pattern = rest
	}
	for strings.HasPrefix(pattern, "./") {
		pattern = pattern[2:]
	}
	if !doublestar.ValidatePattern(pattern) {
		return Errorf("Invalid glob pattern: %s", p.Pattern), nil
	}
	// Walk only below the pattern's fixed leading directories.
	dir := ""
	if base, rest := doublestar.SplitPattern(pattern); base != "." && !strings.Contains(base, `\`) {
		base = path.Clean(base)
		if base == ".." || strings.HasPrefix(base, "../") {
			return Errorf("Path escapes workspace: %s", p.Pattern), nil
		}
		if base != "." {
			dir, pattern = base, base+"/"+rest
			excluded, err := Excluded(ctx, env.Root, dir, p.IncludeIgnored)
			if err != nil {
				return Result{}, err
			}
			if excluded || !realDir(env, dir) {
				return Text("No files matched."), nil
			}
		}
	}
	var matches []string
	err := Walk(ctx, env.Root, WalkOptions{Dir: dir, IncludeIgnored: p.IncludeIgnored, Gitlinks: true}, func(path string, _ fs.FileMode) error {
		if ok, _ := doublestar.Match(pattern, path); ok {
			matches = append(matches, path)
			if len(matches) >= p.Limit {
				return fs.SkipAll
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, err
		}
		return Text("No files matched."), nil
	}
	if len(matches) == 0 {
		return Text("No files matched."), nil
	}
	return Text(joinPaths(matches)), nil
}

// joinPaths writes paths one a line. When they do not fit in MaxOutput
// characters it keeps as many whole paths as fit with a last line saying
// how many are not shown.
func joinPaths(paths []string) string {
	total := len(paths) - 1
	for _, p := range paths {
		total += charCount(p)
	}
	if total <= MaxOutput {
		return strings.Join(paths, "\n")
	}
	room := MaxOutput - charCount(pathsNotShown(len(paths)))
	var b strings.Builder
	kept, used := 0, 0
	for _, p := range paths {
		n := charCount(p)
		if kept > 0 {
			n++
		}
		if used+n > room {
			break
		}
		if kept > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p)
		kept, used = kept+1, used+n
	}
	b.WriteString(pathsNotShown(len(paths) - kept))
	return b.String()
}

// pathsNotShown is the line that ends a glob result cut to fit.
func pathsNotShown(n int) string {
	return fmt.Sprintf("\n... [%d more paths not shown; narrow the pattern to see them]", n)
}

// realDir reports whether every element of dir is a directory and none a
// symlink: a walk of the whole workspace would enter it.
func realDir(env *Env, dir string) bool {
	for i := 0; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		fi, err := env.Root.Lstat(dir[:i])
		if err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}
