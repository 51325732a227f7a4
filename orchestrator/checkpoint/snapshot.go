package checkpoint

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/tools"
)

// racyWindow is how close to the scan that recorded it a file's mtime may
// be and still be trusted: coarse kernel clocks stamp files in ticks of up
// to 10 ms, so a write in the same tick as the scan could keep the mtime.
const racyWindow = 20_000_000 // ns

// entry is what the index keeps of a file: its stat data when it was
// hashed, and the hash.
type entry struct {
	Mode         fs.FileMode
	Size         int64
	MTime, CTime int64
	Ino, Dev     uint64
	Hash         plumbing.Hash
	At           int64 // when the scan that hashed it started (ns)
}

func (e entry) matches(st tools.FileStat) bool {
	return e.Mode == st.Mode && e.Size == st.Size && e.MTime == st.MTime && e.CTime == st.CTime &&
		e.Ino == st.Ino && e.Dev == st.Dev && e.MTime+racyWindow < e.At
}

// index maps workspace paths to entries.
type index struct {
	Files map[string]entry
}

func readIndex(name string) *index {
	idx := &index{Files: map[string]entry{}}
	f, err := os.Open(name)
	if err != nil {
		return idx
	}
	defer f.Close()
	var got index
	if gob.NewDecoder(f).Decode(&got) == nil && got.Files != nil {
		return &got
	}
	return idx // a damaged index only costs hashing again
}

func (s *Store) saveIndex() error {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(s.index); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(s.dir, indexFile), buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("save the checkpoint index: %w", err)
	}
	s.dirty = 0
	return nil
}

// indexSaveEvery is how many changed index entries make a checkpoint save
// the index at once rather than at Close.
const indexSaveEvery = 2000

// Record takes a checkpoint of the workspace.
func (s *Store) Record(ctx context.Context, m Meta) (Checkpoint, error) {
	unlock, err := s.lock()
	if err != nil {
		return Checkpoint{}, err
	}
	defer unlock()
	return s.record(ctx, m)
}

