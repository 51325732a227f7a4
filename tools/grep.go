package tools

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"weak"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/sandbox"
)

//go:embed grep.md
var grepDoc string

// grep limits.
const (
	// GrepHitLimit is the most matching lines one grep call returns, and
	// the most ripgrep reports per file (--max-count).
	GrepHitLimit = 200
	// GrepLineChars is how many characters of a matching line are shown.
	GrepLineChars = 300
	// GrepTimeout bounds one search.
	GrepTimeout = 60 * time.Second

	// grepPendingBytes bounds the rg output held while the walk runs.
	grepPendingBytes = 16 << 20

	grepDefaultInclude = "**/*"
	grepNoMatches      = "No matches."
)

type grepParams struct {
	Pattern        string `json:"pattern" jsonschema:"minLength=1" desc:"Regular expression (ripgrep syntax) matched against each line."`
	Include        string `json:"include,omitempty" jsonschema:"default=\"**/*\"" desc:"Glob of the files to search. Without a slash it matches file names at any depth (*.go); with one, workspace-relative paths (src/**/*.ts)."`
	IgnoreCase     bool   `json:"ignoreCase,omitempty" jsonschema:"default=false" desc:"Match without regard to case."`
	IncludeIgnored bool   `json:"includeIgnored,omitempty" jsonschema:"default=false" desc:"Also search files that .gitignore or .shiroignore rules ignore."`
}

// grepTool searches with ripgrep in the sandbox, or with Go on the host
// where the sandbox has no rg. Both produce the same lines: the files the
// shared walker yields (symlinks aside), the binary rule of limits.go, hits
// sorted by path then line number.
type grepTool struct {
	rgMissing rgMemo
}

// NewGrep returns the grep tool.
func NewGrep() Tool {
	g := &grepTool{}
	return newFileTool("grep", SetCore, false, grepDoc, g.run)
}

func (g *grepTool) run(ctx context.Context, env *Env, p *grepParams) (Result, error) {
	inc, ok := newIncludeFilter(p.Include)
	if !ok {
		return Errorf("Invalid include glob: %s", p.Include), nil
	}
	if !g.rgMissing.get(env) {
		res, done, err := g.searchRg(ctx, env, p, inc)
		if err != nil || done {
			return res, err
		}
	}
	return searchGo(ctx, env, p, inc)
}

// rgMemo remembers, per Env (that is, per session and sandbox), that the
// sandbox has no rg, so later calls go straight to the Go search. Weak
// keys let ended sessions go.
type rgMemo struct {
	mu      sync.Mutex
	missing map[weak.Pointer[Env]]bool
}

func (m *rgMemo) get(env *Env) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.missing[weak.Make(env)]
}

func (m *rgMemo) set(env *Env) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.missing == nil {
		m.missing = map[weak.Pointer[Env]]bool{}
	}
	m.missing[weak.Make(env)] = true
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
		return includeFilter{pattern: grepDefaultInclude, all: true}, true
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

