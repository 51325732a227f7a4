package checkpoint

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Action is what happened to a file between two states.
type Action string

const (
	Created  Action = "created"
	Deleted  Action = "deleted"
	Modified Action = "modified"
)

// FileChange is one file that differs between two states.
type FileChange struct {
	Path   string `json:"path"`
	Action Action `json:"action"`
	// OldMode and NewMode: 0o644, 0o755 or fs.ModeSymlink; 0 when absent.
	OldMode fs.FileMode `json:"oldMode,omitempty"`
	NewMode fs.FileMode `json:"newMode,omitempty"`
	// Tools name the tool calls of the turn that changed the file (a file
	// tool, or bash for a command); empty when the turn's checkpoints do
	// not tell.
	Tools []string `json:"tools,omitempty"`

	oldHash, newHash plumbing.Hash
	oldFM, newFM     filemode.FileMode
}

func fsMode(m filemode.FileMode) fs.FileMode {
	switch m {
	case filemode.Executable:
		return 0o755
	case filemode.Symlink:
		return fs.ModeSymlink
	case filemode.Regular, filemode.Deprecated:
		return 0o644
	}
	return 0
}

func (s *Store) tree(h string) (*object.Tree, error) {
	if h == "" {
		return &object.Tree{}, nil
	}
	return s.loadTree(plumbing.NewHash(h))
}

