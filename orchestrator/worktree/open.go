package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shiroagent/shiro/internal/flock"
	"github.com/shiroagent/shiro/sandbox/gitshadow"
)

// OpenOptions say which agent Open makes or reuses.
type OpenOptions struct {
	// Dir is the directory shiro was started in, inside the user's
	// checkout.
	Dir string
	// Name is the agent's name (CheckName); its branch is shiro/NAME.
	Name string
	// From is the commit a new agent's branch starts at (default HEAD).
	From string
	// DataDir is shiro's data directory; WorktreeDir, when set, the
	// configured folder of the worktrees (LayoutFor).
	DataDir, WorktreeDir string
}

// Validate says what is missing or wrong in o.
func (o OpenOptions) Validate() error {
	if o.Dir == "" || !filepath.IsAbs(o.Dir) {
		return fmt.Errorf("open worktree agent: the start directory %q is not an absolute path", o.Dir)
	}
	if o.DataDir == "" {
		return errors.New("open worktree agent: no data directory to keep worktrees in (set XDG_DATA_HOME or HOME)")
	}
	if o.WorktreeDir != "" && !filepath.IsAbs(o.WorktreeDir) {
		return fmt.Errorf("open worktree agent: the worktree folder %q is not an absolute path", o.WorktreeDir)
	}
	return CheckName(o.Name)
}

// Errors of finding the repository.
var (
	// ErrNoRepository: the start directory is in no git repository.
	ErrNoRepository = errors.New("not inside a git repository")
	// ErrBareRepository: the start directory is a bare repository, which
	// has no checkout to start a worktree from.
	ErrBareRepository = errors.New("a bare repository")
)

// Repository is the repository of the directory dir as Open sees it.
type Repository struct {
	// Top is the top of the checkout dir is in.
	Top string
	// CommonDir is the repository's common git directory, symlinks
	// resolved: the key of its agents and of its trust.
	CommonDir string
}

// FindRepository finds the repository dir is in, without running git.
func FindRepository(dir string) (Repository, error) {
	repo, err := gitshadow.Discover(filepath.Clean(dir))
	if err != nil {
		return Repository{}, err
	}
	if repo == nil {
		if isBare(dir) {
			return Repository{}, fmt.Errorf("%s is %w: --worktree starts from a checkout (run it in a clone that has a working tree)", dir, ErrBareRepository)
		}
		return Repository{}, fmt.Errorf("%s is %w: --worktree makes a worktree of the repository you start shiro in (cd into a checkout, or run `git init` and make a first commit)", dir, ErrNoRepository)
	}
	common, err := filepath.EvalSymlinks(repo.CommonDir)
	if err != nil {
		return Repository{}, fmt.Errorf("find the repository of %s: %w", dir, err)
	}
	return Repository{Top: repo.Top, CommonDir: common}, nil
}

// isBare reports whether dir or one of its ancestors looks like a bare
// repository (HEAD, objects and refs, and no .git).
func isBare(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		ok := true
		for _, name := range []string{"HEAD", "objects", "refs"} {
			if _, err := os.Lstat(filepath.Join(d, name)); err != nil {
				ok = false
			}
		}
		if ok {
			return true
		}
		if filepath.Dir(d) == d {
			return false
		}
	}
}

