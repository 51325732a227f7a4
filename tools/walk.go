package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// WalkOptions selects what Walk visits.
type WalkOptions struct {
	// Dir is the workspace-relative posix directory to walk; "" or "." is
	// the root. The ignore files of its ancestors apply below it; Dir
	// itself is walked even if a rule ignores it (see Excluded).
	Dir string
	// IncludeIgnored turns off .gitignore, .shiroignore and
	// .git/info/exclude. .git and node_modules directories are skipped
	// all the same (but for the files the index tracks in the latter).
	IncludeIgnored bool
	// Limit stops the walk after that many files; 0 means no limit.
	Limit int
	// DirLinks yields symlinks to directories as well (never entered), as
	// git records them; by default they are left out.
	DirLinks bool
	// EnterDir, when set, is called with each directory the walk would
	// enter (listed, not ignored), before it is read; false leaves it
	// unread. It is not called for Dir itself.
	EnterDir func(rel string) bool
	// Gitlinks yields each submodule (a gitlink in the index) as one path,
	// with mode fs.ModeDir, as git lists it. Walk only; WalkStat never
	// yields a directory.
	Gitlinks bool
}

// FileStat is a file's lstat data as WalkStat reports it.
type FileStat struct {
	// Mode holds the type and permission bits (fs.ModeSymlink for a link).
	Mode         fs.FileMode
	Size         int64
	MTime, CTime int64 // nanoseconds since the epoch
	Ino, Dev     uint64
}

// alwaysSkipped names the directories no walk enters unless the index
// tracks files in them (a .git never: no index entry names one). A file
// named node_modules is an ordinary file.
func alwaysSkipped(name string) bool { return name == ".git" || name == "node_modules" }

// Ignore files read in every directory, in this order (later rules win).
var ignoreFiles = [...]string{".gitignore", ".shiroignore"}

// Walk calls fn with the workspace-relative posix path of every file under
// opts.Dir, breadth first, each directory's entries in byte order of their
// names. As git does, it lists the files the repository's index tracks
// whatever the ignore rules say (if they are there), and nothing under a
// submodule that is not checked out; a submodule that is, is walked like
// any directory. mode is the entry's type bits: 0 for a regular file, fs.ModeSymlink
// for a symlink to a file. Symlinks to directories count as directories for
// the rules and are never entered; a symlink whose target cannot be reached
// inside the workspace (dangling, or pointing outside) is yielded as a file,
// as git lists it. Other special files are skipped, as are directories that
// cannot be read. When fn returns
// fs.SkipAll, Walk stops and returns nil; any other error stops it and is
// returned. A missing or unreadable opts.Dir is an error.
func Walk(ctx context.Context, root *os.Root, opts WalkOptions, fn func(path string, mode fs.FileMode) error) error {
	return walk(ctx, root, opts, func(p string, mode fs.FileMode, _ func() (FileStat, error)) error {
		return fn(p, mode)
	}, walkConfig{})
}

// WalkStat is Walk with each file's lstat data, read relative to the open
// directory (no path is resolved again). A file that vanished between the
// listing and the stat is passed by.
func WalkStat(ctx context.Context, root *os.Root, opts WalkOptions, fn func(path string, st FileStat) error) error {
	opts.Gitlinks = false
	return walk(ctx, root, opts, func(p string, _ fs.FileMode, stat func() (FileStat, error)) error {
		st, err := stat()
		if err != nil {
			return nil
		}
		return fn(p, st)
	}, walkConfig{})
}

// walkConfig holds the knobs tests turn.
type walkConfig struct {
	slow     bool                   // use os.Root even where openat2 exists
	failOpen func(rel string) error // when set, called before each directory is opened
}

func (cfg walkConfig) read(dr *dirReader, d walkDir, withRules bool) (*os.File, []dirent, []ignoreRule, error) {
	if cfg.failOpen != nil {
		if err := cfg.failOpen(d.rel); err != nil {
			return nil, nil, nil, err
		}
	}
	return dr.read(d, withRules)
}

type walkDir struct {
	rel   string       // workspace-relative; "" is the root
	rules []ignoreRule // rules of the ancestors; the directory's own are added when it is read
	// tracked: the directory is ignored and entered for the files the
	// index tracks in it, which are all it lists.
	tracked bool
}