// rgGlob is the --glob ripgrep pre-filters with, or "" when the pattern
// means something else to ripgrep (a leading ! or /, escapes): the Go
// filter then does all the work.
func (f includeFilter) rgGlob() string {
	if f.all || strings.ContainsAny(f.pattern[:1], "!/#") || strings.Contains(f.pattern, `\`) {
		return ""
	}
	return f.pattern
}

// ---- ripgrep ----

// rgBaseArgs are the flags of every rg run: the spec's (--line-number
// --no-heading --color never --max-count 200, --ignore-case) and, so that
// rg's output matches the Go search byte for byte: no config file, the
// path on every line (even for one file named), a NUL after it (paths may
// hold colons), raw bytes (no UTF-16 BOM sniffing: such files are binary
// by the shared rule).
func rgBaseArgs(p *grepParams) []string {
	args := []string{"rg", "--no-config", "--line-number", "--no-heading", "--color", "never",
		"--max-count", strconv.Itoa(GrepHitLimit), "--with-filename", "--null", "--encoding", "none"}
	if p.IgnoreCase {
		args = append(args, "--ignore-case")
	}
	return args
}

// rgTreeArgs searches the workspace: the spec's argv plus what makes rg
// pick the walker's files. --hidden (the walker yields dotfiles),
// --no-ignore-dot/-global/-parent (the walker reads only .gitignore and
// .shiroignore inside the workspace), --binary (a binary file that matches
// is reported, so the shared binary rule can decide), and .git and
// node_modules skipped even with --no-ignore.
func rgTreeArgs(p *grepParams, inc includeFilter) []string {
	args := rgBaseArgs(p)
	args = append(args, "--no-require-git", "--hidden", "--binary",
		"--no-ignore-dot", "--no-ignore-global", "--no-ignore-parent")
	if p.IncludeIgnored {
		args = append(args, "--no-ignore")
	}
	if g := inc.rgGlob(); g != "" {
		args = append(args, "--glob", g)
	}
	return append(args, "--glob", "!.git", "--glob", "!node_modules", "--regexp", p.Pattern, ".")
}

// rgFilesArgs searches the given files (after "--"); explicit files skip
// every ignore rule, and a binary one that matches is reported as with
// --binary. text searches binary files as text.
func rgFilesArgs(p *grepParams, text bool, files []string) []string {
	args := rgBaseArgs(p)
	if text {
		args = append(args, "--text")
	}
	args = append(args, "--regexp", p.Pattern, "--")
	return append(args, files...)
}

// rgArgBytes bounds the paths passed to one rg run (Linux allows 2 MiB of
// argv and environment; macOS 1 MiB).
const rgArgBytes = 256 << 10

// searchRg runs the search with rg in the sandbox. done is false when rg
// cannot do it (missing from the sandbox, or failing without a regex
// error): the caller then searches with Go.
//
// rg searches the workspace while the walker lists, on the host, the files
// the search may report. Of the walker's two ignore files rg reads only
// .gitignore (and, as the walker, .git/info/exclude): where .shiroignore
// rules exclude more, rg reports more than the walker yields, and hits
// outside the walker's files are dropped. The walker's files that rg's
// traversal would not reach (a "!" rule of a .shiroignore re-includes
// what .gitignore ignores, or something rg reads and the walker does not
// is in force: a .rgignore, a symlinked .gitignore, a nested repository's
// .git/info/exclude) are given to rg by name, in a second run that starts
// when the walk ends, while the first still runs.
func (g *grepTool) searchRg(ctx context.Context, env *Env, p *grepParams, inc includeFilter) (res Result, done bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	view := newRgView(env, p.IncludeIgnored)
	// When rg cannot be trusted with the root itself, every file goes by name.
	allByName := view.dir("").missed
	scope := &grepScope{done: make(chan struct{})}
	go scope.walk(ctx, env, inc, view)
	named := make(chan *rgNamed, 1)
	go func() { named <- scope.searchNamed(ctx, env, p, allByName) }()
	var n *rgNamed
	defer func() {
		cancel()
		<-scope.done
		if n == nil {
			<-named
		}
	}()

	hits := newHitSet(GrepHitLimit)
	var notices []*rgBlock
	if !allByName {
		ok, res, done, err := g.searchTree(ctx, env, p, inc, scope, hits, &notices)
		if !ok {
			return res, done, err
		}
	}
	select {
	case <-scope.done:
	case <-ctx.Done():
		return Result{}, false, ctx.Err()
	}
	if scope.err != nil {
		if ctx.Err() != nil {
			return Result{}, false, ctx.Err()
		}
		return Result{}, false, scope.err
	}
	// rgFiles's outcome, but for a missing rg, remembered.
	filesFailed := func(r Result, ok bool, err error) (Result, bool, error) {
		if errors.Is(err, errRgMissing) {
			g.rgMissing.set(env)
			return Result{}, false, nil
		}
		return r, ok, err
	}
	n = <-named
	if n.err != nil || !n.ok || n.res.IsError {
		return filesFailed(n.res, n.ok, n.err)
	}
	hits.merge(n.hits)
	notices = append(notices, n.notices...)

	// Binary files that matched: the shared rule decides. Those it calls
	// text (their first NUL is past the sniffed bytes) are searched again
	// as text, whole.
	var text []string
	for _, b := range notices {
		if b.nulAt >= 0 && b.nulAt < BinarySniff {
			continue // rg's offset is that of the first NUL
		}
		if head, err := readHead(env.Root, b.path); err == nil && !IsBinary(head) {
			text = append(text, b.path)
		}
	}
	if len(text) > 0 {
		slices.Sort(text)
		r, ok, err := rgFiles(ctx, env, p, text, true, hits, nil)
		if err != nil || !ok || r.IsError {
			return filesFailed(r, ok, err)
		}
	}
	return Text(hits.render()), true, nil
}

// searchTree runs rg over the workspace and adds to hits (and notices)
// what it finds in the files scope.fromTree accepts. ok is false when the
// search cannot go on: searchRg then returns res, done and err.
func (g *grepTool) searchTree(ctx context.Context, env *Env, p *grepParams, inc includeFilter, scope *grepScope, hits *hitSet, notices *[]*rgBlock) (ok bool, res Result, done bool, err error) {
	treeCtx, cancelTree := context.WithCancel(ctx)
	defer cancelTree()
	accept := func(b *rgBlock) {
		switch {
		case !scope.fromTree(b.path):
		case b.binary:
			*notices = append(*notices, b)
		default:
			hits.addBlock(b)
		}
	}
	// Until the walk is done, blocks wait in pending (up to a bound, then
	// rg waits): stopping rg's output would stall its search.
	var pending []*rgBlock
	pendingBytes := 0
	flushPending := func() {
		for _, b := range pending {
			accept(b)
		}
		pending = nil
	}
	parser := &rgParser{stripDot: true, block: func(b *rgBlock) bool {
		select {
		case <-scope.done:
		default:
			if pendingBytes < grepPendingBytes {
				pending = append(pending, b)
				pendingBytes += b.size()
				return true
			}
			select {
			case <-scope.done:
			case <-treeCtx.Done():
				return false
			}
		}
		if scope.err != nil {
			cancelTree() // the search fails with the walk's error
			return false
		}
		flushPending()
		accept(b)
		return true
	}, wanted: func(path string) bool { return hits.wouldKeep(path) }}

	var stderr limitedBuffer
	run, runErr := env.Sandbox.Run(treeCtx, sandbox.Command{
		Args: rgTreeArgs(p, inc), Dir: env.Workspace, Timeout: GrepTimeout,
		Stdout: parser, Stderr: &stderr,
	})
	parser.close()
	switch {
	case ctx.Err() != nil:
		return false, Result{}, false, ctx.Err()
	case rgNotFound(run, runErr):
		g.rgMissing.set(env)
		return false, Result{}, false, nil
	case runErr != nil && treeCtx.Err() != nil:
		// Stopped for the walk's error, which searchRg reports.
	case runErr != nil:
		return false, Result{}, false, fmt.Errorf("run rg: %w", runErr)
	case run.TimedOut:
		return false, grepTimedOut(), true, nil
	case run.ExitCode > 1:
		if msg := stderr.String(); isRegexError(msg) {
			return false, Errorf("Invalid regex: %s", strings.TrimSpace(msg)), true, nil
		}
		if !rgSearched(stderr.String()) {
			return false, Result{}, false, nil // rg could not search: fall back
		}
		// rg searched but some files could not be read: those are
		// skipped, as the Go search skips them.
	}
	select {
	case <-scope.done:
	case <-ctx.Done():
		return false, Result{}, false, ctx.Err()
	}
	if scope.err == nil {
		flushPending()
	}
	return true, Result{}, false, nil
}

func grepTimedOut() Result {
	return Errorf("grep timed out after %s; narrow the search with include or a more specific pattern.", GrepTimeout)
}

// errRgMissing is rgFiles's error when the sandbox has no rg.
var errRgMissing = errors.New("rg is missing from the sandbox")

// rgFiles searches files by name, in batches that fit an argv, adding the
// hits to hits and the names of matching binary files to notices.
func rgFiles(ctx context.Context, env *Env, p *grepParams, files []string, text bool, hits *hitSet, notices *[]*rgBlock) (Result, bool, error) {
	for len(files) > 0 {
		n, size := 0, 0
		for n < len(files) && (n == 0 || size+len(files[n])+1 <= rgArgBytes) {
			size += len(files[n]) + 1
			n++
		}
		batch := files[:n]
		files = files[n:]
		parser := &rgParser{block: func(b *rgBlock) bool {
			if b.binary {
				if notices != nil {
					*notices = append(*notices, b)
				}
				return true
			}
			hits.addBlock(b)
			return true
		}, wanted: func(path string) bool { return hits.wouldKeep(path) }}
		var stderr limitedBuffer
		run, err := env.Sandbox.Run(ctx, sandbox.Command{
			Args: rgFilesArgs(p, text, batch), Dir: env.Workspace, Timeout: GrepTimeout,
			Stdout: parser, Stderr: &stderr,
		})
		parser.close()
		switch {
		case ctx.Err() != nil:
			return Result{}, false, ctx.Err()
		case rgNotFound(run, err):
			return Result{}, false, errRgMissing
		case err != nil:
			return Result{}, false, fmt.Errorf("run rg: %w", err)
		case run.TimedOut:
			return grepTimedOut(), true, nil
		case run.ExitCode > 1:
			if msg := stderr.String(); isRegexError(msg) {
				return Errorf("Invalid regex: %s", strings.TrimSpace(msg)), true, nil
			}
			if !rgSearched(stderr.String()) {
				return Result{}, false, nil
			}
		}
	}
	return Result{}, true, nil
}

// rgNotFound reports a sandbox without rg: the binary cannot start, or a
// shell in between reported 127.
func rgNotFound(run sandbox.Result, err error) bool {
	if err != nil {
		return errors.Is(err, exec.ErrNotFound) || strings.Contains(err.Error(), "executable file not found")
	}
	return run.ExitCode == 127
}

// rgSearched reports whether rg's stderr, after an exit status of 2, holds
// only errors about files it could not read ("... (os error 13)"): the
// search itself ran, and such files are skipped, as the Go search skips
// them. Anything else (an unknown flag in an old rg) means it did not.
func rgSearched(stderr string) bool {
	for line := range strings.SplitSeq(strings.TrimSpace(stderr), "\n") {
		if !strings.Contains(line, "(os error ") {
			return false
		}
	}
	return true
}

// isRegexError reports whether rg's stderr is about the pattern.
func isRegexError(stderr string) bool {
	for _, s := range []string{"regex parse error", "error parsing regex", "not allowed in a regex", "regex exceeds size limit"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// grepScope is what the walker says about a search: the files it may
// report, and those of them rg's traversal may miss, to be given by name.
type grepScope struct {
	files  []string            // in the walk's order
	inDir  map[string][]string // the names of files, by directory, sorted
	byName []string            // sorted
	err    error
	done   chan struct{}
}

// walk fills the scope and closes done. view is nil when no ignore rule
// applies (includeIgnored): rg then misses nothing.
func (s *grepScope) walk(ctx context.Context, env *Env, inc includeFilter, view *rgView) {
	defer close(s.done)
	defer view.close()
	var files, byName, names []string
	inDir := map[string][]string{}
	first, last := true, ""
	var dir *rgDir
	err := Walk(ctx, env.Root, WalkOptions{IncludeIgnored: view == nil}, func(p string, mode fs.FileMode) error {
		if mode&fs.ModeSymlink != 0 || !inc.match(p) {
			return nil
		}
		files = append(files, p)
		// Files come directory by directory, each directory's in order.
		d, name := parentDir(p), path.Base(p)
		if first || d != last {
			if !first {
				inDir[last] = names
			}
			first, last, names = false, d, inDir[d]
			dir = view.dir(d)
		}
		names = append(names, name)
		if dir.missed || ignored(dir.rules, p, name, false) {
			byName = append(byName, p)
		}
		return nil
	})
	if err != nil {
		s.err = fmt.Errorf("list files to search: %w", err)
		return
	}
	if !first {
		inDir[last] = names
	}
	for _, names := range inDir {
		if !slices.IsSorted(names) {
			slices.Sort(names)
		}
	}
	slices.Sort(byName)
	s.files, s.inDir, s.byName = files, inDir, byName
}

// searchNamed searches, once the walk is done, the files rg must be given
// by name (all of them when all is set).
func (s *grepScope) searchNamed(ctx context.Context, env *Env, p *grepParams, all bool) *rgNamed {
	n := &rgNamed{hits: newHitSet(GrepHitLimit), ok: true}
	select {
	case <-s.done:
	case <-ctx.Done():
		n.ok, n.err = false, ctx.Err()
		return n
	}
	files := s.byName
	if all {
		files = s.files
		if len(files) == 0 {
			files = []string{os.DevNull} // still let rg judge the pattern
		}
	}
	if s.err == nil && len(files) > 0 {
		n.res, n.ok, n.err = rgFiles(ctx, env, p, files, false, n.hits, &n.notices)
	}
	return n
}

// rgNamed is the outcome of searchNamed: rgFiles's, and what it found.
type rgNamed struct {
	hits    *hitSet
	notices []*rgBlock
	res     Result
	ok      bool
	err     error
}

// fromTree reports whether rg's traversal reports p exactly: the walker
// yields it and it is not given by name.
func (s *grepScope) fromTree(p string) bool {
	if _, ok := slices.BinarySearch(s.inDir[parentDir(p)], path.Base(p)); !ok {
		return false
	}
	_, named := slices.BinarySearch(s.byName, p)
	return !named
}

func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// rgView is the workspace as rg's traversal (rgTreeArgs) sees it, directory
// by directory, as far as the walker can tell.
type rgView struct {
	ws   string
	root *os.Root
	dr   *dirReader // reads ignore files; nil where it could not start
	dirs map[string]*rgDir
}

// rgDir is a directory in rg's view: the rules rg applies there (those of
// .git/info/exclude and the .gitignore files of the directory and its
// ancestors), or missed when rg may not report every file below it that
// the walker yields.
type rgDir struct {
	rules  []ignoreRule
	missed bool
}

// newRgView returns the view of env's workspace, or nil when ignore files
// play no part.
func newRgView(env *Env, includeIgnored bool) *rgView {
	if includeIgnored {
		return nil
	}
	dr, _ := newDirReader(env.Root, "", true)
	return &rgView{ws: env.Workspace, root: env.Root, dr: dr, dirs: map[string]*rgDir{}}
}

func (v *rgView) close() {
	if v != nil && v.dr != nil {
		v.dr.close()
	}
}

// readFile reads the regular file name in directory d, never following a
// symlink.
func (v *rgView) readFile(d, name string) ([]byte, error) {
	if v.dr == nil {
		return readRegular(v.root, path.Join(displayRel(d), name))
	}
	f, err := v.dr.open(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return v.dr.readFileIn(f, d, name)
}

// dir returns the directory d (workspace-relative, "" for the root).
func (v *rgView) dir(d string) *rgDir {
	if v == nil {
		return &rgDir{}
	}
	if s, ok := v.dirs[d]; ok {
		return s
	}
	var s *rgDir
	if d == "" {
		rules, _ := ancestorRules(v.root, "")
		s = v.load(d, rules)
	} else {
		switch parent := v.dir(parentDir(d)); {
		case parent.missed:
			s = parent
		case ignored(parent.rules, d, path.Base(d), true):
			s = &rgDir{missed: true} // rg does not enter it
		default:
			s = v.load(d, parent.rules)
		}
	}
	v.dirs[d] = s
	return s
}

// load reads what rg reads in directory d, below the rules inherited: a
// .rgignore (the walker reads none: missed), a nested repository's
// .git/info/exclude with rules (idem) and .gitignore (its rules are added;
// missed when it is not a regular file, which the walker does not follow
// and rg does).
func (v *rgView) load(d string, inherited []ignoreRule) *rgDir {
	// Existence only, outside the root for speed (os.Root resolves each
	// component); the content is read below the root, as the walker reads it.
	base := filepath.Join(v.ws, filepath.FromSlash(d))
	if _, err := os.Lstat(filepath.Join(base, ".rgignore")); err == nil {
		return &rgDir{missed: true}
	}
	if d != "" {
		if _, err := os.Lstat(filepath.Join(base, ".git", "info", "exclude")); err == nil {
			// One the walker cannot read (through a symlinked .git) rg
			// may read all the same.
			data, err := v.readFile(path.Join(d, ".git", "info"), "exclude")
			if err != nil || hasRules(data) {
				return &rgDir{missed: true}
			}
		}
	}
	fi, err := os.Lstat(filepath.Join(base, ".gitignore"))
	switch {
	case err != nil:
		return &rgDir{rules: inherited}
	case !fi.Mode().IsRegular():
		return &rgDir{missed: true}
	}
	data, err := v.readFile(d, ".gitignore")
	if err != nil {
		return &rgDir{rules: inherited}
	}
	return &rgDir{rules: parseIgnore(data, d, inherited[:len(inherited):len(inherited)])}
}

// hasRules reports whether an ignore file holds any rule.
func hasRules(data []byte) bool {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) > 0 && line[0] != '#' {
			return true
		}
	}
	return false
}

func readHead(root *os.Root, name string) ([]byte, error) {
	f, err := confine.OpenRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, BinarySniff)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return head[:n], nil
}

// ---- rg output ----

// rgBlock is one file's output: rg writes each file's lines together.
type rgBlock struct {
	path   string
	hits   []rawHit
	count  int  // hits seen, kept or not
	keep   bool // whether hits are kept (the file may make the first 200)
	binary bool // rg reported a binary file that matches
	nulAt  int  // where rg saw its first NUL; -1 when the notice did not say
}

// size is about how much memory b holds.
func (b *rgBlock) size() int {
	n := 64 + len(b.path)
	for _, h := range b.hits {
		n += 32 + len(h.text)
	}
	return n
}

type rawHit struct {
	line int
	text string
}

// rgMaxLine bounds the bytes kept of one output line: a path (at most
// 4 KiB) and enough text for GrepLineChars characters.
const rgMaxLine = 4096 + 4*GrepLineChars + 64

// rgParser reads rg's --null --no-heading output: "path\0line:text" per
// hit, and "path: binary file matches (found ...)" for a binary file.
// block is called with each file's block; once it returns false the rest is
// discarded. wanted says whether a file's hit texts are worth keeping.
type rgParser struct {
	stripDot bool
	block    func(*rgBlock) bool
	wanted   func(path string) bool

	stopped bool
	cur     *rgBlock
	line    []byte
	long    bool // the current line is past rgMaxLine: dropping to its end
}

func (r *rgParser) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !r.long {
			if room := rgMaxLine - len(r.line); len(chunk) > room {
				r.line = append(r.line, chunk[:room]...)
				r.long = true
			} else {
				r.line = append(r.line, chunk...)
			}
		}
		if i < 0 {
			break
		}
		r.parseLine(r.line)
		r.line, r.long = r.line[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// close handles a last line without a newline and the last block.
func (r *rgParser) close() {
	if len(r.line) > 0 {
		r.parseLine(r.line)
		r.line = r.line[:0]
	}
	r.flush()
}

func (r *rgParser) parseLine(l []byte) {
	if r.stopped {
		return
	}
	var name, rest []byte
	if i := bytes.IndexByte(l, 0); i >= 0 {
		name, rest = l[:i], l[i+1:]
	} else {
		rest = l
	}
	if colon := bytes.IndexByte(rest, ':'); name != nil && colon > 0 {
		if n, ok := parseLineNumber(rest[:colon]); ok {
			b := r.start(name)
			b.count++
			if b.keep {
				b.hits = append(b.hits, rawHit{line: n, text: string(rest[colon+1:])})
			}
			return
		}
	}
	// A binary file's notice: "path: binary file matches (found "\0" byte
	// around offset N)", or with quit-mode binary detection "path:
	// WARNING: stopped searching binary file after match (...)".
	for _, marker := range []string{": binary file matches (", ": WARNING: stopped searching binary file"} {
		var b *rgBlock
		if name == nil {
			if i := bytes.Index(rest, []byte(marker)); i >= 0 {
				b = r.start(rest[:i])
			}
		} else if bytes.HasPrefix(rest, []byte(marker)) {
			b = r.start(name)
		}
		if b != nil {
			b.binary, b.nulAt = true, -1
			if _, after, ok := bytes.Cut(rest, []byte("byte around offset ")); ok {
				if end := bytes.IndexByte(after, ')'); end > 0 {
					if n, ok := parseLineNumber(after[:end]); ok {
						b.nulAt = n
					}
				}
			}
			return
		}
	}
}

func parseLineNumber(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// start returns the block of the file name, flushing the previous one.
func (r *rgParser) start(name []byte) *rgBlock {
	if r.stripDot {
		name = bytes.TrimPrefix(name, []byte("./"))
	}
	if r.cur != nil && r.cur.path == string(name) {
		return r.cur
	}
	r.flush()
	p := string(name)
	r.cur = &rgBlock{path: p, keep: r.wanted(p)}
	return r.cur
}

func (r *rgParser) flush() {
	if r.cur == nil || r.stopped {
		return
	}
	if !r.block(r.cur) {
		r.stopped = true
	}
	r.cur = nil
}

// ---- Go search ----

// searchGo is the search without rg: the walker's files (symlinks aside)
// that match include, in path order, each skipped when binary or
// unreadable, line by line with Go's regexp.
func searchGo(ctx context.Context, env *Env, p *grepParams, inc includeFilter) (Result, error) {
	re, problem := compileLineRegex(p.Pattern, p.IgnoreCase)
	if problem != "" {
		return Errorf("Invalid regex: %s", problem), nil
	}
	searchCtx, cancel := context.WithTimeout(ctx, GrepTimeout)
	defer cancel()
	var files []string
	err := Walk(searchCtx, env.Root, WalkOptions{IncludeIgnored: p.IncludeIgnored}, func(p string, mode fs.FileMode) error {
		if mode&fs.ModeSymlink == 0 && inc.match(p) {
			files = append(files, p)
		}
		return nil
	})
	if err == nil {
		slices.Sort(files)
	}
	hits := newHitSet(GrepHitLimit)
	for _, name := range files {
		if err != nil || hits.total > GrepHitLimit {
			break
		}
		err = searchCtx.Err()
		if err == nil {
			searchFile(env.Root, name, re, hits)
		}
	}
	switch {
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return grepTimedOut(), nil
	case err != nil:
		return Result{}, fmt.Errorf("grep: %w", err)
	}
	return Text(hits.render()), nil
}

// searchFile adds the matching lines of one file (at most GrepHitLimit),
// skipping it when it is binary or cannot be read.
func searchFile(root *os.Root, name string, re lineMatcher, hits *hitSet) {
	f, err := confine.OpenRegular(root, name)
	if err != nil {
		return
	}
	defer f.Close()
	head := make([]byte, BinarySniff)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return
	}
	head = head[:n]
	if IsBinary(head) {
		return
	}
	b := &rgBlock{path: name, keep: hits.wouldKeep(name)}
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(head), f), 64<<10)
	var long []byte
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return // unreadable: skipped
		}
		if len(line) == 0 && err != nil {
			break
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if re.Match(line) {
			b.count++
			if b.keep {
				b.hits = append(b.hits, rawHit{line: lineNo, text: string(line[:min(len(line), rgMaxLine)])})
			}
			if b.count == GrepHitLimit {
				break
			}
		}
		if err != nil {
			break
		}
	}
	hits.addBlock(b)
}

// ---- hits ----

type hit struct {
	path string
	line int
	text string
}

func hitLess(a, b *hit) bool {
	if a.path != b.path {
		return a.path < b.path
	}
	return a.line < b.line
}

// hitSet keeps the first k hits in (path, line) order and counts them all.
type hitSet struct {
	k     int
	heap  []hit // a max-heap: heap[0] is the last hit kept
	total int
}

func newHitSet(k int) *hitSet { return &hitSet{k: k} }

// wouldKeep reports whether a hit in file path could be among the first k.
func (s *hitSet) wouldKeep(path string) bool {
	return len(s.heap) < s.k || path <= s.heap[0].path
}

func (s *hitSet) addBlock(b *rgBlock) {
	s.total += b.count
	for _, h := range b.hits {
		s.add(hit{path: b.path, line: h.line, text: h.text})
	}
}

// merge adds the hits of o, a set of other files.
func (s *hitSet) merge(o *hitSet) {
	s.total += o.total
	for _, h := range o.heap {
		s.add(h)
	}
}

func (s *hitSet) add(h hit) {
	if len(s.heap) < s.k {
		s.heap = append(s.heap, h)
		s.up(len(s.heap) - 1)
		return
	}
	if !hitLess(&h, &s.heap[0]) {
		return
	}
	s.heap[0] = h
	s.down(0)
}

func (s *hitSet) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !hitLess(&s.heap[parent], &s.heap[i]) {
			return
		}
		s.heap[parent], s.heap[i] = s.heap[i], s.heap[parent]
		i = parent
	}
}

func (s *hitSet) down(i int) {
	for {
		big := i
		for _, c := range []int{2*i + 1, 2*i + 2} {
			if c < len(s.heap) && hitLess(&s.heap[big], &s.heap[c]) {
				big = c
			}
		}
		if big == i {
			return
		}
		s.heap[big], s.heap[i] = s.heap[i], s.heap[big]
		i = big
	}
}

// render writes the kept hits as "path:line: text", a note when more
// matched, or "No matches.".
func (s *hitSet) render() string {
	if s.total == 0 {
		return grepNoMatches
	}
	kept := slices.Clone(s.heap)
	slices.SortFunc(kept, func(a, b hit) int {
		if hitLess(&a, &b) {
			return -1
		}
		return 1
	})
	var sb strings.Builder
	for i, h := range kept {
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

// limitedBuffer keeps the first 64 KiB written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 64<<10 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ---- Go regexp ----

// lineMatcher tests one line (without its newline).
type lineMatcher interface{ Match([]byte) bool }

// compileLineRegex compiles a ripgrep (Rust regex) pattern with Go's
// regexp. The syntaxes agree but for details: Rust's \d, \w and \s are
// Unicode-aware (translated here), and rg refuses a pattern that matches a
// literal newline (refused here too). problem is the reason a pattern is
// refused.
func compileLineRegex(pattern string, ignoreCase bool) (re lineMatcher, problem string) {
	expr := translateRegex(pattern)
	if ignoreCase {
		expr = "(?i)" + expr
	}
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), "error parsing regexp: ")
	}
	if hasLiteralNewline(tree) {
		return nil, `the literal '"\n"' is not allowed in a regex`
	}
	compiled, err := regexp.Compile(expr)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), "error parsing regexp: ")
	}
	return compiled, ""
}

func hasLiteralNewline(re *syntax.Regexp) bool {
	if re.Op == syntax.OpLiteral && slices.Contains(re.Rune, '\n') {
		return true
	}
	return slices.ContainsFunc(re.Sub, hasLiteralNewline)
}

// Unicode versions of Perl classes, as Rust's regex has them.
const (
	uniDigit = `\p{Nd}`
	uniWord  = `\p{L}\p{M}\p{Nd}\p{Pc}`
	uniSpace = `\t-\r \x{85}\p{Z}`
)

// translateRegex rewrites the Perl classes \d \w \s (and, outside brackets,
// \D \W \S) to their Unicode meaning; the rest is left alone.
func translateRegex(p string) string {
	var b strings.Builder
	inClass, classStart := false, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			e := p[i+1]
			i++
			classStart = false
			if rep := unicodeClass(e, inClass); rep != "" {
				b.WriteString(rep)
				continue
			}
			b.WriteByte(c)
			b.WriteByte(e)
		case inClass:
			if c == '[' && i+1 < len(p) && p[i+1] == ':' {
				if end := strings.Index(p[i:], ":]"); end >= 0 {
					b.WriteString(p[i : i+end+2])
					i += end + 1
					classStart = false
					continue
				}
			}
			if c == ']' && !classStart {
				inClass = false
			}
			classStart = false
			b.WriteByte(c)
		case c == '[':
			inClass, classStart = true, true
			b.WriteByte(c)
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func unicodeClass(e byte, inClass bool) string {
	if inClass {
		switch e {
		case 'd':
			return uniDigit
		case 'w':
			return uniWord
		case 's':
			return uniSpace
		}
		return ""
	}
	switch e {
	case 'd':
		return uniDigit
	case 'D':
		return `\P{Nd}`
	case 'w':
		return "[" + uniWord + "]"
	case 'W':
		return "[^" + uniWord + "]"
	case 's':
		return "[" + uniSpace + "]"
	case 'S':
		return "[^" + uniSpace + "]"
	}
	return ""
}
