package gitshadow

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
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
	Path string
	// Repo is the repository's directory (the git directory, or the
	// worktree a .git file or symlink serves), relative to the workspace.
	Repo string
	// Kind is "HEAD", "gitfile" or "symlink".
	Kind string
}

// Scanner finds git repositories in a workspace, re-reading only the
// directories that changed since its last scan (a directory's inode and
// change time; the change time cannot be set by a process, unlike the
// modification time).
type Scanner struct {
	ws    string
	root  *os.Root
	store string // the sandbox-only path prefix moved items live under

	// protected paths (relative) are mount points shiro made read-only:
	// not descended into and never reported.
	protected map[string]bool
	// known .git symlinks found when the session began, by target: the
	// user's, left alone while unchanged.
	known map[string]string

	cache map[string]*dirState
}

type dirState struct {
	ino      uint64
	ctime    int64
	racy     bool // changed too recently to trust the change time
	children []string
	findings []Finding
}

// NewScanner scans ws (opened as root). store is the path prefix under
// which moved items live in the sandbox (a symlink to it is shiro's).
func NewScanner(ws string, root *os.Root, store string) *Scanner {
	return &Scanner{ws: ws, root: root, store: strings.TrimSuffix(store, "/") + "/", protected: map[string]bool{}, known: map[string]string{}, cache: map[string]*dirState{}}
}

// Protect marks paths (relative to the workspace) the sandbox cannot
// change: they are neither reported nor descended into.
func (s *Scanner) Protect(rels ...string) {
	for _, r := range rels {
		s.protected[r] = true
	}
}

// Know records .git symlinks to leave alone while they point where they
// point now.
func (s *Scanner) Know(findings []Finding) {
	for _, f := range findings {
		if f.Kind == "symlink" {
			if t, err := s.root.Readlink(f.Path); err == nil {
				s.known[f.Path] = t
			}
		}
	}
}

// racyWindow: a directory whose change time is this recent is re-read on
// the next scan too, as the clock's granularity could hide a second change.
const racyWindow = 2 * time.Second

// Scan returns every finding in the workspace, sorted by path.
func (s *Scanner) Scan() ([]Finding, error) {
	seen := map[string]bool{}
	var out []Finding
	if err := s.visit(".", time.Now(), seen, &out); err != nil {
		return nil, err
	}
	for rel := range s.cache {
		if !seen[rel] {
			delete(s.cache, rel)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (s *Scanner) visit(rel string, now time.Time, seen map[string]bool, out *[]Finding) error {
	fi, err := os.Lstat(filepath.Join(s.ws, filepath.FromSlash(rel)))
	if err != nil || !fi.IsDir() {
		if rel == "." && err != nil {
			return err
		}
		return nil // gone, or replaced by a file: its parent's listing tells
	}
	ino, ctime := fileID(fi)
	st := s.cache[rel]
	if st == nil || st.racy || st.ino != ino || st.ctime != ctime {
		st, err = s.read(rel, ino, ctime)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return nil
			}
			return err
		}
		st.racy = now.Sub(time.Unix(0, ctime)) < racyWindow
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

// read lists one directory and decides what in it makes a repository.
func (s *Scanner) read(rel string, ino uint64, ctime int64) (*dirState, error) {
	f, err := s.root.Open(rel)
	if err != nil {
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	st := &dirState{ino: ino, ctime: ctime}
	names := map[string]fs.DirEntry{}
	for _, e := range entries {
		names[e.Name()] = e
		child := join(rel, e.Name())
		if e.IsDir() && !s.protected[child] {
			st.children = append(st.children, child)
		}
	}
	if e, ok := names[".git"]; ok && !e.IsDir() {
		p := join(rel, ".git")
		if f, ok := s.check(p, e, rel); ok {
			st.findings = append(st.findings, f)
		}
	}
	_, hasObjects := names["objects"]
	_, hasRefs := names["refs"]
	_, hasCommon := names["commondir"]
	if e, ok := names["HEAD"]; ok && (hasObjects && hasRefs || hasCommon) && !s.protected[rel] {
		repo := rel
		if path.Base(rel) == ".git" {
			repo = path.Dir(rel) // the worktree a .git directory serves
		}
		if f, ok := s.check(join(rel, "HEAD"), e, repo); ok {
			st.findings = append(st.findings, f)
		}
	}
	return st, nil
}

// check decides whether an entry is a finding: anything but a symlink
// into the sandbox's storage (or a known, unchanged .git symlink).
func (s *Scanner) check(p string, e fs.DirEntry, dir string) (Finding, bool) {
	if s.protected[p] {
		return Finding{}, false
	}
	kind := "HEAD"
	if path.Base(p) == ".git" {
		kind = "gitfile"
	}
	if e.Type()&fs.ModeSymlink != 0 {
		target, err := s.root.Readlink(p)
		if err == nil && strings.HasPrefix(target, s.store) {
			return Finding{}, false
		}
		if kind == "gitfile" {
			kind = "symlink"
			if t, ok := s.known[p]; ok && t == target {
				return Finding{}, false
			}
		}
	}
	return Finding{Path: p, Repo: dir, Kind: kind}, true
}

func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}