// changes lists the files that differ between trees a and b, by path.
func (s *Store) changes(ctx context.Context, a, b string) ([]FileChange, error) {
	if a == b {
		return nil, nil
	}
	var out []FileChange
	ha, hb := plumbing.ZeroHash, plumbing.ZeroHash
	if a != "" {
		ha = plumbing.NewHash(a)
	}
	if b != "" {
		hb = plumbing.NewHash(b)
	}
	if err := s.diffTrees(ctx, ha, hb, "", &out); err != nil {
		return nil, fmt.Errorf("compare checkpoints: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// diffTrees appends the files that differ between the trees a and b (the
// zero hash for none) below prefix. Subtrees with the same hash are not
// read.
func (s *Store) diffTrees(ctx context.Context, a, b plumbing.Hash, prefix string, out *[]FileChange) error {
	if a == b {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ta, err := s.loadTree(a)
	if err != nil {
		return err
	}
	tb, err := s.loadTree(b)
	if err != nil {
		return err
	}
	ea, eb := ta.Entries, tb.Entries
	for len(ea) > 0 || len(eb) > 0 {
		var x, y *object.TreeEntry
		switch {
		case len(eb) == 0:
			x, ea = &ea[0], ea[1:]
		case len(ea) == 0:
			y, eb = &eb[0], eb[1:]
		default:
			switch c := strings.Compare(treeName(ea[0]), treeName(eb[0])); {
			case c < 0:
				x, ea = &ea[0], ea[1:]
			case c > 0:
				y, eb = &eb[0], eb[1:]
			default:
				x, y, ea, eb = &ea[0], &eb[0], ea[1:], eb[1:]
			}
		}
		var p string
		if x != nil {
			p = joinPath(prefix, x.Name)
		} else {
			p = joinPath(prefix, y.Name)
		}
		switch {
		case x != nil && x.Mode == filemode.Dir, y != nil && y.Mode == filemode.Dir:
			ha, hb := plumbing.ZeroHash, plumbing.ZeroHash
			if x != nil {
				ha = x.Hash
			}
			if y != nil {
				hb = y.Hash
			}
			if err := s.diffTrees(ctx, ha, hb, p, out); err != nil {
				return err
			}
		case x == nil:
			*out = append(*out, change(p, Created, object.TreeEntry{}, *y))
		case y == nil:
			*out = append(*out, change(p, Deleted, *x, object.TreeEntry{}))
		case x.Hash != y.Hash || x.Mode != y.Mode:
			*out = append(*out, change(p, Modified, *x, *y))
		}
	}
	return nil
}

func change(p string, a Action, from, to object.TreeEntry) FileChange {
	fc := FileChange{Path: p, Action: a, oldHash: from.Hash, newHash: to.Hash, oldFM: from.Mode, newFM: to.Mode}
	fc.OldMode, fc.NewMode = fsMode(fc.oldFM), fsMode(fc.newFM)
	return fc
}

// Changes lists the files that differ from checkpoint a to checkpoint b.
func (s *Store) Changes(ctx context.Context, a, b Checkpoint) ([]FileChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changes(ctx, a.Tree, b.Tree)
}

// State is the workspace as it is now: a tree in the store, without a
// checkpoint in the list.
type State struct {
	Tree    string
	Skipped map[string]SkippedFile
}

// Current snapshots the workspace without adding a checkpoint (/diff).
func (s *Store) Current(ctx context.Context) (State, error) {
	unlock, err := s.lock()
	if err != nil {
		return State{}, err
	}
	defer unlock()
	h, skipped, err := s.snapshot(ctx)
	if err != nil {
		return State{}, err
	}
	return State{Tree: h.String(), Skipped: skipped}, nil
}

// Since lists the files that differ from checkpoint c to the state now.
func (s *Store) Since(ctx context.Context, c Checkpoint, now State) ([]FileChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changes(ctx, c.Tree, now.Tree)
}

// Attribute fills the Tools of each change with the tool calls of the
// turn whose interval changed the file: the changes between a KindCall
// checkpoint and the next checkpoint of the turn are that call's.
func (s *Store) Attribute(ctx context.Context, turn []Checkpoint, changes []FileChange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	by := map[string]int{}
	for i, c := range changes {
		by[c.Path] = i
	}
	for i := 0; i+1 < len(turn); i++ {
		if turn[i].Kind != KindCall {
			continue
		}
		chs, err := s.changes(ctx, turn[i].Tree, turn[i+1].Tree)
		if err != nil {
			return
		}
		for _, ch := range chs {
			if j, ok := by[ch.Path]; ok && !contains(changes[j].Tools, turn[i].Tool) {
				changes[j].Tools = append(changes[j].Tools, turn[i].Tool)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// maxPatch bounds one file's patch text.
const maxPatch = 64 << 10

// Patch is the unified diff of one change (git's format, without the
// "diff --git" header's index line); "Binary files differ" for binary
// content, a note for a symlink.
func (s *Store) Patch(ctx context.Context, c FileChange) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	from, err := s.blobText(c.oldHash, c.oldFM)
	if err != nil {
		return "", err
	}
	to, err := s.blobText(c.newHash, c.newFM)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if c.OldMode != c.NewMode && c.Action == Modified {
		fmt.Fprintf(&b, "mode %s -> %s\n", modeText(c.OldMode), modeText(c.NewMode))
	}
	switch {
	case from.binary || to.binary:
		if c.oldHash != c.newHash {
			b.WriteString("Binary files differ\n")
		}
	case c.oldHash != c.newHash:
		b.WriteString(unified(c.Path, c.Action, from.text, to.text))
	}
	out := b.String()
	if len(out) > maxPatch {
		out = out[:maxPatch] + "\n... [diff truncated]\n"
	}
	return out, nil
}

func modeText(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&0o111 != 0:
		return "executable"
	}
	return "regular"
}

type blobContent struct {
	text   string
	binary bool
}

func (s *Store) blobText(h plumbing.Hash, fm filemode.FileMode) (blobContent, error) {
	if h.IsZero() {
		return blobContent{}, nil
	}
	data, err := s.readBlob(h)
	if err != nil {
		return blobContent{}, err
	}
	if fm == filemode.Symlink {
		return blobContent{text: "-> " + string(data) + "\n"}, nil
	}
	head := data
	if len(head) > 8000 {
		head = head[:8000]
	}
	for _, c := range head {
		if c == 0 {
			return blobContent{binary: true}, nil
		}
	}
	return blobContent{text: string(data)}, nil
}

func (s *Store) readBlob(h plumbing.Hash) ([]byte, error) {
	return s.readObject(plumbing.BlobObject, h)
}

// Reverse is the same change seen the other way round (the turn's change
// from an undo's).
func (c FileChange) Reverse() FileChange {
	r := c
	r.OldMode, r.NewMode = c.NewMode, c.OldMode
	r.oldHash, r.newHash = c.newHash, c.oldHash
	r.oldFM, r.newFM = c.newFM, c.oldFM
	switch c.Action {
	case Created:
		r.Action = Deleted
	case Deleted:
		r.Action = Created
	}
	return r
}
