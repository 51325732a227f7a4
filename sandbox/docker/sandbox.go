package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/gitshadow"
	"github.com/shiroagent/shiro/sandbox/helper"
	"github.com/shiroagent/shiro/sandbox/session"
)

// Sandbox is a session on the workspace's container.
type Sandbox struct {
	e      *Engine
	opts   Options
	helper helperFile
	base   string // session id prefix
	logs   io.Writer
	wsID   string
	git    *boundary

	// conn's lock guards c, seq and pending too.
	conn *session.Conn[*channel, *tunnel]
	c    ctr
	seq  int
	// pending holds what the background sweep did, for the next Run's
	// notices.
	pending []string

	stopWatch context.CancelFunc
	watchDone chan struct{}
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// Open finds or creates the workspace's container on img (what
// ResolveImage returned, or a reference the engine has) and opens a session
// on it.
func (e *Engine) Open(ctx context.Context, img ResolvedImage, opts Options) (*Sandbox, error) {
	opts, err := opts.resolve(img)
	if err != nil {
		return nil, err
	}
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("sandbox options: %w", err)
	}
	if opts.WorkspaceMode == "" {
		// A remote engine cannot bind-mount this machine's directory.
		opts.WorkspaceMode = sandbox.WorkspaceMount
		if !e.Local() {
			opts.WorkspaceMode = sandbox.WorkspaceCopy
		}
	}
	h, err := loadHelper(opts.HelperBinary)
	if err != nil {
		return nil, err
	}
	if opts.UserName == "" {
		opts.UserName = hostUserName()
	}
	// The run's workspace names the directory it opened; without one,
	// the directory at the path now.
	var wsID string
	if opts.Opened != nil {
		wsID, err = opts.Opened.ID()
	} else {
		wsID, err = workspaceID(opts.Workspace)
	}
	if err != nil {
		return nil, err
	}
	// In copy mode the sandbox has its own copy of the workspace and sees
	// nothing of the user's directory or repository: there is no git
	// boundary to keep (s.git stays nil).
	var git *boundary
	var pending []gitshadow.Finding
	if !opts.copyMode() {
		w, done, err := openedWorkspace(opts.Spec)
		if err != nil {
			return nil, err
		}
		if git, pending, err = newBoundary(ctx, opts.Workspace, w.Root(), e.stateDir, opts.NoMount); err != nil {
			done()
			return nil, err
		}
		if w != opts.Opened {
			git.owned = w
		}
		// Marked open before anything can run: a crash from here on is
		// taken for one, so what appears meanwhile is not the user's.
		if err := git.journal.open(); err != nil {
			git.close()
			return nil, err
		}
		for _, n := range git.plan.Notices {
			opts.Notices(n)
		}
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	s := &Sandbox{e: e, opts: opts, helper: h, base: hex.EncodeToString(id[:]), logs: io.Discard, wsID: wsID, git: git}
	s.conn = session.New(session.Backend[*channel, *tunnel]{
		Connect:     s.connect,
		Egress:      opts.Egress,
		Hostname:    func() string { return containerHostname(s.c.id) },
		Kill:        s.killer,
		KillTimeout: 10 * time.Second,
		Lost: func(err error) error {
			return fmt.Errorf("the sandbox container %s stopped or was removed while the command ran: %w", s.c.name, err)
		},
		Before: s.before,
		After:  s.after,
	})
	if d := e.socketDir(opts, wsID); d != "" {
		if err := os.MkdirAll(d, 0o700); err != nil {
			s.closeBoundary()
			return nil, fmt.Errorf("make the sandbox's socket directory: %w", err)
		}
	}
	e.sweep(ctx)
	if _, err := s.conn.Channel(ctx); err != nil {
		s.closeBoundary()
		return nil, err
	}
	if git == nil {
		return s, nil
	}
	// Repositories the sandbox made in a session that ended without its
	// final scan (shiro was killed) are moved now.
	for _, n := range git.neutralize(ctx, s.rawRunner(), pending) {
		opts.Notices(n)
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopWatch, s.watchDone = stop, make(chan struct{})
	go s.watch(wctx)
	return s, nil
}

// closeBoundary releases the git boundary, if there is one, of a session
// that failed to open: nothing ran, so its open marker goes too.
func (s *Sandbox) closeBoundary() {
	if s.git != nil {
		s.git.journal.close()
		s.git.close()
	}
}

// gitPlan is what the git boundary needs of the container (nothing in
// copy mode).
func (s *Sandbox) gitPlan() gitPlan {
	if s.git == nil {
		return gitPlan{}
	}
	return s.git.plan
}

// watchInterval is the shortest pause between background sweeps; a sweep
// that takes long stretches it (to twenty times its duration).
const watchInterval = 250 * time.Millisecond

// watch sweeps the workspace while the session is open, so that a
// repository a background process makes is out of the host's reach within
// seconds rather than at the next command. It stops when ctx ends.
func (s *Sandbox) watch(ctx context.Context) {
	defer close(s.watchDone)
	t := time.NewTimer(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		if n := s.git.sweep(ctx, s.rawRunner()); len(n) > 0 {
			s.conn.Lock()
			s.pending = append(s.pending, n...)
			s.conn.Unlock()
		}
		t.Reset(max(watchInterval, 20*time.Since(start)))
	}
}

// takePending returns and clears the background sweep's notices.
func (s *Sandbox) takePending() []string {
	s.conn.Lock()
	defer s.conn.Unlock()
	n := s.pending
	s.pending = nil
	return n
}

// connect (re)creates the container if needed, opens a fresh channel (and
// tunnel) and fills the shadow git directory. Callers hold s.conn's lock.
func (s *Sandbox) connect(ctx context.Context) (*channel, *tunnel, error) {
	c, err := s.e.ensureContainer(ctx, s.opts, s.helper, s.gitPlan(), s.wsID)
	if err != nil {
		return nil, nil, err
	}
	s.seq++
	var serveArgs []string
	if s.git != nil {
		serveArgs = s.git.serveArgs()
	}
	socks := s.e.socketDir(s.opts, s.wsID)
	ch, err := s.e.openChannel(ctx, c, s.helper, s.opts, s.session(), s.logs, serveArgs, socks)
	if err != nil {
		return nil, nil, err
	}
	s.c = c
	var tun *tunnel
	if s.opts.Network == NetworkAsk && s.opts.Egress != nil {
		if tun, err = s.e.openTunnel(ctx, c, s.helper, s.opts, s.logs, socks, s.session()); err != nil {
			ch.Close()
			return nil, nil, err
		}
	}
	if s.git == nil {
		return ch, tun, nil
	}
	if err := s.git.connected(ctx, clientRunner{ch.client}, s.helper.helperPath()); err != nil {
		ch.Close()
		if tun != nil {
			tun.Close()
		}
		return nil, nil, fmt.Errorf("set up the sandbox's view of the repository: %w", err)
	}
	return ch, tun, nil
}

func (s *Sandbox) session() string { return fmt.Sprintf("%s-%d", s.base, s.seq) }

// clientRunner runs a command on a channel without the git boundary's
// work around it (the boundary's own commands).
type clientRunner struct{ c *helper.Client }

func (r clientRunner) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	return r.c.Run(ctx, cmd)
}

// rawRunner runs on the current channel, if any, without the boundary.
func (s *Sandbox) rawRunner() gitshadow.Runner {
	ch := s.conn.Current()
	if ch == nil {
		return nil
	}
	return clientRunner{ch.client}
}

// Run implements sandbox.Sandbox. Around the command, the git boundary
// brings the host's git changes into the sandbox, and afterwards moves
// repositories the command made out of the host's reach and imports its
// git changes; what it did is in Result.Notices.
func (s *Sandbox) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	return s.conn.Run(ctx, cmd)
}

