package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/gitshadow"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// boundary is the git boundary of one session (docs/decisions/0009): the
// shadow of the workspace's repository, kept in step around every command,
// and the scan that takes away from repositories the sandbox makes in the
// workspace what would let git on the host use them.
type boundary struct {
	ws   string
	root *os.Root
	// owned is the workspace the sandbox opened for itself (no Opened in
	// its Spec), closed with the boundary; nil when it is the run's.
	owned *workspace.Workspace
	// gate makes the boundary's own writes in the workspace (the symlinks
	// that take a repository the sandbox made out of reach): no symlink
	// followed, never into the user's repositories.
	gate    *hostwrite.Gate
	scanner *gitshadow.Scanner
	plan    gitPlan
	// journal holds the session markers and the protected list.
	journal journal
	// lockDir holds the repositories' import locks, in shiro's state on
	// the host (never mounted in a sandbox): every session importing
	// into one common git directory, from any shiro process, takes the
	// same lock.
	lockDir string

	mu     sync.Mutex
	syncer *gitshadow.Syncer // nil without a repository
	// notes are the scanner's notes of a scan that did not neutralize.
	notes []string
	// gitArgs starts the helper's git commands ("<helper> helper git").
	gitArgs []string
}

// newBoundary scans the workspace as the session opens, once the
// session lock is taken (a last session settling the container first
// finishes its final scan). What it finds is the user's (protected by
// read-only mounts from now on), unless the last session on this
// workspace ended without its final scan: then what was not the user's
// before (by identity) is the sandbox's, and is moved (pending). root is
// the workspace ws, open; the boundary reads it through root and does not
// close it.
func newBoundary(ctx context.Context, ws string, root *os.Root, stateDir string, noMount []string) (b *boundary, pending []gitshadow.Finding, err error) {
	nb := &boundary{ws: ws, root: root, journal: journal{dir: filepath.Join(stateDir, "workspaces", workspaceKey(ws))}, lockDir: filepath.Join(stateDir, "gitlocks")}
	if err := nb.journal.enter(ctx); err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			if nb.scanner != nil {
				nb.scanner.Close()
			}
			if nb.gate != nil {
				nb.gate.Close()
			}
			nb.journal.leave()
		}
	}()
	b = nb
	if b.gate, err = hostwrite.New(root, ws); err != nil {
		return nil, nil, err
	}
	b.scanner = gitshadow.NewScanner(ws, root, gitStore)
	repo, err := gitshadow.Discover(ws)
	if err != nil {
		return nil, nil, err
	}
	if repo != nil && filepath.Dir(repo.DotGit) == ws {
		b.scanner.Protect(".git")
	}
	found, err := b.scanner.Scan()
	if err != nil {
		return nil, nil, fmt.Errorf("scan the workspace for git repositories: %w", err)
	}
	users := found
	unclean, err := b.journal.unclean()
	if err != nil {
		return nil, nil, err
	}
	if unclean {
		protected, err := b.journal.protected()
		if err != nil {
			return nil, nil, err
		}
		users = nil
		for _, f := range found {
			if protected.has(f) {
				users = append(users, f)
			} else {
				pending = append(pending, f)
			}
		}
	}
	// What cannot be read is never the user's repository to protect: it
	// stays a finding, reported.
	users = slices.DeleteFunc(users, func(f gitshadow.Finding) bool { return f.Kind == gitshadow.KindUnreadable })
	b.plan, err = planGit(ws, users, noMount)
	if err != nil {
		return nil, nil, err
	}
	for _, ro := range b.plan.ReadOnly {
		if rel, err := filepath.Rel(ws, ro); err == nil {
			b.scanner.Protect(filepath.ToSlash(rel))
			_ = b.gate.Protect(ro) // gone meanwhile: nothing to protect
		}
	}
	b.scanner.Know(users)
	if err := b.journal.setProtected(users); err != nil {
		return nil, nil, err
	}
	return b, pending, nil
}

// connected sets the shadow up after a (re)connection: the container may
// be new, with an empty shadow.
func (b *boundary) connected(ctx context.Context, run gitshadow.Runner, helperPath string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gitArgs = []string{helperPath, "helper", "git"}
	if b.plan.Repo == nil {
		return nil
	}
	if b.syncer != nil {
		b.syncer.Close()
	}
	b.syncer = gitshadow.NewSyncer(b.plan.Repo, run, b.gitArgs, hostGitMount, b.lockDir)
	return b.syncer.Init(ctx)
}

// serveArgs are the helper's flags that make it report the shadow's
// fingerprint after each command.
func (b *boundary) serveArgs() []string {
	if b.plan.Repo == nil {
		return nil
	}
	lb, _ := json.Marshal(gitshadow.LayoutOf(b.plan.Repo))
	return []string{"--git-root", b.plan.Repo.CommonDir, "--git-layout", string(lb)}
}

