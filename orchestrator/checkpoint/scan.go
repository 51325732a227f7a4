package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/tools"
)

// events is the change notification of a workspace (inotify on Linux).
type events interface {
	// watch starts watching the listed directory rel; false when it
	// cannot (the watch limit), and then events cannot be trusted.
	watch(rel string) bool
	// changed reads what happened since the last call; lost is set when
	// the events cannot say (an overflow, a watched directory moved).
	changed() (ch changes, lost bool)
	close()
}

// changes are what events report.
type changes struct {
	files map[string]bool // files whose content or mode may have changed
	dirs  map[string]bool // directories whose entries changed
	deep  map[string]bool // directories whose ignore files changed: the whole subtree
}

// ignoreFileNames are the files whose change changes what the walker lists
// in their directory and below.
func isIgnoreFile(name string) bool { return name == ".gitignore" || name == ".shiroignore" }

// dirState is what the last scan found in one listed directory.
type dirState struct {
	files   map[string]file // by name
	skipped map[string]SkippedFile
	subdirs map[string]bool
	tree    plumbing.Hash // zero when no file is recorded below
	stale   bool          // tree must be computed again
}

func newDirState() *dirState {
	return &dirState{files: map[string]file{}, subdirs: map[string]bool{}, stale: true}
}

// scanState is the workspace as the last scan of this process found it,
// kept up to date between scans by events. Without events (another OS, no
// inotify left, a lost event queue) every scan walks the whole workspace,
// and the stat index spares reading the files that did not change.
type scanState struct {
	ev      events
	dirs    map[string]*dirState // every listed directory; "" is the root
	exclude tools.FileStat       // .git/info/exclude when the walk began
}

const excludeFile = ".git/info/exclude"

// snapshot stores what is not stored yet and returns the root tree.
func (s *Store) snapshot(ctx context.Context) (plumbing.Hash, map[string]SkippedFile, error) {
	at := s.opts.Now().UnixNano()
	sc := s.scan
	incremental := false
	if sc != nil && sc.ev != nil {
		ch, lost := sc.ev.changed()
		if !lost && s.excludeStat() == sc.exclude {
			ok, err := s.update(ctx, ch, at)
			if err != nil {
				s.dropScan() // the events are spent: the next scan is a full one
				return plumbing.ZeroHash, nil, fmt.Errorf("checkpoint the workspace: %w", err)
			}
			incremental = ok
		}
	}
	if !incremental {
		if err := s.fullScan(ctx, at); err != nil {
			return plumbing.ZeroHash, nil, fmt.Errorf("checkpoint the workspace: %w", err)
		}
	}
	h, err := s.writeTrees()
	if err != nil {
		s.dropScan()
		return plumbing.ZeroHash, nil, err
	}
	var skipped map[string]SkippedFile
	for d, ds := range s.scan.dirs {
		for name, sk := range ds.skipped {
			if skipped == nil {
				skipped = map[string]SkippedFile{}
			}
			skipped[joinPath(d, name)] = sk
		}
	}
	return h, skipped, nil
}

func (s *Store) excludeStat() tools.FileStat {
	fi, err := s.root.Lstat(excludeFile)
	if err != nil {
		return tools.FileStat{}
	}
	st, _ := tools.StatOf(fi)
	return st
}

// fullScan walks the whole workspace, watching each directory before it
// is read so that no change after its listing goes unseen.
func (s *Store) fullScan(ctx context.Context, at int64) error {
	if s.scan != nil && s.scan.ev != nil {
		s.scan.ev.close()
	}
	sc := &scanState{dirs: map[string]*dirState{"": newDirState()}}
	s.scan = sc
	if !s.noEvents {
		sc.ev = newEvents(s.root)
		if sc.ev != nil && !sc.ev.watch("") {
			sc.ev.close()
			sc.ev = nil
		}
	}
	sc.exclude = s.excludeStat()
	seen := make(map[string]struct{}, len(s.index.Files))
	enter := func(d string) bool {
		s.addDir(d)
		return true
	}
	err := s.walkStat(ctx, tools.WalkOptions{DirLinks: true, EnterDir: enter}, at, func(p string) { seen[p] = struct{}{} })
	if err != nil {
		s.dropScan()
		return err
	}
	if len(seen) != len(s.index.Files) {
		for p := range s.index.Files {
			if _, ok := seen[p]; !ok {
				delete(s.index.Files, p)
				s.dirty++
			}
		}
	}
	return nil
}