func (s *Store) record(ctx context.Context, m Meta) (Checkpoint, error) {
	now := s.opts.Now()
	tree, skipped, err := s.snapshot(ctx)
	if err != nil {
		return Checkpoint{}, err
	}
	seq := 1
	if n := len(s.list); n > 0 {
		seq = s.list[n-1].Seq + 1
	}
	c := Checkpoint{
		Seq: seq, Session: m.Session, Turn: m.Turn, Kind: m.Kind, Time: now.UTC(), Tree: tree.String(),
		Tool: m.Tool, History: m.History, Prompt: m.Prompt, Skipped: skipped,
	}
	list := append(s.list[:len(s.list):len(s.list)], c)
	if m.Kind == KindTurn {
		if kept := s.prune(list, now); len(kept) < len(list) {
			list, s.pruned = kept, true
		}
	}
	if err := s.writeList(list); err != nil {
		return Checkpoint{}, err
	}
	s.list = list
	if s.dirty >= indexSaveEvery {
		if err := s.saveIndex(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// file is one recorded file of a snapshot.
type file struct {
	name string // base name
	mode filemode.FileMode
	hash plumbing.Hash
}

// snapshot stores what is not stored yet and returns the root tree.
func (s *Store) snapshot(ctx context.Context) (plumbing.Hash, map[string]SkippedFile, error) {
	at := s.opts.Now().UnixNano()
	dirs := map[string][]file{"": nil}
	var skipped map[string]SkippedFile
	seen := make(map[string]struct{}, len(s.index.Files))
	err := tools.WalkStat(ctx, s.root, tools.WalkOptions{DirLinks: true}, func(p string, st tools.FileStat) error {
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
		if fm != filemode.Symlink && st.Size > s.opts.MaxFileSize {
			if skipped == nil {
				skipped = map[string]SkippedFile{}
			}
			skipped[p] = SkippedFile{Size: st.Size, MTime: st.MTime}
			return nil
		}
		e, ok := s.index.Files[p]
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
		seen[p] = struct{}{}
		dir, name := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		dirs[dir] = append(dirs[dir], file{name: name, mode: fm, hash: e.Hash})
		return nil
	})
	if err != nil {
		return plumbing.ZeroHash, nil, fmt.Errorf("checkpoint the workspace: %w", err)
	}
	if len(seen) != len(s.index.Files) {
		for p := range s.index.Files {
			if _, ok := seen[p]; !ok {
				delete(s.index.Files, p)
				s.dirty++
			}
		}
	}
	h, err := s.writeTrees(dirs)
	return h, skipped, err
}

// storeFile stores the content of p (a symlink's target for a link) and
// returns its hash.
func (s *Store) storeFile(p string, fm filemode.FileMode) (plumbing.Hash, error) {
	var data []byte
	if fm == filemode.Symlink {
		target, err := s.root.Readlink(p)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		data = []byte(target)
	} else {
		f, err := confine.OpenRegular(s.root, p)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		data, err = io.ReadAll(io.LimitReader(f, s.opts.MaxFileSize+1))
		f.Close()
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read %s: %w", p, err)
		}
	}
	return s.storeBlob(data)
}

func (s *Store) storeBlob(data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(plumbing.BlobObject, data)
	if s.objs.HasEncodedObject(h) == nil {
		return h, nil
	}
	obj := s.objs.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return h, err
	}
	if _, err := w.Write(data); err != nil {
		return h, err
	}
	if err := w.Close(); err != nil {
		return h, err
	}
	if _, err := s.objs.SetEncodedObject(obj); err != nil {
		return h, fmt.Errorf("store a checkpoint object: %w", err)
	}
	return h, nil
}

// writeTrees stores a tree per directory, deepest first, and returns the
// root's.
func (s *Store) writeTrees(dirs map[string][]file) (plumbing.Hash, error) {
	// Every ancestor of a directory with files gets a tree.
	for d := range dirs {
		for d != "" {
			d = parentDir(d)
			if _, ok := dirs[d]; ok {
				break
			}
			dirs[d] = nil
		}
	}
	order := make([]string, 0, len(dirs))
	for d := range dirs {
		order = append(order, d)
	}
	depth := func(d string) int {
		if d == "" {
			return 0
		}
		return strings.Count(d, "/") + 1
	}
	sort.Slice(order, func(i, j int) bool { return depth(order[i]) > depth(order[j]) })
	for _, d := range order {
		files := dirs[d]
		t := object.Tree{Entries: make([]object.TreeEntry, len(files))}
		for i, f := range files {
			t.Entries[i] = object.TreeEntry{Name: f.name, Mode: f.mode, Hash: f.hash}
		}
		sort.Slice(t.Entries, func(i, j int) bool { return treeName(t.Entries[i]) < treeName(t.Entries[j]) })
		obj := s.objs.NewEncodedObject()
		if err := t.Encode(obj); err != nil {
			return plumbing.ZeroHash, err
		}
		h := obj.Hash()
		if !s.trees[h.String()] {
			if s.objs.HasEncodedObject(h) != nil {
				if _, err := s.objs.SetEncodedObject(obj); err != nil {
					return plumbing.ZeroHash, fmt.Errorf("store a checkpoint tree: %w", err)
				}
			}
			s.trees[h.String()] = true
		}
		if d == "" {
			return h, nil
		}
		parent := parentDir(d)
		dirs[parent] = append(dirs[parent], file{name: path.Base(d), mode: filemode.Dir, hash: h})
	}
	return plumbing.ZeroHash, errors.New("checkpoint: no root tree") // unreachable: "" is always in dirs
}

// treeName is the name git sorts a tree entry by: a directory's with a
// trailing slash.
func treeName(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

func parentDir(d string) string {
	if i := strings.LastIndexByte(d, '/'); i >= 0 {
		return d[:i]
	}
	return ""
}
