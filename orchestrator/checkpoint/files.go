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