// dropScan forgets the scan state: the next scan is a full one.
func (s *Store) dropScan() {
	if s.scan != nil && s.scan.ev != nil {
		s.scan.ev.close()
	}
	s.scan = nil
}

// addDir records a listed directory found by a walk, and watches it.
func (s *Store) addDir(d string) {
	sc := s.scan
	sc.dirs[d] = newDirState()
	if parent, ok := sc.dirs[parentDir(d)]; ok {
		parent.subdirs[path.Base(d)] = true
	}
	if sc.ev != nil && !sc.ev.watch(d) {
		sc.ev.close() // from now on, every scan is a full one
		sc.ev = nil
	}
}

// visit records the file p the walker listed with its stat data st,
// reading it when the stat index does not know it as it is.
func (s *Store) visit(p string, st tools.FileStat, at int64) error {
	var fm filemode.FileMode
	switch {
	case st.Mode&fs.ModeSymlink != 0:
		fm = filemode.Symlink
	case st.Mode.IsRegular() && st.Mode&0o111 != 0:
		fm = filemode.Executable
	case st.Mode.IsRegular():
		fm = filemode.Regular
	default:
		return nil // it changed into a directory or a special file since the listing
	}
	ds := s.scan.dirs[parentDir(p)]
	if ds == nil {
		return nil // not below a listed directory (cannot happen)
	}
	name := path.Base(p)
	ds.stale = true
	if fm != filemode.Symlink && st.Size > s.opts.MaxFileSize {
		if ds.skipped == nil {
			ds.skipped = map[string]SkippedFile{}
		}
		ds.skipped[name] = SkippedFile{Size: st.Size, MTime: st.MTime}
		if _, ok := s.index.Files[p]; ok {
			delete(s.index.Files, p)
			s.dirty++
		}
		return nil
	}
	e, ok := s.index.Files[p]
	if (!ok || !e.matches(st)) && s.batch != nil {
		*s.batch = append(*s.batch, toHash{p: p, st: st, fm: fm, ds: ds})
		return nil
	}
	if !ok || !e.matches(st) {
		h, err := s.storeFile(p, fm)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, confine.ErrNotRegular) {
				return nil // gone or replaced since the listing
			}
			return err
		}
		e = entry{Mode: st.Mode, Size: st.Size, MTime: st.MTime, CTime: st.CTime, Ino: st.Ino, Dev: st.Dev, Hash: h, At: at}
		s.index.Files[p] = e
		s.dirty++
	}
	ds.files[name] = file{name: name, mode: fm, hash: e.Hash}
	return nil
}

// toHash is a file a walk found that must be read and stored.
type toHash struct {
	p   string
	st  tools.FileStat
	fm  filemode.FileMode
	ds  *dirState
	h   plumbing.Hash
	err error
}

// walkStat is tools.WalkStat over the workspace calling visit, with the
// files to read gathered and read in parallel after the walk.
func (s *Store) walkStat(ctx context.Context, opts tools.WalkOptions, at int64, seen func(string)) error {
	var batch []toHash
	s.batch = &batch
	err := tools.WalkStat(ctx, s.root, opts, func(p string, st tools.FileStat) error {
		seen(p)
		return s.visit(p, st, at)
	})
	s.batch = nil
	if err != nil {
		return err
	}
	s.hashAll(ctx, batch)
	for _, f := range batch {
		if f.err != nil {
			if errors.Is(f.err, fs.ErrNotExist) || errors.Is(f.err, confine.ErrNotRegular) {
				continue // gone or replaced since the listing
			}
			return f.err
		}
		st := f.st
		s.index.Files[f.p] = entry{Mode: st.Mode, Size: st.Size, MTime: st.MTime, CTime: st.CTime, Ino: st.Ino, Dev: st.Dev, Hash: f.h, At: at}
		s.dirty++
		name := path.Base(f.p)
		f.ds.files[name] = file{name: name, mode: f.fm, hash: f.h}
	}
	return nil
}