// before is the background sweep's notices, and the git boundary's work
// before a command on c.
func (s *Sandbox) before(ctx context.Context, c *helper.Client) []string {
	notices := s.takePending()
	if s.git != nil {
		notices = append(notices, s.git.before(ctx, c)...)
	}
	return notices
}

// after is the git boundary's work once a command on c ended, and while
// the channel lives (live), the background sweep's notices since. Without
// the channel, the boundary's scan only takes away what it finds.
func (s *Sandbox) after(ctx context.Context, c *helper.Client, live bool) []string {
	var notices []string
	if s.git != nil {
		var run gitshadow.Runner
		if live {
			run = clientRunner{c}
		}
		notices = s.git.after(ctx, run, c)
	}
	if live {
		notices = append(notices, s.takePending()...)
	}
	return notices
}

// killer is the fallback when the channel cannot confirm a kill: a fresh
// exec of the helper's kill of the current session, and if even that
// fails, a container restart. Callers hold s.conn's lock.
func (s *Sandbox) killer() func(context.Context) {
	sess, c := s.session(), s.c
	return func(ctx context.Context) {
		if err := s.e.execKill(ctx, c, s.helper, s.opts, sess); err != nil {
			_, _ = s.e.ctr.ContainerRestart(ctx, c.id, client.ContainerRestartOptions{})
		}
	}
}

