package trust

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/shiroagent/shiro/internal/atomicfile"
)

// Entry is a remembered decision: the workspace trusted for these asks.
type Entry struct {
	// Workspace is where the decision was taken (Identity).
	Workspace string `json:"workspace"`
	// Repository, for a workspace in a git repository, is the key the
	// decision holds for (RepositoryKey): every worktree of the repository
	// at the same place shares it. Decisions from before it was kept have
	// none and hold for Workspace only.
	Repository string    `json:"repository,omitempty"`
	Hash       string    `json:"hash"`
	Asks       []Ask     `json:"asks"`
	At         time.Time `json:"at"`
}

// Store keeps the decisions in one JSON file.
type Store struct {
	// File is the file (FileName in the user's data directory).
	File string
}

// FileName is the store's file in the data directory.
const FileName = "trust.json"

// NewStore is the store in dataDir.
func NewStore(dataDir string) *Store { return &Store{File: filepath.Join(dataDir, FileName)} }

type storeFile struct {
	Workspaces []Entry `json:"workspaces"`
}

func (s *Store) read() (storeFile, error) {
	var f storeFile
	data, err := os.ReadFile(s.File)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("read the trust decisions: %w", err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("read the trust decisions %s: %w", s.File, err)
	}
	return f, nil
}

func (s *Store) write(f storeFile) error {
	slices.SortFunc(f.Workspaces, func(a, b Entry) int { return strings.Compare(a.Workspace, b.Workspace) })
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.File), 0o700); err != nil {
		return fmt.Errorf("save the trust decision: %w", err)
	}
	if err := atomicfile.WriteFile(s.File, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save the trust decision: %w", err)
	}
	return nil
}

// Get returns the decision remembered for the workspace: the one of its
// repository (any worktree of it, at the same place), else one taken for
// its path before repositories were keyed.
func (s *Store) Get(ws string) (Entry, bool, error) {
	f, err := s.read()
	if err != nil {
		return Entry{}, false, err
	}
	id, repo := Identity(ws), RepositoryKey(ws)
	if repo != "" {
		for _, e := range f.Workspaces {
			if e.Repository == repo {
				return e, true, nil
			}
		}
	}
	for _, e := range f.Workspaces {
		if e.Workspace == id && (e.Repository == "" || e.Repository == repo) {
			return e, true, nil
		}
	}
	return Entry{}, false, nil
}

// mine reports whether e is a decision for the workspace whose identity
// is id and repository key repo.
func mine(e Entry, id, repo string) bool {
	return e.Workspace == id && (e.Repository == "" || e.Repository == repo) || repo != "" && e.Repository == repo
}

// Remember trusts the workspace (and, in a repository, every worktree of
// it at the same place) for these asks, replacing an earlier decision.
func (s *Store) Remember(ws string, asks []Ask) error {
	f, err := s.read()
	if err != nil {
		return err
	}
	id, repo := Identity(ws), RepositoryKey(ws)
	f.Workspaces = slices.DeleteFunc(f.Workspaces, func(e Entry) bool { return mine(e, id, repo) })
	f.Workspaces = append(f.Workspaces, Entry{Workspace: id, Repository: repo, Hash: Hash(asks), Asks: asks, At: time.Now().UTC().Truncate(time.Second)})
	return s.write(f)
}

// Revoke forgets the workspace's decision (its repository's, in a
// repository); it reports whether there was one.
func (s *Store) Revoke(ws string) (bool, error) {
	f, err := s.read()
	if err != nil {
		return false, err
	}
	id, repo := Identity(ws), RepositoryKey(ws)
	n := len(f.Workspaces)
	f.Workspaces = slices.DeleteFunc(f.Workspaces, func(e Entry) bool { return mine(e, id, repo) || e.Workspace == ws })
	if len(f.Workspaces) == n {
		return false, nil
	}
	return true, s.write(f)
}

// List returns every remembered decision, by workspace.
func (s *Store) List() ([]Entry, error) {
	f, err := s.read()
	return f.Workspaces, err
}

// State is the workspace's trust for its current asks.
type State struct {
	Asks []Ask
	// Trusted says the asks may happen; By says why: "--trust-project",
	// "trust.paths" or "remembered".
	Trusted bool
	By      string
	// Before is the decision remembered for other asks (Known set), and
	// Change how the asks differ from it.
	Known  bool
	Before Entry
	Change Change
}

// Check decides the workspace's trust: flag (--trust-project), a
// trust.paths pattern, or a remembered decision for the same asks.
func Check(s *Store, ws string, asks []Ask, flag bool, patterns []string, home string) (State, error) {
	st := State{Asks: asks}
	if len(asks) == 0 {
		st.Trusted, st.By = true, "nothing asked"
		return st, nil
	}
	if flag {
		st.Trusted, st.By = true, "--trust-project"
		return st, nil
	}
	if MatchPaths(ws, patterns, home) {
		st.Trusted, st.By = true, "trust.paths"
		return st, nil
	}
	if s == nil {
		return st, nil
	}
	e, ok, err := s.Get(ws)
	if err != nil || !ok {
		return st, err
	}
	if e.Covers(asks) {
		st.Trusted, st.By = true, "remembered"
		return st, nil
	}
	st.Known, st.Before, st.Change = true, e, Diff(e.Asks, asks)
	return st, nil
}

// mainCheckoutPlace is, for a workspace in a worktree of a repository
// whose common directory is a checkout's .git, the same place in that
// checkout ("" otherwise): trust.paths naming the checkout cover its
// worktrees.
func mainCheckoutPlace(ws string) string {
	key := RepositoryKey(ws)
	common, rel, _ := strings.Cut(key, "//")
	if common == "" || filepath.Base(common) != ".git" {
		return ""
	}
	return filepath.Join(filepath.Dir(common), filepath.FromSlash(rel))
}

// MatchPaths reports whether the workspace is one of the paths or glob
// patterns (doublestar: * within a directory, ** across; ~/ is the home
// directory). A pattern matches the workspace itself, not its parent: a
// directory and everything under it is "dir" and "dir/**". A worktree of
// a checkout's repository is matched as the same place in the checkout.
func MatchPaths(ws string, patterns []string, home string) bool {
	cands := []string{filepath.Clean(ws), Identity(ws)}
	if c := mainCheckoutPlace(ws); c != "" {
		cands = append(cands, c)
	}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
			p = filepath.Join(home, rest)
		}
		if !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		for _, c := range cands {
			if ok, err := doublestar.Match(filepath.ToSlash(p), filepath.ToSlash(c)); err == nil && ok {
				return true
			}
		}
	}
	return false
}
