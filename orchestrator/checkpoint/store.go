// Package checkpoint records the state of a workspace before each turn and
// each mutating tool call, and puts it back: /undo, /diff and `shiro undo`.
//
// A store lives in the user's data directory, one per workspace, never in
// the repository: git objects (content-addressed, deduplicated, through
// go-git's object storage; no git program and nothing of the repository
// runs), a list of checkpoints and a stat index. A checkpoint holds every
// file the walker lists (tracked and untracked, not ignored; .git and
// node_modules never) with its content, mode and symlink target; files over
// MaxFileSize are named but not recorded. Unchanged files are recognised by
// size, mtime, ctime and inode, as git's index does, so the first
// checkpoint of a process costs a walk plus the files that changed; after
// it, inotify events (Linux) name the files and directories to read again,
// and trees are kept per directory, so a checkpoint costs what changed.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/internal/hostwrite"
)

// Defaults of a store.
const (
	DefaultMaxFileSize = 10 << 20
	DefaultKeepTurns   = 50
	DefaultKeepAge     = 7 * 24 * time.Hour
)

// Kind says when a checkpoint was taken.
type Kind string

const (
	// KindTurn is taken before a turn.
	KindTurn Kind = "turn"
	// KindCall is taken before an approved mutating tool call.
	KindCall Kind = "call"
	// KindEnd is taken when a turn ends: what the turn left.
	KindEnd Kind = "end"
	// KindUndo is taken before an undo puts files back, so the undo can be
	// undone in turn.
	KindUndo Kind = "undo"
)

// Checkpoint is one recorded state of the workspace.
type Checkpoint struct {
	Seq     int       `json:"seq"`
	Session string    `json:"session"`
	Turn    int       `json:"turn"`
	Kind    Kind      `json:"kind"`
	Time    time.Time `json:"time"`
	Tree    string    `json:"tree"`
	// Tool is the tool of a KindCall checkpoint.
	Tool string `json:"tool,omitempty"`
	// History is the number of messages in the conversation before the
	// turn (KindTurn), and Prompt the start of the turn's prompt.
	History int    `json:"history,omitempty"`
	Prompt  string `json:"prompt,omitempty"`
	// Skipped are the files left out for their size, with their stat data.
	Skipped map[string]SkippedFile `json:"skipped,omitempty"`
}

// SkippedFile is a file too large to record.
type SkippedFile struct {
	Size  int64 `json:"size"`
	MTime int64 `json:"mtime"`
}

// Meta is what the caller says about a checkpoint.
type Meta struct {
	Session string
	Turn    int
	Kind    Kind
	Tool    string
	History int
	Prompt  string
}

// Options tune a store; zero values take the defaults.
type Options struct {
	MaxFileSize int64
	KeepTurns   int
	KeepAge     time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// Store is the checkpoint store of one workspace. Its methods may be
// called from several goroutines; they take turns.
type Store struct {
	dir  string
	root *os.Root
	gate *hostwrite.Gate // every write into the workspace
	opts Options
	objs *filesystem.Storage

	mu    sync.Mutex
	list  []Checkpoint
	index *index
	trees map[plumbing.Hash]bool // tree hashes known to be stored
	// treeCache holds decoded trees by hash.
	treeCache map[plumbing.Hash]*object.Tree
	dirty     int        // index entries changed since it was saved
	pruned    bool       // checkpoints were dropped: sweep at Close
	scan      *scanState // the workspace as this process last scanned it
	batch     *[]toHash  // during a walk: the files to read after it
	// noEvents makes every scan a full one (tests).
	noEvents bool
	// afterTemps, when set (tests), runs in a restore once the new
	// contents are beside their files and before anything is removed or
	// renamed.
	afterTemps func()
	// keepOpen, when not 0, replaces maxHeld (-1: none; tests).
	keepOpen int
}

var (
	// ErrNoCheckpoint is the error of a lookup that finds nothing.
	ErrNoCheckpoint = errors.New("no checkpoint")
)

const (
	listFile  = "checkpoints.json"
	indexFile = "index"
	lockFile  = "lock"
)

// Open opens (creating it) the store in dir for the workspace root, which
// it reads; it writes the workspace (undo, apply) only through gate, the
// workspace's write gate.
func Open(dir string, root *os.Root, gate *hostwrite.Gate, opts Options) (*Store, error) {
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = DefaultMaxFileSize
	}
	if opts.KeepTurns <= 0 {
		opts.KeepTurns = DefaultKeepTurns
	}
	if opts.KeepAge <= 0 {
		opts.KeepAge = DefaultKeepAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(filepath.Join(dir, "objects"), 0o700); err != nil {
		return nil, fmt.Errorf("open the checkpoint store: %w", err)
	}
	s := &Store{
		dir:   dir,
		root:  root,
		gate:  gate,
		opts:  opts,
		objs:  filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(8<<20), filesystem.Options{ExclusiveAccess: false}),
		trees: map[plumbing.Hash]bool{},
	}
	var err error
	if s.list, err = s.readList(); err != nil {
		return nil, err
	}
	s.index = readIndex(filepath.Join(dir, indexFile))
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close saves the stat index and, when checkpoints were pruned, deletes
// the objects no checkpoint needs any more.
func (s *Store) Close() error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	if s.dirty > 0 {
		errs = append(errs, s.saveIndex())
	}
	if s.pruned {
		errs = append(errs, s.sweep())
		s.pruned = false
	}
	s.dropScan()
	return errors.Join(append(errs, s.objs.Close())...)
}