// execKill runs `helper kill --session` in a fresh exec and waits for it.
func (e *Engine) execKill(ctx context.Context, c ctr, h helperFile, opts Options, session string) error {
	code, err := e.execRun(ctx, c, opts, []string{h.helperPath(), "helper", "kill", "--session", session})
	if err == nil && code != 0 {
		err = fmt.Errorf("kill exec exited %d", code)
	}
	return err
}

// execRun runs argv as the command user in a fresh exec of its own (no
// channel), discards its output and returns its exit code.
func (e *Engine) execRun(ctx context.Context, c ctr, opts Options, argv []string) (int, error) {
	ex, err := e.ctr.ExecCreate(ctx, c.id, client.ExecCreateOptions{
		User:         fmt.Sprintf("%d:%d", opts.UID, opts.GID),
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          argv,
	})
	if err != nil {
		return 0, fmt.Errorf("create exec: %w", err)
	}
	att, err := e.ctr.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, fmt.Errorf("start exec: %w", err)
	}
	defer att.Close()
	_, _ = io.Copy(io.Discard, att.Reader)
	in, err := e.ctr.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("inspect exec: %w", err)
	}
	return in.ExitCode, nil
}

// execRunner runs the boundary's commands in fresh execs once the session's
// channel is gone.
type execRunner struct {
	e    *Engine
	c    ctr
	opts Options
}

func (r execRunner) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	if len(cmd.Args) == 0 || cmd.Stdin != nil {
		return sandbox.Result{}, errors.New("exec runner: argv only, without stdin")
	}
	code, err := r.e.execRun(ctx, r.c, r.opts, cmd.Args)
	return sandbox.Result{ExitCode: code}, err
}

// Info implements sandbox.Sandbox.
func (s *Sandbox) Info() sandbox.Info {
	s.conn.Lock()
	defer s.conn.Unlock()
	return sandbox.Info{Kind: sandbox.BackendDocker, Workspace: s.opts.Workspace, Image: s.opts.Image, ImageDigest: s.c.digest, Container: s.c.name, Helper: s.helper.helperPath(), Copy: s.opts.copyMode(), Engine: s.e.host, Place: "the Docker engine at " + s.e.host}
}

// ContainerID is the id of the container the session last used.
func (s *Sandbox) ContainerID() string {
	s.conn.Lock()
	defer s.conn.Unlock()
	return s.c.id
}

// Close implements sandbox.Sandbox: the helper kills every process this
// session started, then a last scan moves any repository the session made
// in the workspace out of the host's reach. When it is the workspace's
// last session, the container is first frozen and cleared of every
// process but its init (settle), so that nothing runs while the scan
// decides or after it. The container stays for the next session.
func (s *Sandbox) Close() error {
	if !s.conn.Close(s.stopWatching) {
		return nil
	}
	s.conn.Lock()
	c := s.c
	s.conn.Unlock()

	if s.git == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	notices := s.takePending()
	var keep gitshadow.Runner
	switch {
	case c.id != "" && s.git.journal.last():
		res, err := s.e.settle(ctx, c.id, s.git)
		if err != nil {
			notices = append(notices, fmt.Sprintf("the workspace's last scan for git repositories the sandbox made did not run: %v; the next session scans before anything else", err))
			break // the marker stays: the next session treats what it finds as the sandbox's
		}
		if res.how != "frozen" && res.how != "stopped" {
			notices = append(notices, fmt.Sprintf("the sandbox container was stopped, not frozen, for the last scan: %s", res.how))
		}
		if res.running {
			keep = execRunner{e: s.e, c: c, opts: s.opts}
		}
		notices = append(notices, s.git.finish(ctx, keep, res.found)...)
		s.git.journal.close()
	default:
		if c.id != "" {
			keep = execRunner{e: s.e, c: c, opts: s.opts}
		}
		notices = append(notices, s.git.sweep(ctx, keep)...)
		s.git.journal.close()
	}
	for _, n := range notices {
		s.opts.Notices(n)
	}
	s.git.close()
	return nil
}

// settle is the end of the workspace's last session on container id (see
// settle.go): the final scan runs on the frozen container.
func (e *Engine) settle(ctx context.Context, id string, b *boundary) (settled, error) {
	var notes []string
	res, err := settle(ctx, e.frz, e.procs, id, func() ([]gitshadow.Finding, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		found, err := b.scanner.Scan()
		notes = b.scanner.TakeNotes()
		return found, err
	})
	b.mu.Lock()
	b.notes = append(b.notes, notes...)
	b.mu.Unlock()
	return res, err
}

// stopWatching stops the background sweep, if there is one, and waits
// for it.
func (s *Sandbox) stopWatching() {
	if s.stopWatch != nil {
		s.stopWatch()
		<-s.watchDone
	}
}
