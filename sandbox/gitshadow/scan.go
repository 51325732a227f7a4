package gitshadow

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// A process in the sandbox can make a git repository anywhere in the
// workspace (git init, a clone, a hand-made gitfile or bare directory),
// and git on the host would then read that repository's configuration and
// hooks as soon as the user runs it there. No mount can stop a directory
// from being made, so the Scanner looks after every command for what git
// takes as a repository and the caller moves the part that makes it one —
// the HEAD of a git directory, a gitfile, a .git symlink — to storage only
// the sandbox sees, leaving a symlink to it: on the host the symlink leads
// nowhere and git passes the directory by; in the sandbox it resolves and
// the repository works as before.

// Finding is one thing that makes a workspace directory a repository for
// git on the host.
type Finding struct {
	// Path is the file to move, relative to the workspace: "<dir>/HEAD"
	// of a git directory, or "<dir>/.git" when it is a gitfile or symlink.
	// For an unreadable directory it is the directory.
	Path string
	// Repo is the repository's directory (the git directory, or the
	// worktree a .git file or symlink serves), relative to the workspace.
	Repo string
	// Kind is "HEAD", "gitfile", "symlink", or "unreadable": a directory
	// the scanner could not read, even after giving its owner read
	// permission, so it cannot say what is below it.
	Kind string
	// Key is the identity of what makes the repository one (the git
	// directory of a HEAD, the gitfile or symlink itself, the unreadable
	// directory); zero where the platform has none.
	Key FileKey
}

// FileKey is a file's identity, whatever its name: device and inode. A
// protected repository is known by it, so that renaming it, or its
// parent, neither unprotects it nor protects what is made in its place.
type FileKey struct{ Dev, Ino uint64 }

// Kinds of findings.
const (
	KindHEAD       = "HEAD"
	KindGitfile    = "gitfile"
	KindSymlink    = "symlink"
	KindUnreadable = "unreadable"
)

// Scanner finds git repositories in a workspace, re-reading only the
// directories that changed since its last scan (a directory's inode and
// change time; the change time cannot be set by a process, unlike the
// modification time).
type Scanner struct {
	ws    string
	root  *os.Root
	store string // the sandbox-only path prefix moved items live under

	// protected are what shiro mounted read-only over themselves (the
	// user's repositories), by identity: not descended into and never
	// reported, wherever they are now. protectedPaths is the fallback
	// where the platform gives no identity.
	protected      map[FileKey]string
	protectedPaths map[string]bool
	// notes are what the scanner did beside finding things (a directory
	// it made readable), for the caller to report.
	notes []string
	// known .git symlinks found when the session began, by target: the
	// user's, left alone while unchanged.
	known map[string]string

	cache map[string]*dirState
	// events, when the platform has them, say which directories changed
	// since the last scan; primed is set once every directory is watched.
	events eventSource
	primed bool
}

// eventSource tells which directories' entries changed since it was last
// asked (inotify on Linux).
type eventSource interface {
	// watch starts watching the open directory f, known as rel.
	watch(rel string, f *os.File) bool
	// forget stops watching rel.
	forget(rel string)
	// changed returns the changed directories, or all=true when it lost
	// track and everything must be looked at.
	changed() (dirs map[string]bool, all bool)
	close()
}

type dirState struct {
	key      FileKey
	ino      uint64
	ctime    int64
	racy     bool // changed too recently to trust the change time
	children []string
	findings []Finding
}

// NewScanner scans ws (opened as root). store is the path prefix under
// which moved items live in the sandbox (a symlink to it is shiro's).
func NewScanner(ws string, root *os.Root, store string) *Scanner {
	return &Scanner{ws: ws, root: root, store: strings.TrimSuffix(store, "/") + "/", protected: map[FileKey]string{}, protectedPaths: map[string]bool{},
		known: map[string]string{}, cache: map[string]*dirState{}, events: newEvents()}
}

// Close releases the scanner's kernel watches.
func (s *Scanner) Close() {
	if s.events != nil {
		s.events.close()
		s.events = nil
	}
}

// Protect marks what is at paths (relative to the workspace) now as
// something the sandbox cannot change (shiro mounts it read-only): it is
// neither reported nor descended into, from now on and in what earlier
// scans cached. It is known by its identity, not its path: moved, it stays
// protected; something new at its path is not.
func (s *Scanner) Protect(rels ...string) {
	for _, r := range rels {
		fi, err := os.Lstat(filepath.Join(s.ws, filepath.FromSlash(r)))
		if err != nil {
			continue // gone: nothing to protect
		}
		if k, ok := keyOf(fi); ok {
			s.protected[k] = r
		} else {
			s.protectedPaths[r] = true
		}
	}
	for rel, st := range s.cache {
		if s.isProtected(rel, st.key) {
			s.dropTree(rel)
			continue
		}
		st.findings = slices.DeleteFunc(st.findings, func(f Finding) bool { return s.isProtected(f.Path, f.Key) })
	}
}

