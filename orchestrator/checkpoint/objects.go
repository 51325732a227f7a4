package checkpoint

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// The store's objects are git loose objects (objects/xx/yyyy…, zlib of
// "type size\0content"), the form go-git's filesystem storage reads and
// writes. Blobs and trees are read and written here directly: go-git's
// storage resolves every object path through a chroot helper that lstat's
// each element, which made a checkpoint and an undo spend more time finding
// files than reading them. go-git stays the reference for the format (see
// the tests) and serves what is not loose.

// zlibWriters keeps compressors for reuse: each holds hundreds of KiB.
var zlibWriters = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
	return zw
}}

func (s *Store) objectPath(h plumbing.Hash) string {
	hex := h.String()
	return filepath.Join(s.dir, "objects", hex[:2], hex[2:])
}

// hasObject reports whether h is stored.
func (s *Store) hasObject(h plumbing.Hash) bool {
	if _, err := os.Lstat(s.objectPath(h)); err == nil {
		return true
	}
	return s.objs.HasEncodedObject(h) == nil
}

// writeObject stores content as an object of type t and returns its hash.
func (s *Store) writeObject(t plumbing.ObjectType, content []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(t, content)
	name := s.objectPath(h)
	if _, err := os.Lstat(name); err == nil {
		return h, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(content)/2 + 64)
	zw := zlibWriters.Get().(*zlib.Writer)
	zw.Reset(&buf)
	zw.Write([]byte(t.String() + " " + strconv.Itoa(len(content)) + "\x00"))
	zw.Write(content)
	err := zw.Close()
	zlibWriters.Put(zw)
	if err != nil {
		return h, err
	}
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, ".tmp-")
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o700); err == nil {
			tmp, err = os.CreateTemp(dir, ".tmp-")
		}
	}
	if err != nil {
		return h, fmt.Errorf("store a checkpoint object: %w", err)
	}
	_, werr := tmp.Write(buf.Bytes())
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return h, fmt.Errorf("store a checkpoint object: %w", err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		os.Remove(tmp.Name())
		return h, fmt.Errorf("store a checkpoint object: %w", err)
	}
	return h, nil
}

// readObject returns the content of the object h of type t.
func (s *Store) readObject(t plumbing.ObjectType, h plumbing.Hash) ([]byte, error) {
	raw, err := os.ReadFile(s.objectPath(h))
	if errors.Is(err, fs.ErrNotExist) {
		return s.readStored(t, h) // not loose: ask go-git
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint object %s: %w", h, err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("read checkpoint object %s: %w", h, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint object %s: %w", h, err)
	}
	nul := bytes.IndexByte(data, 0)
	if nul < 0 {
		return nil, fmt.Errorf("read checkpoint object %s: no header", h)
	}
	head, content := string(data[:nul]), data[nul+1:]
	want := t.String() + " " + strconv.Itoa(len(content))
	if head != want {
		return nil, fmt.Errorf("read checkpoint object %s: header %q, want %q", h, head, want)
	}
	return content, nil
}

func (s *Store) readStored(t plumbing.ObjectType, h plumbing.Hash) ([]byte, error) {
	obj, err := s.objs.EncodedObject(t, h)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint object %s: %w", h, err)
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint object %s: %w", h, err)
	}
	if int64(len(data)) != obj.Size() {
		return nil, fmt.Errorf("read checkpoint object %s: short read", h)
	}
	return data, nil
}

// maxCachedTrees bounds the decoded trees kept in memory.
const maxCachedTrees = 50_000

// loadTree returns the tree h, decoded once; the zero hash is the empty
// tree.
func (s *Store) loadTree(h plumbing.Hash) (*object.Tree, error) {
	if h.IsZero() {
		return &object.Tree{}, nil
	}
	if t, ok := s.treeCache[h]; ok {
		return t, nil
	}
	data, err := s.readObject(plumbing.TreeObject, h)
	if err != nil {
		return nil, err
	}
	obj := &plumbing.MemoryObject{}
	obj.SetType(plumbing.TreeObject)
	obj.Write(data)
	t, err := object.DecodeTree(s.objs, obj)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint tree %s: %w", h, err)
	}
	s.cacheTree(h, t)
	return t, nil
}

func (s *Store) cacheTree(h plumbing.Hash, t *object.Tree) {
	if s.treeCache == nil || len(s.treeCache) >= maxCachedTrees {
		s.treeCache = map[plumbing.Hash]*object.Tree{}
	}
	s.treeCache[h] = t
}
