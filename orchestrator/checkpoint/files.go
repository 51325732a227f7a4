package checkpoint

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TreeFile is one file of a tree in the store, its path from the tree's
// top: what copy mode compares and composes states with.
type TreeFile struct {
	Path string
	// Mode is 0o644, 0o755 or fs.ModeSymlink.
	Mode fs.FileMode
	// Hash is the git blob hash of the content (a symlink's target), hex.
	Hash string
}

func fileMode(m fs.FileMode) filemode.FileMode {
	switch {
	case m&fs.ModeSymlink != 0:
		return filemode.Symlink
	case m&0o111 != 0:
		return filemode.Executable
	}
	return filemode.Regular
}

// PutBlob stores data as a blob and returns its hash.
func (s *Store) PutBlob(data []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := s.storeBlob(data)
	if err != nil {
		return "", fmt.Errorf("store a blob: %w", err)
	}
	return h.String(), nil
}

// Blob returns the content of a stored blob.
func (s *Store) Blob(hash string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readBlob(plumbing.NewHash(hash))
}

// HasBlob reports whether the blob is stored.
func (s *Store) HasBlob(hash string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hasObject(plumbing.NewHash(hash))
}

// Files lists the files of the stored tree (every level), by path.
func (s *Store) Files(ctx context.Context, tree string) ([]TreeFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []TreeFile
	if tree == "" {
		return nil, nil
	}
	if err := s.listTree(ctx, plumbing.NewHash(tree), "", &out); err != nil {
		return nil, fmt.Errorf("list a checkpoint tree: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (s *Store) listTree(ctx context.Context, h plumbing.Hash, prefix string, out *[]TreeFile) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t, err := s.loadTree(h)
	if err != nil {
		return err
	}
	for _, e := range t.Entries {
		p := joinPath(prefix, e.Name)
		if e.Mode == filemode.Dir {
			if err := s.listTree(ctx, e.Hash, p, out); err != nil {
				return err
			}
			continue
		}
		*out = append(*out, TreeFile{Path: p, Mode: fsMode(e.Mode), Hash: e.Hash.String()})
	}
	return nil
}

// PutTree stores the tree of files (their blobs must be stored) and
// returns its hash; no files is the empty tree, "".
func (s *Store) PutTree(files []TreeFile) (string, error) {
	if len(files) == 0 {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dirs := map[string]*object.Tree{"": {}}
	var names []string
	for _, f := range files {
		if f.Path == "" || path.Clean(f.Path) != f.Path || strings.HasPrefix(f.Path, "../") || path.IsAbs(f.Path) {
			return "", fmt.Errorf("checkpoint: bad path %q", f.Path)
		}
		dir, name := path.Split(f.Path)
		dir = strings.TrimSuffix(dir, "/")
		for d := dir; d != "" && dirs[d] == nil; d = parentDir(d) {
			dirs[d] = &object.Tree{}
			names = append(names, d)
		}
		dirs[dir].Entries = append(dirs[dir].Entries, object.TreeEntry{Name: name, Mode: fileMode(f.Mode), Hash: plumbing.NewHash(f.Hash)})
	}
	// Deepest first: a directory's tree is stored before its parent's.
	sort.Slice(names, func(i, j int) bool { return depth(names[i]) > depth(names[j]) })
	for _, d := range append(names, "") {
		t := dirs[d]
		sort.Slice(t.Entries, func(i, j int) bool { return treeName(t.Entries[i]) < treeName(t.Entries[j]) })
		seen := make(map[string]bool, len(t.Entries))
		for _, e := range t.Entries {
			if seen[e.Name] {
				return "", fmt.Errorf("checkpoint: %q is in the tree twice", joinPath(d, e.Name))
			}
			seen[e.Name] = true
		}
		h, err := s.storeTree(t)
		if err != nil {
			return "", err
		}
		if d != "" {
			parent, name := parentDir(d), path.Base(d)
			dirs[parent].Entries = append(dirs[parent].Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		} else {
			return h.String(), nil
		}
	}
	return "", nil // not reached: "" is last
}

// Lookup finds paths in the stored tree: the files it holds (a path it
// lacks, or that names a directory, is not in the result). Only the trees
// along the paths are read.
func (s *Store) Lookup(ctx context.Context, tree string, paths []string) (map[string]TreeFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]TreeFile, len(paths))
	if tree == "" {
		return out, nil
	}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h := plumbing.NewHash(tree)
		parts := strings.Split(p, "/")
		for i, name := range parts {
			t, err := s.loadTree(h)
			if err != nil {
				return nil, fmt.Errorf("look up %s: %w", p, err)
			}
			e, ok := findEntry(t, name)
			if !ok {
				break
			}
			if i < len(parts)-1 {
				if e.Mode != filemode.Dir {
					break
				}
				h = e.Hash
				continue
			}
			if e.Mode != filemode.Dir {
				out[p] = TreeFile{Path: p, Mode: fsMode(e.Mode), Hash: e.Hash.String()}
			}
		}
	}
	return out, nil
}

// findEntry finds name in t (its entries sorted git's way).
func findEntry(t *object.Tree, name string) (object.TreeEntry, bool) {
	for _, e := range t.Entries {
		if e.Name == name {
			return e, true
		}
	}
	return object.TreeEntry{}, false
}

// EditTree stores the tree that is tree with the files of set put in
// (replacing what stood at their paths, a directory included) and the
// paths of remove taken out, and returns its hash. Only the trees along
// the changed paths are written again.
func (s *Store) EditTree(tree string, set []TreeFile, remove []string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	root := &editDir{subs: map[string]*editDir{}}
	for _, f := range set {
		if err := checkTreePath(f.Path); err != nil {
			return "", err
		}
		d, name := root.walk(f.Path)
		tf := f
		d.files = append(d.files, editFile{name: name, file: &tf})
	}
	for _, p := range remove {
		if err := checkTreePath(p); err != nil {
			return "", err
		}
		d, name := root.walk(p)
		d.files = append(d.files, editFile{name: name})
	}
	h := plumbing.ZeroHash
	if tree != "" {
		h = plumbing.NewHash(tree)
	}
	out, err := s.edit(h, root)
	if err != nil {
		return "", err
	}
	if out.IsZero() {
		return "", nil
	}
	return out.String(), nil
}

func checkTreePath(p string) error {
	if p == "" || path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." || path.IsAbs(p) {
		return fmt.Errorf("checkpoint: bad path %q", p)
	}
	return nil
}