// ProtectedKeys lists the identities Protect recorded, with the path each
// had then.
func (s *Scanner) ProtectedKeys() map[FileKey]string { return maps.Clone(s.protected) }

// isProtected reports whether the file known as rel, whose identity is key
// (zero when unknown), is protected.
func (s *Scanner) isProtected(rel string, key FileKey) bool {
	if key != (FileKey{}) {
		if _, ok := s.protected[key]; ok {
			return true
		}
	}
	return s.protectedPaths[rel]
}

// TakeNotes returns and forgets what the scanner did beside finding
// things since it was last asked.
func (s *Scanner) TakeNotes() []string {
	n := s.notes
	s.notes = nil
	return n
}

// Know records .git symlinks to leave alone while they point where they
// point now.
func (s *Scanner) Know(findings []Finding) {
	for _, f := range findings {
		if f.Kind == KindSymlink {
			if t, err := s.root.Readlink(f.Path); err == nil {
				s.known[f.Path] = t
			}
		}
	}
}

// racyWindow: a directory whose change time is this recent is re-read on
// the next scan too, as the clock's granularity could hide a second change.
const racyWindow = 2 * time.Second

// Scan returns every finding in the workspace, sorted by path. With
// kernel events it re-reads only the directories they name (and what
// appeared below them); without, or when the events lost track, it looks
// at every directory's change time and re-reads those that changed.
func (s *Scanner) Scan() ([]Finding, error) {
	if s.events != nil && s.primed {
		dirs, all := s.events.changed()
		if !all {
			if err := s.refresh(dirs); err != nil {
				return nil, err
			}
			return s.collect(), nil
		}
	}
	seen := map[string]bool{}
	var out []Finding
	if err := s.visit(".", time.Now(), seen, &out); err != nil {
		return nil, err
	}
	for rel := range s.cache {
		if !seen[rel] {
			s.drop(rel)
		}
	}
	s.primed = s.events != nil
	sortFindings(out)
	return out, nil
}

// refresh re-reads the changed directories: their findings, their gone
// children and whatever new directories appeared below them.
func (s *Scanner) refresh(dirs map[string]bool) error {
	rels := make([]string, 0, len(dirs))
	for rel := range dirs {
		rels = append(rels, rel)
	}
	sort.Strings(rels) // parents first
	for _, rel := range rels {
		old, ok := s.cache[rel]
		if !ok {
			continue // gone with a parent refreshed earlier
		}
		st, err := s.readChecked(rel, 0, 0)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				s.dropTree(rel)
				continue
			}
			return err
		}
		s.cache[rel] = st
		now := map[string]bool{}
		for _, c := range st.children {
			now[c] = true
			if _, known := s.cache[c]; !known {
				if err := s.visit(c, time.Now(), map[string]bool{}, new([]Finding)); err != nil {
					return err
				}
			}
		}
		for _, c := range old.children {
			if !now[c] {
				s.dropTree(c)
			}
		}
	}
	return nil
}

// collect returns the findings of every cached directory.
func (s *Scanner) collect() []Finding {
	var out []Finding
	for _, st := range s.cache {
		out = append(out, st.findings...)
	}
	sortFindings(out)
	return out
}

func sortFindings(out []Finding) {
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
}

// drop forgets one directory.
func (s *Scanner) drop(rel string) {
	delete(s.cache, rel)
	if s.events != nil {
		s.events.forget(rel)
	}
}

// dropTree forgets a directory and everything cached below it.
func (s *Scanner) dropTree(rel string) {
	if st, ok := s.cache[rel]; ok {
		for _, c := range st.children {
			s.dropTree(c)
		}
	}
	s.drop(rel)
}

func (s *Scanner) visit(rel string, now time.Time, seen map[string]bool, out *[]Finding) error {
	fi, err := os.Lstat(filepath.Join(s.ws, filepath.FromSlash(rel)))
	if err != nil || !fi.IsDir() {
		if rel == "." && err != nil {
			return err
		}
		return nil // gone, or replaced by a file: its parent's listing tells
	}
	key, _ := keyOf(fi)
	if s.isProtected(rel, key) {
		return nil
	}
	ino, ctime := fileID(fi)
	st := s.cache[rel]
	if st == nil || st.racy || st.ino != ino || st.ctime != ctime {
		st, err = s.readChecked(rel, ino, ctime)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil
			}
			return err
		}
		st.racy = st.racy || now.Sub(time.Unix(0, ctime)) < racyWindow
		s.cache[rel] = st
	}
	seen[rel] = true
	*out = append(*out, st.findings...)
	for _, c := range st.children {
		if err := s.visit(c, now, seen, out); err != nil {
			return err
		}
	}
	return nil
}

