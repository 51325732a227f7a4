package checkpoint

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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

// indexSaveEvery is how many changed index entries make a checkpoint
// between turns (KindTurn, KindEnd) save the index at once rather than at
// Close; a tool call's or an undo's checkpoint leaves it for later.
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
	if s.dirty >= indexSaveEvery && (m.Kind == KindTurn || m.Kind == KindEnd) {
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
	return s.writeObject(plumbing.BlobObject, data)
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
