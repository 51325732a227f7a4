package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

//go:embed grep.md
var grepDoc string

// grep limits.
const (
	// GrepHitLimit is the most matching lines one grep call returns, and
	// the most one file contributes (rg's --max-count).
	GrepHitLimit = 200
	// GrepLineChars is how many characters of a matching line are shown.
	GrepLineChars = 300
	// GrepTimeout bounds one search.
	GrepTimeout = 60 * time.Second

	grepDefaultInclude = "**/*"
	grepNoMatches      = "No matches."
)

type grepParams struct {
	Pattern        string `json:"pattern" jsonschema:"minLength=1"`
	Include        string `json:"include,omitempty" jsonschema:"default=\"**/*\"" desc:"Without a slash: names at any depth (*.go); with one: paths (src/**/*.ts)."`
	IgnoreCase     bool   `json:"ignoreCase,omitempty" jsonschema:"default=false"`
	IncludeIgnored bool   `json:"includeIgnored,omitempty" jsonschema:"default=false" desc:"Also files the ignore rules skip."`
}

// NewGrep returns the grep tool. The walker lists the files to search (its
// ignore rules are the only ones that apply); ripgrep searches exactly
// those in the sandbox, or Go on the host where the sandbox has no rg.
// Both give the same lines: the binary rule of limits.go, hits sorted by
// path then line number.
func NewGrep() Tool {
	g := &grepTool{}
	return newFileTool("grep", SetCore, false, grepDoc, g.run)
}

// grepTool remembers the sandboxes it found without rg (a session's tools
// see one), so that later calls search with Go straight away. The key is
// the sandbox, not the Env: the agent runs each call on a copy of the
// session's Env, and every sandbox.Sandbox is a pointer.
type grepTool struct {
	noRg sync.Map // sandbox.Sandbox -> true
}

// grepFailure is a search that failed in a way the model can act on
// ("Invalid regex: ...", a timeout): the call's result, not a Go error.
type grepFailure string

func (f grepFailure) Error() string { return string(f) }

// Why a search with rg did not happen; the Go search does it instead.
var (
	// errRgMissing: the sandbox has no rg. The tool remembers it.
	errRgMissing = errors.New("rg is missing from the sandbox")
	// errRgFailed: rg failed without searching (an old rg refusing a
	// flag); it is tried again on the next call.
	errRgFailed = errors.New("rg could not search")
)

var errGrepTimedOut = grepFailure(fmt.Sprintf(
	"grep timed out after %s; narrow the search with include or a more specific pattern.", GrepTimeout))

func (g *grepTool) run(ctx context.Context, env *Env, p *grepParams) (Result, error) {
	inc, ok := newIncludeFilter(p.Include)
	if !ok {
		return Errorf("Invalid include glob: %s", p.Include), nil
	}
	searchCtx, cancel := context.WithTimeout(ctx, GrepTimeout)
	defer cancel()
	hits, err := g.search(searchCtx, env, p, inc)
	if err != nil && ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = errGrepTimedOut
	}
	var failure grepFailure
	switch {
	case errors.As(err, &failure):
		return Errorf("%s", failure), nil
	case err != nil:
		return Result{}, err
	}
	return Text(hits.render()), nil
}

// search lists the files and searches them: with rg unless the sandbox is
// known to have none or rg cannot do it, else with Go.
func (g *grepTool) search(ctx context.Context, env *Env, p *grepParams, inc includeFilter) (*hitSet, error) {
	files, err := grepFiles(ctx, env, p.IncludeIgnored, inc)
	if err != nil {
		return nil, err
	}
	if _, missing := g.noRg.Load(env.Sandbox); !missing {
		hits, err := searchRg(ctx, env, p, files)
		if errors.Is(err, errRgMissing) {
			g.noRg.Store(env.Sandbox, true)
		}
		if !errors.Is(err, errRgMissing) && !errors.Is(err, errRgFailed) {
			return hits, err
		}
	}
	return searchGo(ctx, env, p, files)
}

