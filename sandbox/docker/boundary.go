package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/gitshadow"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// boundary is the git boundary of one session (docs/decisions/0009): the
// shadow of the workspace's repository, kept in step around every command,
// and the scan that takes away from repositories the sandbox makes in the
// workspace what would let git on the host use them.
type boundary struct {
	ws      string
	root    *os.Root
	scanner *gitshadow.Scanner
	plan    gitPlan
	// journal holds the session markers and the protected list.
	journal journal

	mu     sync.Mutex
	syncer *gitshadow.Syncer // nil without a repository
	// gitArgs starts the helper's git commands ("<helper> helper git").
	gitArgs []string
}

// newBoundary scans the workspace as the session opens. What it finds is
// the user's (protected by read-only mounts from now on), unless the last
// session on this workspace ended without its final scan: then what was
// not protected before is the sandbox's, and is moved (pending).
func newBoundary(ws string, stateDir string, noMount []string) (b *boundary, pending []gitshadow.Finding, err error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, nil, fmt.Errorf("open the workspace: %w", err)
	}
	defer func() {
		if err != nil {
			root.Close()
		}
	}()
	b = &boundary{ws: ws, root: root, journal: journal{dir: filepath.Join(stateDir, "workspaces", workspaceKey(ws))}}
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
	if b.journal.unclean() {
		protected := b.journal.protected()
		users = nil
		for _, f := range found {
			if protected[f.Path] {
				users = append(users, f)
			} else {
				pending = append(pending, f)
			}
		}
	}
	b.plan, err = planGit(ws, users, noMount)
	if err != nil {
		return nil, nil, err
	}
	for _, ro := range b.plan.ReadOnly {
		if rel, err := filepath.Rel(ws, ro); err == nil {
			b.scanner.Protect(filepath.ToSlash(rel))
		}
	}
	b.scanner.Know(users)
	b.journal.setProtected(users)
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
	b.syncer = gitshadow.NewSyncer(b.plan.Repo, run, b.gitArgs, hostGitMount)
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
	if err != nil {
		return []string{fmt.Sprintf("the workspace could not be checked for git repositories the sandbox made: %v", err)}
	}
	return b.neutralize(ctx, run, found)
}

// neutralize moves each finding to the sandbox's storage: the helper
// copies it there, then shiro replaces it in the workspace with a symlink
// to that copy, which leads nowhere on the host.
func (b *boundary) neutralize(ctx context.Context, run gitshadow.Runner, found []gitshadow.Finding) []string {
	if len(found) == 0 {
		return nil
	}
	targets := make([]string, len(found))
	var args []string
	for i, f := range found {
		targets[i] = gitStore + "/" + randomSuffix() + randomSuffix()
		args = append(args, filepath.Join(b.ws, filepath.FromSlash(f.Path)), targets[i])
	}
	var notices []string
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
// atomically, through the workspace's root (nothing outside it is touched
// whatever the sandbox did to the path meanwhile).
func (b *boundary) replace(rel, target string) error {
	tmp := rel + ".shiro-" + randomSuffix()
	if err := b.root.Symlink(target, tmp); err != nil {
		return err
	}
	if err := b.root.Rename(tmp, rel); err != nil {
		b.root.Remove(tmp)
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("it is a directory now")
		}
		return err
	}
	return nil
}

func (b *boundary) close() {
	b.mu.Lock()
	if b.syncer != nil {
		b.syncer.Close()
	}
	b.mu.Unlock()
	b.scanner.Close()
	b.root.Close()
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
// final scan, and the list of repositories that were the user's.
type journal struct {
	dir    string
	marker string
}

// unclean reports (and clears) markers of sessions whose process is gone.
func (j *journal) unclean() bool {
	entries, _ := os.ReadDir(j.dir)
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
		os.Remove(filepath.Join(j.dir, e.Name()))
	}
	return found
}

func (j *journal) protected() map[string]bool {
	out := map[string]bool{}
	b, err := os.ReadFile(filepath.Join(j.dir, "protected.json"))
	if err != nil {
		return out
	}
	var list []string
	_ = json.Unmarshal(b, &list)
	for _, p := range list {
		out[p] = true
	}
	return out
}

func (j *journal) setProtected(found []gitshadow.Finding) {
	list := []string{}
	for _, f := range found {
		list = append(list, f.Path)
	}
	b, _ := json.Marshal(list)
	if os.MkdirAll(j.dir, 0o700) == nil {
		_ = atomicfile.WriteFile(filepath.Join(j.dir, "protected.json"), b, 0o600)
	}
}

// open marks a session as running.
func (j *journal) open() {
	if os.MkdirAll(j.dir, 0o700) != nil {
		return
	}
	j.marker = filepath.Join(j.dir, fmt.Sprintf("open-%d-%s", os.Getpid(), randomSuffix()))
	if f, err := os.Create(j.marker); err == nil {
		f.Close()
	}
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