func walk(ctx context.Context, root *os.Root, opts WalkOptions, fn func(string, fs.FileMode, func() (FileStat, error)) error, cfg walkConfig) error {
	start := cleanRel(opts.Dir)
	idx := loadIndex(root)
	var rules []ignoreRule
	var excluded bool
	if !opts.IncludeIgnored {
		rules, excluded = ancestorRules(root, start)
	}
	dr, err := newDirReader(root, start, !cfg.slow)
	if err != nil {
		return fmt.Errorf("walk %s: %w", displayRel(start), err)
	}
	defer dr.close()
	ahead := newReadAhead(dr, cfg, !opts.IncludeIgnored)
	defer ahead.stop()

	yielded := 0
	queue := []walkDir{{rel: start, rules: rules, tracked: excluded && idx.holds(start)}}
	for i := 0; i < len(queue); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		ahead.dispatch(queue, i)
		r := ahead.take(i)
		queue[i] = walkDir{}
		if r.err != nil {
			if i == 0 {
				return fmt.Errorf("walk %s: %w", displayRel(start), r.err)
			}
			continue // unreadable directories are skipped
		}
		stop, err := walkEntries(dr, idx, r.dir, r.d, r.entries, r.rules, opts, &queue, &yielded, fn)
		r.dir.Close()
		if stop || err != nil {
			return err
		}
	}
	return nil
}

// A walk reads the directories of its queue ahead of the one it lists,
// readAheadWorkers at a time and at most readAheadWindow beyond it: the
// walk is mostly waiting on getdents and openat2, which run in parallel,
// while what it yields stays in the queue's order.
const (
	readAheadWorkers = 3
	readAheadWindow  = 64
)

type readAhead struct {
	dr        *dirReader
	cfg       walkConfig
	withRules bool
	reads     map[int]*dirRead // by queue index, dispatched and not taken
	next      int              // the first queue index not dispatched
	jobs      chan *dirRead
	wg        sync.WaitGroup
	stopped   atomic.Bool // the walk is over: reads still queued are not made
}

// dirRead is one directory's read: done is closed when the rest is set.
type dirRead struct {
	d       walkDir
	done    chan struct{}
	dir     *os.File
	entries []dirent
	rules   []ignoreRule
	err     error
}

func newReadAhead(dr *dirReader, cfg walkConfig, withRules bool) *readAhead {
	return &readAhead{dr: dr, cfg: cfg, withRules: withRules, reads: map[int]*dirRead{}}
}

func (a *readAhead) read(r *dirRead) {
	if a.stopped.Load() {
		r.err = fs.ErrClosed
	} else {
		r.dir, r.entries, r.rules, r.err = a.cfg.read(a.dr, r.d, a.withRules)
	}
	close(r.done)
}

// dispatch hands the queue's directories from a.next up to the window
// beyond i to the workers, started when a second directory is queued.
func (a *readAhead) dispatch(queue []walkDir, i int) {
	for ; a.next < len(queue) && a.next <= i+readAheadWindow; a.next++ {
		r := &dirRead{d: queue[a.next], done: make(chan struct{})}
		a.reads[a.next] = r
		if a.next == i && a.jobs == nil {
			a.read(r) // nothing else to read yet: no goroutine
			continue
		}
		if a.jobs == nil {
			a.jobs = make(chan *dirRead, readAheadWindow+1)
			a.wg.Add(readAheadWorkers)
			for range readAheadWorkers {
				go func() {
					defer a.wg.Done()
					for r := range a.jobs {
						a.read(r)
					}
				}()
			}
		}
		a.jobs <- r
	}
}

// take waits for the read of queue index i.
func (a *readAhead) take(i int) *dirRead {
	r := a.reads[i]
	delete(a.reads, i)
	<-r.done
	return r
}

// stop ends the workers and closes the directories read and not taken.
func (a *readAhead) stop() {
	a.stopped.Store(true)
	if a.jobs != nil {
		close(a.jobs)
		a.wg.Wait()
	}
	for _, r := range a.reads {
		<-r.done
		if r.dir != nil {
			r.dir.Close()
		}
	}
}

// walkEntries handles one directory's entries: files go to fn, directories
// to the queue. stop reports the walk is over (fs.SkipAll, the limit, an
// error).
func walkEntries(dr *dirReader, idx *trackedIndex, dir *os.File, d walkDir, entries []dirent, dirRules []ignoreRule, opts WalkOptions, queue *[]walkDir, yielded *int, fn func(string, fs.FileMode, func() (FileStat, error)) error) (bool, error) {
	root := dr.root
	yield := func(p string, mode fs.FileMode, stat func() (FileStat, error)) (bool, error) {
		if err := fn(p, mode, stat); err != nil {
			if errors.Is(err, fs.SkipAll) {
				return true, nil
			}
			return true, err
		}
		*yielded++
		return opts.Limit > 0 && *yielded >= opts.Limit, nil
	}
	{
		for _, e := range entries {
			name := e.name
			if name == ".git" {
				continue
			}
			mode := e.typ
			p := joinRel(d.rel, name)
			isDir := mode.IsDir()
			switch {
			case isDir, mode.IsRegular():
			case mode&fs.ModeSymlink != 0:
				if fi, err := root.Stat(p); err == nil && fi.IsDir() {
					isDir = true
				}
			default:
				continue // sockets, pipes, devices
			}
			gitlink := mode.IsDir() && idx.gitlink(p)
			tracked := false
			if d.tracked || (isDir && alwaysSkipped(name)) || (!opts.IncludeIgnored && ignored(dirRules, p, name, isDir)) {
				// Ignored: only what the index tracks is listed.
				switch {
				case gitlink:
				case mode.IsDir() && idx.holds(p):
					tracked = true
				case !mode.IsDir() && idx.tracked(p):
				default:
					continue
				}
			}
			if gitlink {
				if opts.Gitlinks {
					if stop, err := yield(p, fs.ModeDir, nil); stop {
						return true, err
					}
				}
				if _, err := root.Lstat(p + "/.git"); err != nil {
					continue // not checked out: nothing in it is listed
				}
			}
			if isDir && (mode.IsDir() || !opts.DirLinks) {
				if mode.IsDir() && (opts.EnterDir == nil || opts.EnterDir(p)) {
					*queue = append(*queue, walkDir{rel: p, rules: dirRules, tracked: tracked})
				}
				continue
			}
			stat := func() (FileStat, error) { return dr.lstat(dir, p, name) }
			if stop, err := yield(p, mode, stat); stop {
				return true, err
			}
		}
	}
	return false, nil
}