// syncTimeout bounds the boundary's work after a command, which runs even
// when the command was interrupted.
const syncTimeout = 2 * time.Minute

// before brings the host's git changes into the shadow.
func (b *boundary) before(ctx context.Context, client *helper.Client) []string {
	b.mu.Lock()
	s := b.syncer
	b.mu.Unlock()
	if s == nil {
		return nil
	}
	n, err := s.Before(ctx, client.State())
	if err != nil && ctx.Err() == nil {
		n = append(n, fmt.Sprintf("git state not copied into the sandbox: %v", err))
	}
	return n
}

// after moves what makes new repositories repositories out of the
// workspace, then imports the shadow's changes.
func (b *boundary) after(ctx context.Context, run gitshadow.Runner, client *helper.Client) []string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncTimeout)
	defer cancel()
	notices := b.sweep(ctx, run)
	b.mu.Lock()
	s := b.syncer
	b.mu.Unlock()
	if s != nil {
		n, err := s.After(ctx, client.State())
		notices = append(notices, n...)
		if err != nil {
			notices = append(notices, fmt.Sprintf("git changes made in the sandbox were not copied to your repository: %v", err))
		}
	}
	return notices
}

// sweep scans the workspace and moves what it finds; run copies the found
// items into the sandbox's storage first (nil: they are only taken away).
func (b *boundary) sweep(ctx context.Context, run gitshadow.Runner) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	found, err := b.scanner.Scan()
	notices := b.scanner.TakeNotes()
	if err != nil {
		return append(notices, fmt.Sprintf("the workspace could not be checked for git repositories the sandbox made: %v", err))
	}
	return append(notices, b.neutralize(ctx, run, found)...)
}

// finish moves what the final scan found (run as in sweep) and returns
// the notices, the scan's own first.
func (b *boundary) finish(ctx context.Context, run gitshadow.Runner, found []gitshadow.Finding) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	notices := b.notes
	b.notes = nil
	return append(notices, b.neutralize(ctx, run, found)...)
}

// neutralize moves each finding to the sandbox's storage: the helper
// copies it there, then shiro replaces it in the workspace with a symlink
// to that copy, which leads nowhere on the host.
func (b *boundary) neutralize(ctx context.Context, run gitshadow.Runner, found []gitshadow.Finding) []string {
	var notices []string
	found = slices.DeleteFunc(slices.Clone(found), func(f gitshadow.Finding) bool {
		if f.Kind != gitshadow.KindUnreadable {
			return false
		}
		notices = append(notices, fmt.Sprintf("%s cannot be read, and shiro could not make it readable (it gives read access only to what is yours), so it cannot check it for git repositories the sandbox made; git on your machine cannot list it either, but do not run git inside it", displayDir(f.Repo)))
		return true
	})
	if len(found) == 0 {
		return notices
	}
	targets := make([]string, len(found))
	var args []string
	for i, f := range found {
		targets[i] = gitStore + "/" + randomSuffix() + randomSuffix()
		args = append(args, filepath.Join(b.ws, filepath.FromSlash(f.Path)), targets[i])
	}
	copied := false
	if run != nil {
		res, err := run.Run(ctx, sandbox.Command{Args: append(append(append([]string{}, b.gitArgs...), "keep"), args...)})
		copied = err == nil && res.ExitCode == 0
	}
	repos := map[string][]string{}
	for i, f := range found {
		if err := b.replace(f.Path, targets[i]); err != nil {
			notices = append(notices, fmt.Sprintf("%s makes %s a git repository and could not be moved out of your reach: %v; do not run git there until it is gone", f.Path, displayDir(f.Repo), err))
			continue
		}
		repos[f.Repo] = append(repos[f.Repo], f.Path)
	}
	for _, repo := range sortedKeys(repos) {
		msg := fmt.Sprintf("the sandbox made %s a git repository: %s now lives where only the sandbox sees it, so git on your machine does not treat %s as a repository and runs nothing from it",
			displayDir(repo), strings.Join(repos[repo], ", "), displayDir(repo))
		if copied {
			msg += "; in the sandbox it works as before"
		}
		notices = append(notices, msg)
	}
	return notices
}

// replace swaps the workspace entry rel for a symlink to target,
// atomically, through the boundary's gate: no symlink on the way is
// followed, whatever the sandbox did to the path meanwhile, and the user's
// repositories are never touched.
func (b *boundary) replace(rel, target string) error {
	return b.gate.ReplaceWithSymlink(rel, target)
}

// close releases the boundary, the session lock last.
func (b *boundary) close() {
	b.mu.Lock()
	if b.syncer != nil {
		b.syncer.Close()
	}
	b.mu.Unlock()
	b.scanner.Close()
	b.gate.Close()
	if b.owned != nil {
		b.owned.Close()
	}
	b.journal.leave()
}

