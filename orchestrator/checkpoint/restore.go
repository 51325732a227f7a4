package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/tools"
)

// Plan is what putting the workspace back to a checkpoint would do.
type Plan struct {
	Target Checkpoint
	// Changes turn the workspace as it is now into the target.
	Changes []FileChange
	// UserChanged are files of Changes that changed after the turns being
	// undone ended (the user's edits): they are overwritten only when the
	// caller says so.
	UserChanged []string
	// Unrestorable are files too large to record that differ between the
	// target and now: left as they are.
	Unrestorable []string

	current State
}

// Plan compares the workspace now with target. since is the checkpoint
// taken when the last turn being undone ended (nil when there is none):
// files changed after it are the user's.
func (s *Store) Plan(ctx context.Context, target Checkpoint, since *Checkpoint) (Plan, error) {
	unlock, err := s.lock()
	if err != nil {
		return Plan{}, err
	}
	defer unlock()
	h, skipped, err := s.snapshot(ctx)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Target: target, current: State{Tree: h.String(), Skipped: skipped}}
	if p.Changes, err = s.changes(ctx, p.current.Tree, target.Tree); err != nil {
		return Plan{}, err
	}
	p.Unrestorable = unrestorable(target.Skipped, skipped)
	p.Changes = dropPaths(p.Changes, target.Skipped, skipped)
	if since != nil {
		user, err := s.changes(ctx, since.Tree, p.current.Tree)
		if err != nil {
			return Plan{}, err
		}
		touched := map[string]bool{}
		for _, c := range p.Changes {
			touched[c.Path] = true
		}
		for _, c := range user {
			if touched[c.Path] {
				p.UserChanged = append(p.UserChanged, c.Path)
			}
		}
	}
	return p, nil
}

