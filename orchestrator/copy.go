package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/workcopy"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools"
	"github.com/shiroagent/shiro/tools/copymode"
	"github.com/shiroagent/shiro/tools/gitrepo"
)

// ApplyPrompt is the prompt of the checkpoint turn an apply records: an
// undo of it takes the apply back.
const ApplyPrompt = "/apply"

// ErrNotCopyMode is the error of the copy-mode calls in a session whose
// sandbox holds the workspace itself.
var ErrNotCopyMode = errors.New("the sandbox works on the workspace itself (not a copy): there is nothing to apply")

// CopyStateDir is where copy mode keeps each workspace's base between
// sessions.
func CopyStateDir(dataDir string) string { return filepath.Join(dataDir, "copies") }

// copyStateFile is one workspace's base for one backend.
func copyStateFile(dataDir, ws, backend string) string {
	if backend == "" {
		backend = sandbox.BackendDocker
	}
	return filepath.Join(CopyStateDir(dataDir), config.ProjectKey(ws)+"-"+backend+".json")
}

// sessionCopy is a session's side of copy mode.
type sessionCopy struct {
	ws        string
	root      *os.Root
	store     *checkpoint.Store
	ownStore  bool // opened for copy mode alone (checkpoints are off)
	stateFile string
	// tools runs file tools on the copy through the session's (lazy)
	// sandbox.
	tools *copymode.Remote
	// auto: copy mode was not asked for but follows from where the
	// sandbox runs (said when it opens).
	auto bool

	mu      sync.Mutex
	copy    *workcopy.Copy // once the sandbox has opened
	notices []string       // from opening, for the next turn
	// notify, during a turn, tells the turn's listener at once.
	notify func(string)
}

// newSessionCopy readies copy mode for a session; the copy itself is made
// (or brought in step) when the sandbox opens.
func newSessionCopy(dataDir string, sc SandboxConfig, root *os.Root, gate *hostwrite.Gate, cp *checkpoints, lazy *Lazy) (*sessionCopy, error) {
	if dataDir == "" {
		return nil, errors.New("copy mode needs shiro's data directory (it keeps the workspace's states there)")
	}
	ws := sc.Workspace
	c := &sessionCopy{ws: ws, root: root, stateFile: copyStateFile(dataDir, ws, sc.Backend), auto: sc.WorkspaceMode == ""}
	if cp != nil {
		c.store = cp.store
	} else {
		st, err := OpenCheckpoints(dataDir, ws, root, gate)
		if err != nil {
			return nil, fmt.Errorf("copy mode: %w", err)
		}
		c.store, c.ownStore = st, true
	}
	c.tools = &copymode.Remote{
		Sandbox: lazy,
		Helper: func(ctx context.Context) (string, error) {
			sb, err := lazy.Get(ctx)
			if err != nil {
				return "", err
			}
			return sb.Info().Helper, nil
		},
		Workspace: ws,
		Cache:     copymode.AutoCache,
	}
	lazy.opened = c.opened
	return c, nil
}

// opened makes the copy in a sandbox just opened, or brings it in step.
func (c *sessionCopy) opened(ctx context.Context, sb sandbox.Sandbox) error {
	info := sb.Info()
	if !info.Copy {
		return fmt.Errorf("the %s sandbox holds the workspace itself, not a copy", info.Kind)
	}
	r := &copymode.Remote{
		Sandbox:   sb,
		Helper:    func(context.Context) (string, error) { return info.Helper, nil },
		Workspace: c.ws,
		Cache:     copymode.AutoCache,
	}
	cp, notices, err := workcopy.Open(ctx, workcopy.Options{Remote: r, Store: c.store, Root: c.root, StateFile: c.stateFile})
	if err != nil {
		return fmt.Errorf("copy the workspace into the sandbox: %w", err)
	}
	if c.auto {
		notices = append([]string{info.Place + " is not on this machine: the sandbox works on a copy of the workspace, and your files change only when you apply its changes (/apply, or --apply with -p)"}, notices...)
	}
	c.mu.Lock()
	c.copy = cp
	notify := c.notify
	if notify == nil {
		c.notices = append(c.notices, notices...)
	}
	c.mu.Unlock()
	for _, n := range notices {
		if notify != nil {
			notify(n)
		}
	}
	return nil
}