// hashAll reads and stores the files of batch, on every core.
func (s *Store) hashAll(ctx context.Context, batch []toHash) {
	parallel(len(batch), 8, func(i int) {
		if err := ctx.Err(); err != nil {
			batch[i].err = err
			return
		}
		batch[i].h, batch[i].err = s.storeFile(batch[i].p, batch[i].fm)
	})
}

// parallel calls fn(i) for i in [0, n) on up to limit goroutines (no more
// than there are cores), and returns when every call has.
func parallel(n, limit int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), limit, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// update brings the scan state up to date with the events ch. false means
// it could not, and a full scan must be made.
func (s *Store) update(ctx context.Context, ch changes, at int64) (bool, error) {
	sc := s.scan
	type rescan struct {
		dir  string
		deep bool
	}
	var todo []rescan
	for d := range ch.dirs {
		if !ch.deep[d] {
			todo = append(todo, rescan{d, false})
		}
	}
	for d := range ch.deep {
		todo = append(todo, rescan{d, true})
	}
	// Shallow first: a directory an ancestor's rescan read again or
	// dropped is done.
	sort.Slice(todo, func(i, j int) bool {
		di, dj := depth(todo[i].dir), depth(todo[j].dir)
		if di != dj {
			return di < dj
		}
		return todo[i].dir < todo[j].dir
	})
	done := map[string]bool{}
	for _, r := range todo {
		if sc.dirs[r.dir] == nil || done[r.dir] {
			continue
		}
		ok, err := s.rescan(ctx, r.dir, r.deep, at, done)
		if err != nil || !ok {
			return ok, err
		}
		if sc.ev == nil {
			return false, nil // a watch could not be added
		}
	}
	// Files whose content or mode may have changed, in directories whose
	// entries did not.
	for p := range ch.files {
		d, name := parentDir(p), path.Base(p)
		ds := sc.dirs[d]
		if ds == nil || done[d] {
			continue
		}
		_, isFile := ds.files[name]
		_, isSkipped := ds.skipped[name]
		if !isFile && !isSkipped {
			continue // ignored, or not a file the walker lists
		}
		fi, err := s.root.Lstat(p)
		if err != nil {
			return false, nil // gone without an event for its directory yet
		}
		st, ok := tools.StatOf(fi)
		if !ok || (!st.Mode.IsRegular() && st.Mode&fs.ModeSymlink == 0) {
			return false, nil
		}
		delete(ds.files, name)
		delete(ds.skipped, name)
		if err := s.visit(p, st, at); err != nil {
			return false, err
		}
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return true, nil
}

// rescan lists the directory d again: its files, and the subdirectories
// it did not have (or every subdirectory when deep). It marks what it read
// in done.
func (s *Store) rescan(ctx context.Context, d string, deep bool, at int64, done map[string]bool) (bool, error) {
	sc := s.scan
	old := sc.dirs[d]
	// Forget what will be read again.
	gone := map[string]bool{}
	forget := func(dir string, ds *dirState) {
		for name := range ds.files {
			gone[joinPath(dir, name)] = true
		}
		delete(sc.dirs, dir)
	}
	if deep {
		for dir, ds := range sc.dirs {
			if dir != d && isBelow(dir, d) {
				forget(dir, ds)
			}
		}
	}
	forget(d, old)
	cur := newDirState()
	sc.dirs[d] = cur
	done[d] = true
	enter := func(sub string) bool {
		if parentDir(sub) == d && sc.dirs[sub] != nil {
			cur.subdirs[path.Base(sub)] = true
			return false // known, and its own events keep it up to date
		}
		s.addDir(sub)
		done[sub] = true
		return true
	}
	seen := map[string]bool{}
	err := s.walkStat(ctx, tools.WalkOptions{Dir: d, DirLinks: true, EnterDir: enter}, at, func(p string) { seen[p] = true })
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, nil
	}
	// Subdirectories no longer listed, and files no longer there.
	for name := range old.subdirs {
		if !cur.subdirs[name] {
			sub := joinPath(d, name)
			for dir, ds := range sc.dirs {
				if dir == sub || isBelow(dir, sub) {
					forget(dir, ds)
				}
			}
		}
	}
	for p := range gone {
		if !seen[p] {
			if _, ok := s.index.Files[p]; ok {
				delete(s.index.Files, p)
				s.dirty++
			}
		}
	}
	return true, nil
}