// unrestorable names the large files that differ between a and b.
func unrestorable(a, b map[string]SkippedFile) []string {
	var out []string
	for p, x := range a {
		if y, ok := b[p]; !ok || x != y {
			out = append(out, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// dropPaths removes the changes of paths that either side skipped: the
// target's content is not in the store, and the present file must not be
// taken for one the target did not have.
func dropPaths(chs []FileChange, a, b map[string]SkippedFile) []FileChange {
	if len(a) == 0 && len(b) == 0 {
		return chs
	}
	out := chs[:0]
	for _, c := range chs {
		_, inA := a[c.Path]
		_, inB := b[c.Path]
		if !inA && !inB {
			out = append(out, c)
		}
	}
	return out
}

// Apply puts the workspace back to p.Target, leaving the paths in keep as
// they are. It first records a KindUndo checkpoint of the workspace (so an
// undo can itself be undone) and works from what it finds then. Every new
// content is written to a temporary file beside its destination before
// anything is deleted or renamed, so a failure while reading the store or
// writing leaves the workspace as it was; the renames and deletions come
// last. It returns the changes made.
func (s *Store) Apply(ctx context.Context, p Plan, keep map[string]bool) ([]FileChange, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	before, err := s.record(ctx, Meta{Session: p.Target.Session, Turn: p.Target.Turn, Kind: KindUndo})
	if err != nil {
		return nil, err
	}
	chs, err := s.changes(ctx, before.Tree, p.Target.Tree)
	if err != nil {
		return nil, err
	}
	chs = dropPaths(chs, p.Target.Skipped, before.Skipped)
	var todo []FileChange
	for _, c := range chs {
		if !keep[c.Path] {
			todo = append(todo, c)
		}
	}
	target, err := s.tree(p.Target.Tree)
	if err != nil {
		return nil, err
	}
	if err := s.restore(ctx, todo, target); err != nil {
		return nil, err
	}
	return todo, nil
}

// ApplyPaths puts only the named paths of the workspace into their state
// in target (a file target lacks is deleted), as Apply does: a KindUndo
// checkpoint first (meta names it), new contents written beside their
// files before any rename. The rest of the workspace is left as it is,
// whatever it holds now. It returns the changes made.
func (s *Store) ApplyPaths(ctx context.Context, target Checkpoint, paths map[string]bool, meta Meta) ([]FileChange, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	meta.Kind = KindUndo
	before, err := s.record(ctx, meta)
	if err != nil {
		return nil, err
	}
	chs, err := s.changes(ctx, before.Tree, target.Tree)
	if err != nil {
		return nil, err
	}
	var todo []FileChange
	for _, c := range chs {
		if paths[c.Path] {
			todo = append(todo, c)
		}
	}
	t, err := s.tree(target.Tree)
	if err != nil {
		return nil, err
	}
	if err := s.restore(ctx, todo, t); err != nil {
		return nil, err
	}
	return todo, nil
}

// pending is one file to put in place.
type pending struct {
	c    FileChange
	name string // base name
	tmp  string // the temporary file's base name beside it, once written
}

// group is the files to write in one directory.
type group struct {
	dir   string
	files []*pending
	// h holds the directory open from the step that writes its temporary
	// files to the one that renames them (nil: opened again), so that
	// both happen in the directory the gate passed, whatever becomes of
	// its path meanwhile.
	h *hostwrite.Dir
}

// maxHeld bounds the directories a restore holds open between its steps
// (file descriptors are finite); the others are opened again, through the
// gate, for the renames.
const maxHeld = 256

// byDir groups files to write by their directory, in a stable order.
func byDir(writes []*pending) []*group {
	var groups []*group
	at := map[string]*group{}
	for _, w := range writes {
		d := dirOf(w.c.Path)
		g := at[d]
		if g == nil {
			g = &group{dir: d}
			at[d] = g
			groups = append(groups, g)
		}
		g.files = append(g.files, w)
	}
	return groups
}

// errNoGate is a restore by a store opened without the workspace's write
// gate.
var errNoGate = errors.New("restore: no write gate for the workspace")

// restore puts the changes chs in place, through the workspace's write
// gate: no symlink is followed on the way to any file, and nothing is
// written into a git directory. Every write and removal is checked first,
// and a refusal changes nothing. Each directory is opened once and its
// files are written, checked and renamed by name inside it.
func (s *Store) restore(ctx context.Context, chs []FileChange, target *object.Tree) error {
	if s.gate == nil {
		return errNoGate
	}
	var writes []*pending
	var deletes []string
	for _, c := range chs {
		if c.Action == Deleted {
			deletes = append(deletes, c.Path)
			continue
		}
		if !s.hasObject(c.newHash) {
			return fmt.Errorf("restore %s: the checkpoint lacks its content", termsafe.Name(c.Path))
		}
		writes = append(writes, &pending{c: c, name: path.Base(c.Path)})
	}
	// 0. Nothing changes unless every write and removal would pass now.
	if err := s.check(ctx, writes, deletes); err != nil {
		return fmt.Errorf("nothing was changed: %w", err)
	}
	groups := byDir(writes)
	held, limit := 0, maxHeld
	if s.keepOpen != 0 {
		limit = max(s.keepOpen, 0)
	}
	defer func() {
		for _, g := range groups {
			if g.h != nil {
				g.h.Close()
			}
		}
	}()
	keep := func(g *group, h *hostwrite.Dir) {
		if held < limit {
			g.h = h
			held++
			return
		}
		h.Close()
	}
	cleanup := func() {
		for _, g := range groups {
			h := g.h
			if h == nil {
				var err error
				if h, err = s.gate.OpenDir(g.dir); err != nil {
					continue
				}
				defer h.Close()
			}
			for _, w := range g.files {
				if w.tmp != "" {
					_ = h.Remove(w.tmp)
				}
			}
		}
	}
	// 1. New content beside the files whose directory is there already.
	if err := ctx.Err(); err != nil {
		return err
	}
	werrs := make([]error, len(groups))
	opened := make([]*hostwrite.Dir, len(groups))
	inGroups(groups, func(i int, g *group) {
		h, err := s.gate.OpenDir(g.dir)
		if err != nil {
			return // made in step 3 (a symlink or file in its way goes in step 2)
		}
		opened[i] = h
		for _, w := range g.files {
			if err := s.writeTemp(h, w); err != nil {
				werrs[i] = err
				return
			}
		}
	})
	for i, h := range opened {
		if h != nil {
			keep(groups[i], h)
		}
	}
	if err := errors.Join(werrs...); err != nil {
		cleanup()
		return err
	}
	if s.afterTemps != nil {
		s.afterTemps()
	}
	// 2. Deletions, deepest first, and the directories they empty that the
	// target has not.
	sort.Slice(deletes, func(i, j int) bool { return deletes[i] > deletes[j] })
	var errs []error
	for _, p := range deletes {
		if err := s.gate.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", termsafe.Name(p), err))
		}
	}
	s.removeEmptyDirs(deletes, target)
	// 3. The files whose directory had to be made.
	for _, g := range groups {
		if g.files[0].tmp != "" {
			continue
		}
		h, err := s.gate.MkdirAll(g.dir)
		if err != nil {
			for _, w := range g.files {
				errs = append(errs, restoreError(w.c.Path, err))
			}
			continue
		}
		for _, w := range g.files {
			if err := s.writeTemp(h, w); err != nil {
				errs = append(errs, err)
			}
		}
		keep(g, h)
	}
	// The new contents reach the disk before any rename makes them the
	// files' (one sync of the file system rather than one per file).
	if err := syncRoot(s.root); err != nil {
		cleanup()
		return errors.Join(append(errs, fmt.Errorf("sync the workspace: %w", err))...)
	}
	// 4. Every rename.
	rerrs := make([][]error, len(groups))
	inGroups(groups, func(i int, g *group) {
		h := g.h
		if h == nil {
			var err error
			if h, err = s.gate.OpenDir(g.dir); err != nil {
				for _, w := range g.files {
					if w.tmp != "" {
						rerrs[i] = append(rerrs[i], restoreError(w.c.Path, err))
					}
				}
				return
			}
			defer h.Close()
		}
		for _, w := range g.files {
			if w.tmp == "" {
				continue
			}
			if w.c.Action != Modified {
				if mode, err := h.Lstat(w.name); err == nil && mode.IsDir() {
					// A directory the turn made where the target has a
					// file: empty now unless it holds files the walker
					// does not list.
					_ = h.RemoveEmptyDir(w.name)
				}
			}
			if err := h.Replace(w.tmp, w.name); err != nil {
				_ = h.Remove(w.tmp)
				rerrs[i] = append(rerrs[i], fmt.Errorf("restore %s: %w", termsafe.Name(w.c.Path), err))
			}
			w.tmp = ""
		}
	})
	for _, e := range rerrs {
		errs = append(errs, e...)
	}
	return errors.Join(errs...)
}

// restoreError is the failure to restore p because its directory could
// not be opened: a refusal of the directory is one of p.
func restoreError(p string, err error) error {
	var r *hostwrite.Refusal
	if errors.As(err, &r) {
		return &hostwrite.Refusal{Path: p, Reason: r.Reason}
	}
	return fmt.Errorf("restore %s: %w", termsafe.Name(p), err)
}

// check asks the gate, before anything changes, whether every write and
// removal of a restore would pass, and refuses a symlink anywhere but in a
// directory the walker lists.
func (s *Store) check(ctx context.Context, writes []*pending, deletes []string) error {
	ops := make([]hostwrite.Op, 0, len(writes)+len(deletes))
	for _, p := range deletes {
		ops = append(ops, hostwrite.Op{Path: p, Remove: true})
	}
	for _, w := range writes {
		ops = append(ops, hostwrite.Op{Path: w.c.Path})
	}
	errs := []error{s.gate.Check(ops)}
	for _, w := range writes {
		if w.c.newFM == filemode.Symlink {
			errs = append(errs, s.symlinkHome(ctx, w.c.Path))
		}
	}
	return errors.Join(errs...)
}

// symlinkHome refuses to restore the symlink p unless its directory is a
// real directory the walker lists now (not one it ignores, and not a
// symlink), or one the restore makes below a listed directory and that the
// walker would not ignore: a link is put back only where the checkpoints
// see it.
func (s *Store) symlinkHome(ctx context.Context, p string) error {
	listed := func(d string) bool {
		if d == "." {
			d = ""
		}
		return s.scan != nil && s.scan.dirs[d] != nil
	}
	dir := dirOf(p)
	if listed(dir) {
		return nil
	}
	refusal := &hostwrite.Refusal{Path: p, Reason: fmt.Sprintf("%s is not a directory shiro lists (it is ignored, or not a real directory); a symlink is put back only into one", dir)}
	if _, err := s.root.Lstat(dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return refusal
	}
	above := dirOf(dir)
	for above != "." {
		if _, err := s.root.Lstat(above); err == nil {
			break
		}
		above = dirOf(above)
	}
	if !listed(above) {
		return refusal
	}
	if excluded, err := tools.Excluded(ctx, s.root, dir, false); err != nil || excluded {
		return refusal
	}
	return nil
}

// inGroups calls fn for each group, on a few goroutines: the file system
// works on several directories at once.
func inGroups(groups []*group, fn func(i int, g *group)) {
	parallel(len(groups), 4, func(i int) { fn(i, groups[i]) })
}

// writeTemp writes w's content to a temporary file in its directory dir,
// with the mode it must have.
func (s *Store) writeTemp(dir *hostwrite.Dir, w *pending) error {
	data, err := s.readBlob(w.c.newHash)
	if err != nil {
		return fmt.Errorf("restore %s: %w", termsafe.Name(w.c.Path), err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := ".shiro-undo-" + hex.EncodeToString(suffix[:])
	if w.c.newFM == filemode.Symlink {
		if err := dir.Symlink(string(data), tmp); err != nil {
			return fmt.Errorf("restore %s: %w", termsafe.Name(w.c.Path), err)
		}
		w.tmp = tmp
		return nil
	}
	perm, exact := permFor(dir, w)
	f, err := dir.Create(tmp, perm)
	if err != nil {
		return fmt.Errorf("restore %s: %w", termsafe.Name(w.c.Path), err)
	}
	w.tmp = tmp
	_, werr := f.Write(data)
	var merr error
	if exact {
		merr = f.Chmod(perm) // past the umask
	}
	cerr := f.Close()
	if err := errors.Join(werr, merr, cerr); err != nil {
		return fmt.Errorf("restore %s: %w", termsafe.Name(w.c.Path), err)
	}
	return nil
}

// permFor keeps the permission bits of the file there now, with the
// executable bits the target has (exact); a new file gets 0644 or 0755
// less the umask.
func permFor(dir *hostwrite.Dir, w *pending) (perm fs.FileMode, exact bool) {
	exec := w.c.newFM == filemode.Executable
	mode, err := dir.Lstat(w.name)
	if err != nil || !mode.IsRegular() {
		if exec {
			return 0o755, false
		}
		return 0o644, false
	}
	perm = mode.Perm()
	if exec {
		return perm | (perm&0o444)>>2, true
	}
	return perm &^ 0o111, true
}

// removeEmptyDirs removes the directories of deleted files, innermost
// first, that are empty now and that the target does not have.
func (s *Store) removeEmptyDirs(deleted []string, target *object.Tree) {
	dirs := map[string]bool{}
	for _, p := range deleted {
		for d := dirOf(p); d != "."; d = dirOf(d) {
			dirs[d] = true
		}
	}
	list := make([]string, 0, len(dirs))
	for d := range dirs {
		list = append(list, d)
	}
	sort.Slice(list, func(i, j int) bool { return strings.Count(list[i], "/") > strings.Count(list[j], "/") })
	for _, d := range list {
		if s.hasDir(target, d) {
			continue
		}
		_ = s.gate.RemoveEmptyDir(d) // fails, as it should, on a directory that is not empty
	}
}

func dirOf(p string) string {
	d := path.Dir(p)
	if d == "" {
		return "."
	}
	return d
}

// hasDir reports whether the tree t has the directory d.
func (s *Store) hasDir(t *object.Tree, d string) bool {
	for name := range strings.SplitSeq(d, "/") {
		var next *object.TreeEntry
		for i := range t.Entries {
			if t.Entries[i].Name == name && t.Entries[i].Mode == filemode.Dir {
				next = &t.Entries[i]
				break
			}
		}
		if next == nil {
			return false
		}
		sub, err := s.loadTree(next.Hash)
		if err != nil {
			return false
		}
		t = sub
	}
	return true
}