// current is the copy, once the sandbox has opened.
func (c *sessionCopy) current() *workcopy.Copy {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.copy
}

// beforeTurn carries the user's edits into the copy (when the sandbox is
// open; it copies the latest when it opens) and returns what to tell;
// until afterTurn, what opening the sandbox says goes to notify.
func (c *sessionCopy) beforeTurn(ctx context.Context, notify func(string)) []string {
	c.mu.Lock()
	notices, cp := c.notices, c.copy
	c.notices, c.notify = nil, notify
	c.mu.Unlock()
	if cp == nil {
		return notices
	}
	n, err := cp.Sync(ctx)
	if err != nil && ctx.Err() == nil {
		n = append(n, fmt.Sprintf("your changes since the last turn were not carried into the sandbox: %v", err))
	}
	return append(notices, n...)
}

// rebase follows an undo of applies (a CopyFollower), on the copy in use
// when there is one.
func (c *sessionCopy) rebase(ctx context.Context, applied map[string]bool, done []checkpoint.FileChange) error {
	if cp := c.current(); cp != nil {
		return cp.Rebase(ctx, undoneApplies(applied, done))
	}
	return rebaseApplies(ctx, c.store, c.root, applied, done, []string{c.stateFile})
}

// afterTurn ends what beforeTurn began.
func (c *sessionCopy) afterTurn() {
	c.mu.Lock()
	c.notify = nil
	c.mu.Unlock()
}

func (c *sessionCopy) close() error {
	if c.ownStore {
		return c.store.Close()
	}
	return nil
}

// wrap runs the file tools of list on the copy.
func (c *sessionCopy) wrap(list []tools.Tool) []tools.Tool {
	out := make([]tools.Tool, len(list))
	for i, t := range list {
		if copymode.InSandbox(t.Name()) {
			t = copymode.Wrap(t, c.tools)
		}
		out[i] = t
	}
	return out
}

// CopyMode reports whether the session's sandbox works on a copy of the
// workspace.
func (s *Session) CopyMode() bool { return s.copy != nil }

// SandboxOpened reports whether the session has opened its sandbox (a
// tool needed it, or StartSandbox ran).
func (s *Session) SandboxOpened() bool { return s.sandbox.Opened() }

// copyNow opens the sandbox (making the copy) and returns the copy.
func (s *Session) copyNow(ctx context.Context) (*workcopy.Copy, error) {
	if s.copy == nil {
		return nil, ErrNotCopyMode
	}
	if _, err := s.sandbox.Get(ctx); err != nil {
		return nil, err
	}
	if cp := s.copy.current(); cp != nil {
		return cp, nil
	}
	return nil, errors.New("the sandbox's copy of the workspace is not ready")
}

// Changes lists what the sandbox changed in its copy (/changes).
func (s *Session) Changes(ctx context.Context) (workcopy.Changes, error) {
	cp, err := s.copyNow(ctx)
	if err != nil {
		return workcopy.Changes{}, err
	}
	return cp.Changes(ctx)
}

// ChangePatch is the diff of one of Changes' files.
func (s *Session) ChangePatch(ctx context.Context, f checkpoint.FileChange) (string, error) {
	cp, err := s.copyNow(ctx)
	if err != nil {
		return "", err
	}
	return cp.Patch(ctx, f)
}

// Apply writes the sandbox's changes (all, or only paths) into the
// workspace. With checkpoints on it is recorded as a turn of its own
// first, so /undo takes it back.
func (s *Session) Apply(ctx context.Context, ch workcopy.Changes, paths []string) (workcopy.Applied, error) {
	cp, err := s.copyNow(ctx)
	if err != nil {
		return workcopy.Applied{}, err
	}
	meta := checkpoint.Meta{Prompt: ApplyPrompt}
	if s.cp != nil {
		s.cp.begin(ctx, len(s.agent.Messages()), ApplyPrompt)
		defer s.cp.end(ctx)
		s.cp.mu.Lock()
		meta.Session, meta.Turn = s.cp.session, s.cp.turn
		s.cp.mu.Unlock()
	}
	return cp.Apply(ctx, ch, paths, meta)
}