// Open makes the agent o.Name of the repository o.Dir is in, or reuses it:
// a linked worktree at Layout.Path on the branch shiro/NAME, made from
// o.From (default HEAD). The user's checkout, index and current branch do
// not change. When the record and the worktree exist, they are reused;
// when the branch exists without a worktree, the worktree is made on it.
// The record is saved before Open returns. Opens of one repository take
// turns (a lock in Layout.State), so two shiros cannot make one agent
// twice.
func Open(ctx context.Context, o OpenOptions) (*Agent, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	repo, err := FindRepository(o.Dir)
	if err != nil {
		return nil, err
	}
	l := LayoutFor(o.DataDir, o.WorktreeDir, repo.CommonDir)
	if within(l.Root, repo.Top) || within(repo.Top, l.Root) {
		return nil, fmt.Errorf("the worktree folder %s is inside the checkout %s (or holds it): a worktree agent works outside your checkout; set worktrees.dir in your config to a folder elsewhere", l.Root, repo.Top)
	}
	unlock, err := flock.Lock(ctx, filepath.Join(l.State, ".open.lock"))
	if err != nil {
		return nil, fmt.Errorf("open worktree agent %s: %w", o.Name, err)
	}
	defer unlock()

	path, branch := l.Path(o.Name), Branch(o.Name)
	var from string // the commit o.From names
	if o.From != "" {
		if from, err = commitOf(ctx, repo.Top, o.From); err != nil {
			return nil, err
		}
	}
	rec, err := l.Load(o.Name)
	switch {
	case err == nil:
		if worktreeOf(path, repo.CommonDir) {
			if from != "" && from != rec.Base {
				return nil, fmt.Errorf("the worktree agent %s exists already, made from %s: --from %s applies only to a new agent (leave it out to continue %s, or pick another name)", o.Name, short(rec.Base), o.From, o.Name)
			}
			return rec, nil
		}
	case !errors.Is(err, ErrNoAgent):
		return nil, err
	}
	if _, err := os.Lstat(path); err == nil {
		if !worktreeOf(path, repo.CommonDir) {
			return nil, fmt.Errorf("%s exists and is not a worktree of %s: move it away, or pick another name than %s", path, repo.Top, o.Name)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open worktree agent %s: %w", o.Name, err)
	} else if err := add(ctx, repo.Top, path, branch, from, o); err != nil {
		return nil, err
	}
	base, err := commitOf(ctx, path, "HEAD")
	if err != nil {
		return nil, err
	}
	a := &Agent{Name: o.Name, Branch: branch, Path: path, Checkout: repo.Top, CommonDir: repo.CommonDir, Base: base, Created: time.Now().UTC()}
	if rec != nil && rec.Branch == branch {
		a.Created = rec.Created
	}
	if err := l.Save(a); err != nil {
		return nil, fmt.Errorf("save the record of worktree agent %s: %w", o.Name, err)
	}
	return a, nil
}

// add makes the worktree path: on branch when it exists, else on a new
// branch from from (or HEAD). git runs in the checkout's top with hooks
// and the fsmonitor off (Git).
func add(ctx context.Context, top, path, branch, from string, o OpenOptions) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("make the folder of worktree agent %s: %w", o.Name, err)
	}
	// A worktree git still lists but whose directory is gone (removed by
	// hand) keeps its branch checked out; -f lets the new one take it.
	args := []string{"worktree", "add", "-f", "--quiet"}
	if tip, err := Git(ctx, top, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err == nil && tip != "" {
		if from != "" && from != tip {
			return fmt.Errorf("the branch %s exists already at %s: --from %s applies only to a new agent (leave it out to continue on %s, or pick another name)", branch, short(tip), o.From, branch)
		}
		args = append(args, "--end-of-options", path, branch)
	} else {
		if from == "" {
			head, err := commitOf(ctx, top, "HEAD")
			if err != nil {
				return fmt.Errorf("%s has no commit to start a worktree from: make a first commit, or name one with --from", top)
			}
			from = head
		}
		args = append(args, "-b", branch, "--end-of-options", path, from)
	}
	if _, err := Git(ctx, top, args...); err != nil {
		return fmt.Errorf("make the worktree of agent %s: %w", o.Name, err)
	}
	return nil
}

// commitOf is the commit ref names in the repository of dir.
func commitOf(ctx context.Context, dir, ref string) (string, error) {
	id, err := Git(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil || id == "" {
		return "", fmt.Errorf("%q names no commit of the repository at %s: give a branch, tag or commit id", ref, dir)
	}
	return id, nil
}

// worktreeOf reports whether path is a linked worktree of the repository
// whose common git directory is commonDir (judged as the sandbox's git
// boundary judges it, without running git).
func worktreeOf(path, commonDir string) bool {
	r, err := gitshadow.Discover(path)
	if err != nil || r == nil || r.Top != path || r.Worktree == "" {
		return false
	}
	c, err := filepath.EvalSymlinks(r.CommonDir)
	return err == nil && c == commonDir
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Find is the existing agent o.Name of the repository o.Dir is in (o.From
// is not used): its record, when its worktree is still there. It runs no
// git and makes nothing.
func Find(o OpenOptions) (*Agent, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	repo, err := FindRepository(o.Dir)
	if err != nil {
		return nil, err
	}
	a, err := LayoutFor(o.DataDir, o.WorktreeDir, repo.CommonDir).Load(o.Name)
	if err != nil {
		return nil, fmt.Errorf("%w of the repository at %s (shiro --worktree %s makes it)", err, repo.Top, o.Name)
	}
	if !worktreeOf(a.Path, repo.CommonDir) {
		return nil, fmt.Errorf("the worktree of agent %s (%s) is gone: shiro --worktree %s makes it again on its branch", o.Name, a.Path, o.Name)
	}
	return a, nil
}

// AgentAt is the agent whose worktree dir is (or is in), found by its
// place in the layout of dir's repository; nil without an error when dir
// is in no agent's worktree.
func AgentAt(dataDir, worktreeDir, dir string) (*Agent, error) {
	repo, err := FindRepository(dir)
	if err != nil {
		return nil, nil // not in a repository: in no agent's worktree
	}
	l := LayoutFor(dataDir, worktreeDir, repo.CommonDir)
	rel, err := filepath.Rel(l.Root, repo.Top)
	if err != nil || CheckName(rel) != nil {
		return nil, nil
	}
	a, err := l.Load(rel)
	if errors.Is(err, ErrNoAgent) {
		return nil, nil
	}
	if err != nil || a.Path != repo.Top {
		return nil, err
	}
	return a, nil
}