// Excluded reports whether a walk of the whole workspace would leave out
// the directory dir (workspace-relative): one of its elements is .git or
// node_modules or, unless includeIgnored, is ignored by the rules in force
// there, and the index tracks no file in it.
func Excluded(ctx context.Context, root *os.Root, dir string, includeIgnored bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	dir = cleanRel(dir)
	excluded := false
	if includeIgnored {
		for _, name := range strings.Split(dir, "/") {
			if alwaysSkipped(name) {
				excluded = true
			}
		}
	} else {
		_, excluded = ancestorRules(root, dir)
	}
	if excluded && dir != "" && loadIndex(root).holds(dir) {
		return false, nil
	}
	return excluded, nil
}

// ancestorRules loads .git/info/exclude and the ignore files of every
// proper ancestor of dir, and reports whether dir or an ancestor would be
// skipped on the way down.
func ancestorRules(root *os.Root, dir string) (rules []ignoreRule, excluded bool) {
	if data, err := readRegular(root, ".git/info/exclude"); err == nil {
		rules = parseIgnore(data, "", rules)
	}
	if dir == "" {
		return rules, false
	}
	cur := ""
	for name := range strings.SplitSeq(dir, "/") {
		rules = appendDirRules(root, cur, rules)
		cur = joinRel(cur, name)
		if alwaysSkipped(name) || ignored(rules, cur, name, true) {
			excluded = true
		}
	}
	return rules, excluded
}

// appendDirRules appends the rules of dir's ignore files, read through root.
func appendDirRules(root *os.Root, dir string, rules []ignoreRule) []ignoreRule {
	for _, name := range ignoreFiles {
		p := joinRel(dir, name)
		if fi, err := root.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			continue // like git, never follow a symlinked ignore file
		}
		if data, err := readRegular(root, p); err == nil {
			rules = parseIgnore(data, dir, rules[:len(rules):len(rules)])
		}
	}
	return rules
}

// read lists d's entries in name order and returns the rules in force for
// them: d's inherited rules plus those of its own ignore files.
// The directory stays open for the caller to close.
func (r *dirReader) read(d walkDir, withRules bool) (*os.File, []dirent, []ignoreRule, error) {
	f, err := r.open(d.rel)
	if err != nil {
		return nil, nil, nil, err
	}
	entries, err := r.list(f, d.rel)
	if err != nil {
		f.Close()
		return nil, nil, nil, fmt.Errorf("read directory: %w", err)
	}
	slices.SortFunc(entries, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	rules := d.rules
	if !withRules {
		return f, entries, rules, nil
	}
	for _, name := range ignoreFiles {
		i, found := slices.BinarySearchFunc(entries, name, func(e dirent, n string) int {
			return strings.Compare(e.name, n)
		})
		if !found || !entries[i].typ.IsRegular() {
			continue // like git, never follow a symlinked ignore file
		}
		if data, err := r.readFileIn(f, d.rel, name); err == nil {
			// A fresh backing array, so siblings never share appends.
			rules = parseIgnore(data, d.rel, rules[:len(rules):len(rules)])
		}
	}
	return f, entries, rules, nil
}

// dirent is one entry of a directory: its name and its type bits.
type dirent struct {
	name string
	typ  fs.FileMode
}

// listDirEntries reads dir's entries through os.File.ReadDir.
func listDirEntries(dir *os.File) ([]dirent, error) {
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]dirent, len(entries))
	for i, e := range entries {
		out[i] = dirent{name: e.Name(), typ: e.Type()}
	}
	return out, nil
}

// cleanRel turns a workspace-relative posix path into the walker's form:
// "" for the root, no "./" or trailing slash.
func cleanRel(p string) string {
	p = path.Clean("/" + p)[1:]
	return p
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func displayRel(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}