func displayDir(rel string) string {
	if rel == "." {
		return "the workspace"
	}
	return rel + "/"
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// journal keeps, on the host, what tells a clean end of the last session
// from a crash: a marker per open session, removed after the session's
// final scan, and the identities of the repositories that were the
// user's. It also holds the workspace's session lock: shared by every open
// session (of any shiro process), exclusive while the last one settles the
// container, so that a session opening meanwhile waits for the final scan
// before its own first scan. It fails safe: a marker or list that cannot
// be written stops the session from opening, since a crash would then be
// taken for a clean end and what the sandbox made for the user's.
type journal struct {
	dir    string
	marker string
	lock   *os.File
}

// lockPoll is how often a session opening retries the lock a settling
// session holds.
const lockPoll = 10 * time.Millisecond

// enter takes the session lock, shared, waiting (until ctx ends) while
// another session settles the container.
func (j *journal) enter(ctx context.Context) error {
	if err := os.MkdirAll(j.dir, 0o700); err != nil {
		return fmt.Errorf("make the session directory %s: %w", j.dir, err)
	}
	f, err := os.OpenFile(filepath.Join(j.dir, "session.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open the session lock: %w", err)
	}
	for {
		err := flock(f, syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			j.lock = f
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("take the session lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("wait for the last session of this workspace to finish its final scan: %w", ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// last makes the lock exclusive when no other session holds it, and
// reports whether it did: this session is the workspace's last.
func (j *journal) last() bool {
	return j.lock != nil && flock(j.lock, syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// leave releases the session lock.
func (j *journal) leave() {
	if j.lock != nil {
		j.lock.Close()
		j.lock = nil
	}
}

// unclean reports (and clears) markers of sessions whose process is gone.
func (j *journal) unclean() (bool, error) {
	entries, err := os.ReadDir(j.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read the session markers: %w", err)
	}
	found := false
	for _, e := range entries {
		pidStr, ok := strings.CutPrefix(e.Name(), "open-")
		if !ok {
			continue
		}
		pidStr, _, _ = strings.Cut(pidStr, "-")
		pid, err := strconv.Atoi(pidStr)
		if err == nil && processAlive(pid) {
			continue
		}
		found = true
		if err := os.Remove(filepath.Join(j.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("clear a session marker: %w", err)
		}
	}
	return found, nil
}

// protectedEntry is one of the user's repositories as the journal keeps
// it: where it was, and what it is.
type protectedEntry struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev,omitempty"`
	Ino  uint64 `json:"ino,omitempty"`
}

// protectedSet is the user's repositories of the last session.
type protectedSet struct {
	keys  map[gitshadow.FileKey]bool
	paths map[string]bool // entries without an identity (older journals, other platforms)
}

// has reports whether f was one of them: by identity when f has one.
func (p protectedSet) has(f gitshadow.Finding) bool {
	if f.Key != (gitshadow.FileKey{}) {
		return p.keys[f.Key]
	}
	return p.paths[f.Path]
}

func (j *journal) protected() (protectedSet, error) {
	set := protectedSet{keys: map[gitshadow.FileKey]bool{}, paths: map[string]bool{}}
	b, err := os.ReadFile(filepath.Join(j.dir, "protected.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return set, nil
	}
	if err != nil {
		return set, fmt.Errorf("read the list of your repositories: %w", err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(b, &list); err != nil {
		return set, fmt.Errorf("read the list of your repositories: %w", err)
	}
	for _, raw := range list {
		var e protectedEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			if err := json.Unmarshal(raw, &e.Path); err != nil { // the older form: paths only
				return set, fmt.Errorf("read the list of your repositories: %w", err)
			}
		}
		if e.Ino != 0 {
			set.keys[gitshadow.FileKey{Dev: e.Dev, Ino: e.Ino}] = true
		} else {
			set.paths[e.Path] = true
		}
	}
	return set, nil
}

func (j *journal) setProtected(found []gitshadow.Finding) error {
	list := []protectedEntry{}
	for _, f := range found {
		list = append(list, protectedEntry{Path: f.Path, Dev: f.Key.Dev, Ino: f.Key.Ino})
	}
	b, _ := json.Marshal(list)
	if err := atomicfile.WriteFile(filepath.Join(j.dir, "protected.json"), b, 0o600); err != nil {
		return fmt.Errorf("record your repositories: %w", err)
	}
	return nil
}

// open marks a session as running.
func (j *journal) open() error {
	j.marker = filepath.Join(j.dir, fmt.Sprintf("open-%d-%s", os.Getpid(), randomSuffix()))
	f, err := os.OpenFile(j.marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		j.marker = ""
		return fmt.Errorf("mark the session as open: %w", err)
	}
	return f.Close()
}

// close marks the session's end, after its final scan.
func (j *journal) close() {
	if j.marker != "" {
		os.Remove(j.marker)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// flock applies the lock operation how to f, again when a signal
// interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