// writeTrees computes the tree of each stale directory and of its
// ancestors, deepest first, stores those not stored yet, and returns the
// root's.
func (s *Store) writeTrees() (plumbing.Hash, error) {
	sc := s.scan
	var order []string
	for d, ds := range sc.dirs {
		if ds.stale {
			order = append(order, d)
		}
	}
	for _, d := range order[:len(order):len(order)] {
		for a := d; a != ""; {
			a = parentDir(a)
			p := sc.dirs[a]
			if p == nil || p.stale {
				break
			}
			p.stale = true
			order = append(order, a)
		}
	}
	sort.Slice(order, func(i, j int) bool { return depth(order[i]) > depth(order[j]) })
	for _, d := range order {
		ds := sc.dirs[d]
		t := object.Tree{Entries: make([]object.TreeEntry, 0, len(ds.files)+len(ds.subdirs))}
		for _, f := range ds.files {
			t.Entries = append(t.Entries, object.TreeEntry{Name: f.name, Mode: f.mode, Hash: f.hash})
		}
		for name := range ds.subdirs {
			if sub := sc.dirs[joinPath(d, name)]; sub != nil && !sub.tree.IsZero() {
				t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: sub.tree})
			}
		}
		ds.stale = false
		if len(t.Entries) == 0 && d != "" {
			ds.tree = plumbing.ZeroHash // git records no empty directory
			continue
		}
		sort.Slice(t.Entries, func(i, j int) bool { return treeName(t.Entries[i]) < treeName(t.Entries[j]) })
		h, err := s.storeTree(&t)
		if err != nil {
			ds.stale = true
			return plumbing.ZeroHash, err
		}
		ds.tree = h
	}
	return sc.dirs[""].tree, nil
}

func depth(d string) int {
	if d == "" {
		return 0
	}
	return strings.Count(d, "/") + 1
}

func isBelow(p, dir string) bool {
	return dir == "" || strings.HasPrefix(p, dir+"/")
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// storeTree stores t (its entries in git's order) unless it is known to
// be stored, and returns its hash.
func (s *Store) storeTree(t *object.Tree) (plumbing.Hash, error) {
	n := 0
	for _, e := range t.Entries {
		n += len(e.Name) + 28
	}
	buf := make([]byte, 0, n)
	for _, e := range t.Entries {
		if strings.IndexByte(e.Name, 0) >= 0 {
			return plumbing.ZeroHash, fmt.Errorf("checkpoint: a file name with a NUL byte: %q", e.Name)
		}
		buf = strconv.AppendUint(buf, uint64(e.Mode), 8)
		buf = append(buf, ' ')
		buf = append(buf, e.Name...)
		buf = append(buf, 0)
		buf = append(buf, e.Hash[:]...)
	}
	h := plumbing.ComputeHash(plumbing.TreeObject, buf)
	if s.trees[h] {
		return h, nil
	}
	if _, err := s.writeObject(plumbing.TreeObject, buf); err != nil {
		return h, fmt.Errorf("store a checkpoint tree: %w", err)
	}
	s.trees[h] = true
	t.Hash = h
	s.cacheTree(h, t)
	return h, nil
}
