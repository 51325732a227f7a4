package checkpoint

import (
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// prune keeps the checkpoints of the last KeepTurns turns that are younger
// than KeepAge.
func (s *Store) prune(list []Checkpoint, now time.Time) []Checkpoint {
	type key struct {
		session string
		turn    int
	}
	rank := map[key]int{}
	n := 0
	for i := len(list) - 1; i >= 0; i-- {
		k := key{list[i].Session, list[i].Turn}
		if _, ok := rank[k]; !ok {
			rank[k] = n
			n++
		}
	}
	out := make([]Checkpoint, 0, len(list))
	for _, c := range list {
		if rank[key{c.Session, c.Turn}] < s.opts.KeepTurns && now.Sub(c.Time) <= s.opts.KeepAge {
			out = append(out, c)
		}
	}
	return out
}

// sweepGrace spares objects younger than this: another process may have
// just written them for a checkpoint not in the list yet.
const sweepGrace = time.Hour

// sweep deletes the stored objects no kept checkpoint and no index entry
// names.
func (s *Store) sweep() error {
	live := map[plumbing.Hash]bool{}
	for _, e := range s.index.Files {
		live[e.Hash] = true
	}
	var mark func(h plumbing.Hash) error
	mark = func(h plumbing.Hash) error {
		if live[h] {
			return nil
		}
		live[h] = true
		t, err := s.loadTree(h)
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			if e.Mode == filemode.Dir {
				if err := mark(e.Hash); err != nil {
					return err
				}
			} else {
				live[e.Hash] = true
			}
		}
		return nil
	}
	for _, c := range s.list {
		if h := plumbing.NewHash(c.Tree); !h.IsZero() {
			if err := mark(h); err != nil {
				return err // a damaged store: delete nothing
			}
		}
	}
	objects := filepath.Join(s.dir, "objects")
	fans, err := os.ReadDir(objects)
	if err != nil {
		return err
	}
	cutoff := s.opts.Now().Add(-sweepGrace)
	for _, fan := range fans {
		if !fan.IsDir() || len(fan.Name()) != 2 {
			continue
		}
		dir := filepath.Join(objects, fan.Name())
		names, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, n := range names {
			h := plumbing.NewHash(fan.Name() + n.Name())
			if live[h] || len(n.Name()) != 38 {
				continue
			}
			if fi, err := n.Info(); err != nil || fi.ModTime().After(cutoff) {
				continue
			}
			_ = os.Remove(filepath.Join(dir, n.Name()))
			delete(s.trees, h)
			delete(s.treeCache, h)
		}
	}
	return nil
}