// grepFiles lists the files to search: the walker's (symlinks aside) that
// include matches, sorted by path.
func grepFiles(ctx context.Context, env *Env, includeIgnored bool, inc includeFilter) ([]string, error) {
	var files []string
	err := Walk(ctx, env.Root, WalkOptions{IncludeIgnored: includeIgnored}, func(p string, mode fs.FileMode) error {
		if mode&fs.ModeSymlink == 0 && inc.match(p) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list files to search: %w", err)
	}
	slices.Sort(files)
	return files, nil
}

// includeFilter is the include parameter: a doublestar glob matched
// against the file name when it has no slash (like ripgrep's --glob and
// .gitignore), else against the workspace-relative path.
type includeFilter struct {
	pattern  string
	all      bool
	basename bool
}

func newIncludeFilter(include string) (includeFilter, bool) {
	for strings.HasPrefix(include, "./") {
		include = include[2:]
	}
	if include == "" || include == grepDefaultInclude || include == "**" {
		return includeFilter{all: true}, true
	}
	if !doublestar.ValidatePattern(include) {
		return includeFilter{}, false
	}
	return includeFilter{pattern: include, basename: !strings.Contains(include, "/")}, true
}

func (f includeFilter) match(p string) bool {
	if f.all {
		return true
	}
	if f.basename {
		p = path.Base(p)
	}
	ok, _ := doublestar.Match(f.pattern, p)
	return ok
}

// fileHits is what one file gave a search: how many lines matched and,
// while the file may be among the first hits, which.
type fileHits struct {
	path  string
	count int
	keep  bool // the lines are kept (hitSet.wouldKeep said so)
	lines []lineHit
}

type lineHit struct {
	line int
	text string // without the newline, at most rgMaxLine bytes
}

// hitSet keeps the first k hits in (path, line) order and counts them all.
type hitSet struct {
	k     int
	hits  []hit  // unordered; cut back to the first k when it reaches 2k
	last  string // once cut: the path of the k-th hit, past which none is kept
	total int
}

type hit struct {
	path string
	lineHit
}

func newHitSet(k int) *hitSet { return &hitSet{k: k} }

// wouldKeep reports whether a hit in file path could be among the first k.
func (s *hitSet) wouldKeep(path string) bool { return s.last == "" || path <= s.last }

// full reports whether more than k lines matched: the first k are then
// known once every file that sorts before the k-th hit's is searched.
func (s *hitSet) full() bool { return s.total > s.k }

// merge adds the hits of o, a set of other files.
func (s *hitSet) merge(o *hitSet) {
	s.total += o.total
	s.hits = append(s.hits, o.hits...)
	if len(s.hits) >= 2*s.k {
		s.cut()
	}
}

func (s *hitSet) add(f *fileHits) {
	s.total += f.count
	for _, l := range f.lines {
		s.hits = append(s.hits, hit{path: f.path, lineHit: l})
	}
	if len(s.hits) >= 2*s.k {
		s.cut()
	}
}

// cut sorts the hits and keeps the first k.
func (s *hitSet) cut() {
	slices.SortFunc(s.hits, func(a, b hit) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return a.line - b.line
	})
	if len(s.hits) >= s.k {
		s.hits = s.hits[:s.k]
		s.last = s.hits[s.k-1].path
	}
}

// render writes the kept hits as "path:line: text", a note when more
// matched, or "No matches.".
func (s *hitSet) render() string {
	if s.total == 0 {
		return grepNoMatches
	}
	s.cut()
	var sb strings.Builder
	for i, h := range s.hits {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(h.path)
		sb.WriteByte(':')
		sb.WriteString(strconv.Itoa(h.line))
		sb.WriteString(": ")
		sb.WriteString(lineText(h.text))
	}
	if s.total > s.k {
		fmt.Fprintf(&sb, "\n... [hit limit %d]", s.k)
	}
	return sb.String()
}

// lineText is what a hit shows of its line: without a final CR, each
// invalid UTF-8 byte as U+FFFD, cut to GrepLineChars characters.
func lineText(s string) string {
	s = strings.TrimSuffix(s, "\r")
	var sb strings.Builder
	for n := 0; s != "" && n < GrepLineChars; n++ {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size <= 1 {
			sb.WriteRune(utf8.RuneError)
			size = 1
		} else {
			sb.WriteString(s[:size])
		}
		s = s[size:]
	}
	return sb.String()
}