// editDir is what EditTree changes in one directory: files put in (file
// set) or taken out (nil), and subdirectories with changes of their own.
type editDir struct {
	files []editFile
	subs  map[string]*editDir
}

type editFile struct {
	name string
	file *TreeFile
}

func (d *editDir) walk(p string) (*editDir, string) {
	parts := strings.Split(p, "/")
	for _, name := range parts[:len(parts)-1] {
		sub := d.subs[name]
		if sub == nil {
			sub = &editDir{subs: map[string]*editDir{}}
			d.subs[name] = sub
		}
		d = sub
	}
	return d, parts[len(parts)-1]
}

// edit applies d to the tree h (zero: none) and stores the result; zero
// when it is empty.
func (s *Store) edit(h plumbing.Hash, d *editDir) (plumbing.Hash, error) {
	entries := map[string]object.TreeEntry{}
	if !h.IsZero() {
		t, err := s.loadTree(h)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		for _, e := range t.Entries {
			entries[e.Name] = e
		}
	}
	for _, f := range d.files {
		if f.file == nil {
			delete(entries, f.name)
			continue
		}
		entries[f.name] = object.TreeEntry{Name: f.name, Mode: fileMode(f.file.Mode), Hash: plumbing.NewHash(f.file.Hash)}
	}
	for name, sub := range d.subs {
		base := plumbing.ZeroHash
		if e, ok := entries[name]; ok && e.Mode == filemode.Dir {
			base = e.Hash
		}
		nh, err := s.edit(base, sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if nh.IsZero() {
			if e, ok := entries[name]; ok && e.Mode == filemode.Dir {
				delete(entries, name)
			}
			continue
		}
		entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: nh}
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, nil
	}
	t := &object.Tree{Entries: make([]object.TreeEntry, 0, len(entries))}
	for _, e := range entries {
		t.Entries = append(t.Entries, e)
	}
	sort.Slice(t.Entries, func(i, j int) bool { return treeName(t.Entries[i]) < treeName(t.Entries[j]) })
	return s.storeTree(t)
}