func (s *Store) readList() ([]Checkpoint, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, listFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the checkpoint list: %w", err)
	}
	var list []Checkpoint
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("read the checkpoint list %s: %w", filepath.Join(s.dir, listFile), err)
	}
	return list, nil
}

func (s *Store) writeList(list []Checkpoint) error {
	data, err := json.Marshal(list)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(s.dir, listFile), data, 0o600); err != nil {
		return fmt.Errorf("write the checkpoint list: %w", err)
	}
	return nil
}

// List returns the checkpoints, oldest first; session "" means all.
func (s *Store) List(session string) ([]Checkpoint, error) {
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []Checkpoint
	for _, c := range s.list {
		if session == "" || c.Session == session {
			out = append(out, c)
		}
	}
	return out, nil
}

// lock takes the store's lock (the mutex, and a lock file other shiro
// processes on the same workspace respect) and reloads the list another
// process may have changed.
func (s *Store) lock() (func(), error) {
	s.mu.Lock()
	unlockFile, err := lockPath(filepath.Join(s.dir, lockFile))
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("lock the checkpoint store: %w", err)
	}
	list, err := s.readList()
	if err != nil {
		unlockFile()
		s.mu.Unlock()
		return nil, err
	}
	s.list = list
	return func() { unlockFile(); s.mu.Unlock() }, nil
}

// Turns lists the session's turns that have a KindTurn checkpoint, oldest
// first.
func Turns(list []Checkpoint, session string) []Checkpoint {
	var out []Checkpoint
	for _, c := range list {
		if c.Session == session && c.Kind == KindTurn {
			out = append(out, c)
		}
	}
	return out
}

// Turn returns the checkpoints of one turn of a session: its KindTurn
// checkpoint first, then the calls, then KindEnd when the turn ended.
func Turn(list []Checkpoint, session string, turn int) []Checkpoint {
	var out []Checkpoint
	for _, c := range list {
		if c.Session == session && c.Turn == turn && c.Kind != KindUndo {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b Checkpoint) int { return a.Seq - b.Seq })
	return out
}

// Size is the number of bytes the stores under dir take (shiro doctor).
func Size(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

// Forget drops the checkpoints of the session's turns from turn on (they
// were undone), but not the KindUndo checkpoints taken before the undo.
func (s *Store) Forget(session string, turn int) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	kept := make([]Checkpoint, 0, len(s.list))
	for _, c := range s.list {
		if c.Session == session && c.Turn >= turn && c.Kind != KindUndo {
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) == len(s.list) {
		return nil
	}
	if err := s.writeList(kept); err != nil {
		return err
	}
	s.list = kept
	return nil
}