// readChecked is read, failing closed: a directory the scanner may not
// list (the sandbox can chmod its own directories) is made readable for
// its owner, who is the user, and read again; one that stays unreadable
// is a finding of its own (KindUnreadable), re-read on every scan.
func (s *Scanner) readChecked(rel string, ino uint64, ctime int64) (*dirState, error) {
	st, err := s.read(rel, ino, ctime)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return st, err
	}
	if s.makeReadableAlong(rel) {
		if st, err = s.read(rel, ino, ctime); err == nil || !errors.Is(err, fs.ErrPermission) {
			return st, err
		}
	}
	var key FileKey
	if fi, lerr := os.Lstat(filepath.Join(s.ws, filepath.FromSlash(rel))); lerr == nil {
		key, _ = keyOf(fi)
	}
	return &dirState{key: key, ino: ino, ctime: ctime, racy: true,
		findings: []Finding{{Path: rel, Repo: rel, Kind: KindUnreadable, Key: key}}}, nil
}

// makeReadableAlong makes rel and every directory on the way to it
// readable for its owner, from the top down: the root's walk opens each
// directory on the way for reading, so a directory the sandbox made
// searchable but not readable (chmod 0300) above rel stops it as surely as
// rel's own mode. Each one changed is noted. It reports whether every
// directory on the way now is readable.
func (s *Scanner) makeReadableAlong(rel string) bool {
	parts := strings.Split(rel, "/")
	if rel == "." {
		parts = nil
	}
	for i := 0; i <= len(parts); i++ {
		dir := "."
		if i > 0 {
			dir = strings.Join(parts[:i], "/")
		}
		fi, err := os.Lstat(filepath.Join(s.ws, filepath.FromSlash(dir)))
		if err != nil || !fi.IsDir() {
			return false
		}
		if fi.Mode().Perm()&0o500 == 0o500 {
			continue
		}
		mode, err := makeReadable(s.root, dir)
		if err != nil {
			return false
		}
		s.notes = append(s.notes, fmt.Sprintf("%s was not readable (mode %04o); shiro gave you read access to it, to check it for git repositories the sandbox made", displayPath(dir), mode.Perm()))
	}
	return true
}

func displayPath(rel string) string {
	if rel == "." {
		return "the workspace"
	}
	return rel + "/"
}

// read lists one directory and decides what in it makes a repository.
func (s *Scanner) read(rel string, ino uint64, ctime int64) (*dirState, error) {
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st := &dirState{ino: ino, ctime: ctime}
	if fi, err := f.Stat(); err == nil {
		st.key, _ = keyOf(fi)
		if !fi.IsDir() {
			return nil, syscall.ENOTDIR
		}
	}
	if s.events != nil && !s.events.watch(rel, f) {
		// Out of watches (or none here): every scan walks the tree.
		s.events.close()
		s.events, s.primed = nil, false
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	names := map[string]fs.DirEntry{}
	for _, e := range entries {
		names[e.Name()] = e
		if e.IsDir() {
			// Protected ones are passed by when visited, by identity.
			st.children = append(st.children, join(rel, e.Name()))
		}
	}
	if e, ok := names[".git"]; ok && !e.IsDir() {
		p := join(rel, ".git")
		if f, ok := s.check(p, e, rel, FileKey{}); ok {
			st.findings = append(st.findings, f)
		}
	}
	_, hasObjects := names["objects"]
	_, hasRefs := names["refs"]
	_, hasCommon := names["commondir"]
	if e, ok := names["HEAD"]; ok && (hasObjects && hasRefs || hasCommon) && !s.isProtected(rel, st.key) {
		repo := rel
		if path.Base(rel) == ".git" {
			repo = path.Dir(rel) // the worktree a .git directory serves
		}
		if f, ok := s.check(join(rel, "HEAD"), e, repo, st.key); ok {
			st.findings = append(st.findings, f)
		}
	}
	return st, nil
}

// check decides whether an entry is a finding: anything but a symlink
// into the sandbox's storage (or a known, unchanged .git symlink). key is
// the identity of the git directory a HEAD is in; for a .git entry check
// takes the entry's own.
func (s *Scanner) check(p string, e fs.DirEntry, dir string, key FileKey) (Finding, bool) {
	kind := KindHEAD
	if path.Base(p) == ".git" {
		kind = KindGitfile
		if fi, err := os.Lstat(filepath.Join(s.ws, filepath.FromSlash(p))); err == nil {
			key, _ = keyOf(fi)
		}
	}
	if s.isProtected(p, key) {
		return Finding{}, false
	}
	if e.Type()&fs.ModeSymlink != 0 {
		target, err := s.root.Readlink(p)
		if err == nil && strings.HasPrefix(target, s.store) {
			return Finding{}, false
		}
		if kind == KindGitfile {
			kind = KindSymlink
			if t, ok := s.known[p]; ok && t == target {
				return Finding{}, false
			}
		}
	}
	return Finding{Path: p, Repo: dir, Kind: kind, Key: key}, true
}

func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}
