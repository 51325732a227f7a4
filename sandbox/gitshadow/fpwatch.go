package gitshadow

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// maxWatched bounds the watches one Fingerprinter keeps; a git directory
// with more files and directories than this is fingerprinted in full on
// every call.
const maxWatched = 4096

// Fingerprinter returns Fingerprint(root, layout), computing it again only
// when the kernel reported a change to a file or directory it depends on
// since the last computation. Where change events are not available (not
// Linux, no inotify instance left, a symlink among the directories, too many
// files) every call computes it in full, as Fingerprint does.
//
// Events are queued by the system call that makes the change, so a change
// made by a command that has exited is seen by the next call. Writes through
// a shared memory mapping raise no event: such a change is seen with the
// next one that does.
type Fingerprinter struct {
	root string
	l    Layout

	mu    sync.Mutex
	w     changeWatch // nil: no events here
	armed bool        // w watches everything the last fingerprint read
	last  string
	full  int // fingerprints computed in full (for tests)
}

// changeWatch is a set of kernel watches on files and directories.
type changeWatch interface {
	// reset drops every watch and the events queued so far.
	reset() bool
	// add watches one directory (its entries' changes) or one file (its
	// own, whatever name it is reached by), never following a symlink.
	add(abs string, dir bool) bool
	// changed reports whether any event arrived since the last reset.
	changed() bool
	close()
}

// NewFingerprinter watches root's git directories under layout l. Close
// releases its watches.
func NewFingerprinter(root string, l Layout) *Fingerprinter {
	return &Fingerprinter{root: root, l: l, w: newChangeWatch()}
}

// Fingerprint is Fingerprint(root, layout) as of now.
func (f *Fingerprinter) Fingerprint() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.w != nil && f.armed && !f.w.changed() {
		return f.last
	}
	// Watch first, then read: a change made while reading is an event for
	// the next call.
	f.armed = f.w != nil && f.arm()
	f.last = Fingerprint(f.root, f.l)
	f.full++
	return f.last
}

// Close releases the watches; later calls compute in full.
func (f *Fingerprinter) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.w != nil {
		f.w.close()
		f.w, f.armed = nil, false
	}
}

// arm watches every directory and file Fingerprint reads, and every
// existing directory on the way to one that does not exist yet (its
// creation is an event). It reports false when it cannot watch them all.
func (f *Fingerprinter) arm() bool {
	if !f.w.reset() {
		return false
	}
	a := armer{f: f, dirs: map[string]bool{}}
	for _, c := range f.l.candidates() {
		dir, isDir := strings.CutSuffix(c, "/")
		if !isDir {
			dir = path.Dir(c)
		}
		if !a.ancestors(dir) {
			return false
		}
		if isDir {
			if !a.tree(dir) {
				return false
			}
		}
	}
	for _, d := range f.l.GitDirs {
		for _, sub := range []string{"modules", "worktrees", "objects/pack"} {
			if !a.ancestors(path.Join(d, sub)) {
				return false
			}
		}
	}
	// The files Fingerprint stats, by inode: a write through another name
	// (a hard link elsewhere) is still an event.
	ok := true
	_ = f.l.visit(f.root, func(rel string, fi fs.FileInfo) error {
		if ok = a.watch(rel, false); !ok {
			return fs.SkipAll
		}
		return nil
	})
	return ok
}

// armer adds the watches of one arm.
type armer struct {
	f    *Fingerprinter
	dirs map[string]bool // directories watched (or absent), by rel
	n    int
}

func (a *armer) abs(rel string) string {
	return filepath.Join(a.f.root, filepath.FromSlash(rel))
}

// watch adds one watch; false when the budget is spent or it failed for
// another reason than the path not existing.
func (a *armer) watch(rel string, dir bool) bool {
	if a.n++; a.n > maxWatched {
		return false
	}
	if a.f.w.add(a.abs(rel), dir) {
		return true
	}
	_, err := os.Lstat(a.abs(rel))
	return os.IsNotExist(err)
}

// ancestors watches rel (a directory, "." or "" for root) and each
// directory above it up to root. A symlink on the way gives up: what it
// leads to is not watched.
func (a *armer) ancestors(rel string) bool {
	rel = strings.TrimPrefix(path.Clean("/"+rel), "/")
	for {
		if !a.dirs[rel] {
			a.dirs[rel] = true
			fi, err := os.Lstat(a.abs(rel))
			switch {
			case err == nil && fi.Mode()&fs.ModeSymlink != 0:
				return false
			case err == nil && fi.IsDir():
				if !a.watch(rel, true) {
					return false
				}
			case err != nil && !os.IsNotExist(err):
				return false
			}
		}
		if rel == "" {
			return true
		}
		rel = path.Dir(rel)
		if rel == "." {
			rel = ""
		}
	}
}

// tree watches every directory below rel, as walkFiles walks them.
func (a *armer) tree(rel string) bool {
	entries, err := os.ReadDir(a.abs(rel))
	if err != nil {
		return true // absent, or not a directory: ancestors watch its creation
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		child := path.Join(rel, e.Name())
		a.dirs[child] = true
		if !a.watch(child, true) || !a.tree(child) {
			return false
		}
	}
	return true
}
