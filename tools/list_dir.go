package tools

import (
	"context"
	_ "embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
)

//go:embed list_dir.md
var listDirDoc string

// listDirCap is the most rows list_dir shows.
const listDirCap = 300

type listDirParams struct {
	Path           string `json:"path,omitempty" jsonschema:"default=\".\""`
	Depth          int    `json:"depth,omitempty" jsonschema:"minimum=1,maximum=6,default=2" desc:"Levels to show; deeper directories still appear."`
	IncludeIgnored bool   `json:"includeIgnored,omitempty" jsonschema:"default=false" desc:"Also files the ignore rules skip."`
}

// NewListDir returns the list_dir tool.
func NewListDir() Tool {
	return newFileTool("list_dir", SetEditPlus, false, listDirDoc, runListDir)
}

type listRow struct {
	key  string // path below the listed directory; directories end in "/"
	text string
}

func runListDir(ctx context.Context, env *Env, p *listDirParams) (Result, error) {
	if p.Path == "" {
		p.Path = "."
	}
	rel, err := resolvePath(env, p.Path)
	if err != nil {
		return Errorf("%s", fileProblem(env.Root, p.Path, err)), nil
	}
	if fi, err := env.Root.Stat(rel); err != nil || !fi.IsDir() {
		if err != nil && isEscape(env.Root, err) {
			return Errorf("Path escapes workspace: %s", p.Path), nil
		}
		return Errorf("Not a directory: %s", p.Path), nil
	}
	label := "."
	if rel != "." {
		label = rel + "/"
	}
	seen := map[string]bool{}
	var rows []listRow
	truncated := false
	add := func(key, text string) bool {
		if seen[key] {
			return true
		}
		if len(rows) == listDirCap {
			truncated = true
			return false
		}
		seen[key] = true
		rows = append(rows, listRow{key, text})
		return true
	}
	err = Walk(ctx, env.Root, WalkOptions{Dir: rel, IncludeIgnored: p.IncludeIgnored, Gitlinks: true}, func(file string, mode fs.FileMode) error {
		sub := file
		if rel != "." {
			sub = file[len(rel)+1:]
		}
		if mode.IsDir() {
			sub += "/" // a submodule: shown as a directory
		}
		parts := strings.Split(sub, "/")
		for i := 0; i < len(parts)-1 && i < p.Depth; i++ {
			if !add(strings.Join(parts[:i+1], "/")+"/", strings.Repeat("  ", i)+parts[i]+"/") {
				return fs.SkipAll
			}
		}
		if len(parts) <= p.Depth && !mode.IsDir() {
			size := "?"
			if fi, err := env.Root.Stat(file); err == nil {
				size = formatSize(fi.Size())
			} else if fi, err := env.Root.Lstat(file); err == nil {
				size = formatSize(fi.Size())
			}
			if !add(sub, strings.Repeat("  ", len(parts)-1)+parts[len(parts)-1]+"  "+size) {
				return fs.SkipAll
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, err
		}
		return Errorf("Not a directory: %s", p.Path), nil
	}
	if len(rows) == 0 {
		return Text(label + " is empty (or everything in it is ignored)."), nil
	}
	slices.SortFunc(rows, func(a, b listRow) int { return compareListKeys(a.key, b.key) })
	var b strings.Builder
	b.WriteString(label)
	for _, r := range rows {
		b.WriteString("\n")
		b.WriteString(r.text)
	}
	if truncated {
		fmt.Fprintf(&b, "\n... [%d-entry limit reached]", listDirCap)
	}
	return Text(b.String()), nil
}

// compareListKeys orders list_dir's keys by locale compare, one path
// element (with its slash) at a time: siblings that differ only in case
// ("Foo/", "foo/") are told apart by their own names before any child's,
// so each keeps its rows under it.
func compareListKeys(a, b string) int {
	for a != "" && b != "" {
		ea, ra := cutElement(a)
		eb, rb := cutElement(b)
		if c := localeCompare(ea, eb); c != 0 {
			return c
		}
		a, b = ra, rb
	}
	return len(a) - len(b)
}

// cutElement splits the first path element, with its slash, off p.
func cutElement(p string) (elem, rest string) {
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i+1], p[i+1:]
	}
	return p, ""
}

// formatSize writes n bytes as list_dir shows it: "<n>B" under 1 KiB,
// "<round(n/1024)>K" under 1 MiB, else "<x.x>M" (rounded half up, like
// JavaScript's toFixed(1) on these exact values).
func formatSize(n int64) string {
	switch {
	case n < 1024:
		return strconv.FormatInt(n, 10) + "B"
	case n < 1<<20:
		return strconv.FormatInt((n+512)/1024, 10) + "K"
	}
	tenths := (n*10 + 1<<19) >> 20
	return fmt.Sprintf("%d.%dM", tenths/10, tenths%10)
}