// PreviewFile reads the file an edit would change, for its approval's
// diff: in copy mode the copy's.
func (s *Session) PreviewFile(ctx context.Context, p string) (content string, exists bool, problem string, err error) {
	if s.copy == nil {
		return "", false, "", ErrNotCopyMode
	}
	pv, err := s.copy.tools.Read(ctx, p)
	if err != nil {
		return "", false, "", err
	}
	return pv.Content, pv.Exists, pv.Problem, nil
}

// appliedPaths are the paths the applies among the plan's undone turns
// wrote: read before the undo forgets those turns.
func appliedPaths(ctx context.Context, st *checkpoint.Store, p *UndoPlan) (map[string]bool, error) {
	list, err := st.List(p.Session)
	if err != nil {
		return nil, err
	}
	applied := map[string]bool{}
	for _, t := range checkpoint.Turns(list, p.Session) {
		if t.Turn < p.Turn || t.Prompt != ApplyPrompt {
			continue
		}
		cps := checkpoint.Turn(list, p.Session, t.Turn)
		chs, err := st.Changes(ctx, cps[0], cps[len(cps)-1])
		if err != nil {
			return nil, err
		}
		for _, c := range chs {
			applied[c.Path] = true
		}
	}
	return applied, nil
}

// rebaseApplies keeps, after an undo, the sandbox's version of what the
// undone applies had written (applied) as a change still to apply: the
// undo put the workspace back, not the sandbox. done are the undo's
// changes; stateFiles the copies to tell.
func rebaseApplies(ctx context.Context, st *checkpoint.Store, root *os.Root, applied map[string]bool, done []checkpoint.FileChange, stateFiles []string) error {
	paths := undoneApplies(applied, done)
	if len(paths) == 0 {
		return nil
	}
	var errs []error
	for _, f := range stateFiles {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		errs = append(errs, workcopy.Rebase(ctx, workcopy.Options{Store: st, Root: root, StateFile: f}, paths))
	}
	return errors.Join(errs...)
}

// undoneApplies are the undo's changes to files applies had written.
func undoneApplies(applied map[string]bool, done []checkpoint.FileChange) []string {
	var paths []string
	for _, d := range done {
		if applied[d.Path] {
			paths = append(paths, d.Path)
		}
	}
	return paths
}

// copyStateFiles are every backend's copy state of the workspace.
func copyStateFiles(dataDir, ws string) []string {
	var files []string
	for _, b := range sandbox.Backends() {
		files = append(files, copyStateFile(dataDir, ws, b))
	}
	return files
}

// ToolRunner runs built-in tools one at a time outside a session (`shiro
// tool`): on the workspace, or in copy mode the file tools on the
// sandbox's copy.
type ToolRunner struct {
	env  *tools.Env
	lazy *Lazy
	copy *sessionCopy
}

// NewToolRunner readies tools for the workspace w, opened by the caller
// (reads through its root, writes through its gate, and the sandbox's
// Opened); the sandbox opens on the first tool that needs it. output
// receives live output.
func NewToolRunner(sc SandboxConfig, dataDir string, w *workspace.Workspace, output func(stream string, chunk []byte)) (*ToolRunner, error) {
	root, gate := w.Root(), w.Gate()
	sc.Opened = w
	r := &ToolRunner{lazy: NewLazy(sc)}
	r.env = &tools.Env{Workspace: sc.Workspace, Root: root, Gate: gate, Sandbox: r.lazy, GoGit: sc.NoSandbox, OpenGit: gitrepo.Opener, Output: output}
	if sc.CopyMode() {
		c, err := newSessionCopy(dataDir, sc, root, gate, nil, r.lazy)
		if err != nil {
			return nil, err
		}
		r.copy = c
	}
	return r, nil
}

// Run runs t with input.
func (r *ToolRunner) Run(ctx context.Context, t tools.Tool, input []byte) (tools.Result, error) {
	if r.copy != nil {
		t = r.copy.wrap([]tools.Tool{t})[0]
	}
	return t.Run(ctx, r.env, input)
}

// Close closes the sandbox session and what copy mode opened.
func (r *ToolRunner) Close() error {
	err := r.lazy.Close()
	if r.copy != nil {
		err = errors.Join(err, r.copy.close())
	}
	return err
}
