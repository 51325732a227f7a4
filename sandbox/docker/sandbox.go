package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/gitshadow"
	"github.com/shiroagent/shiro/sandbox/helper"
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

	mu     sync.Mutex
	c      ctr
	ch     *channel
	tun    *tunnel // the egress tunnel of ch, in ask mode
	seq    int
	closed bool
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
	wsID, err := workspaceID(opts.Workspace)
	if err != nil {
		return nil, err
	}
	// In copy mode the sandbox has its own copy of the workspace and sees
	// nothing of the user's directory or repository: there is no git
	// boundary to keep (s.git stays nil).
	var git *boundary
	var pending []gitshadow.Finding
	if !opts.copyMode() {
		if git, pending, err = newBoundary(opts.Workspace, e.stateDir, opts.NoMount); err != nil {
			return nil, err
		}
		for _, n := range git.plan.Notices {
			opts.Notices(n)
		}
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	s := &Sandbox{e: e, opts: opts, helper: h, base: hex.EncodeToString(id[:]), logs: io.Discard, wsID: wsID, git: git}
	if d := e.socketDir(opts, wsID); d != "" {
		if err := os.MkdirAll(d, 0o700); err != nil {
			s.closeBoundary()
			return nil, fmt.Errorf("make the sandbox's socket directory: %w", err)
		}
	}
	e.sweep(ctx)
	s.mu.Lock()
	err = s.connect(ctx)
	s.mu.Unlock()
	if err != nil {
		s.closeBoundary()
		return nil, err
	}
	if git == nil {
		return s, nil
	}
	git.journal.open()
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

// closeBoundary releases the git boundary, if there is one.
func (s *Sandbox) closeBoundary() {
	if s.git != nil {
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
			s.mu.Lock()
			s.pending = append(s.pending, n...)
			s.mu.Unlock()
		}
		t.Reset(max(watchInterval, 20*time.Since(start)))
	}
}

// takePending returns and clears the background sweep's notices.
func (s *Sandbox) takePending() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.pending
	s.pending = nil
	return n
}

// connect (re)creates the container if needed, opens a fresh channel and
// fills the shadow git directory. Callers hold s.mu.
func (s *Sandbox) connect(ctx context.Context) error {
	c, err := s.e.ensureContainer(ctx, s.opts, s.helper, s.gitPlan(), s.wsID)
	if err != nil {
		return err
	}
	s.seq++
	var serveArgs []string
	if s.git != nil {
		serveArgs = s.git.serveArgs()
	}
	socks := s.e.socketDir(s.opts, s.wsID)
	ch, err := s.e.openChannel(ctx, c, s.helper, s.opts, s.session(), s.logs, serveArgs, socks)
	if err != nil {
		return err
	}
	s.c, s.ch = c, ch
	if s.opts.Network == NetworkAsk && s.opts.Egress != nil {
		tun, err := s.e.openTunnel(ctx, c, s.helper, s.opts, s.logs, socks, s.session())
		if err != nil {
			_ = ch.close()
			s.ch = nil
			return err
		}
		s.tun = tun
	}
	if s.git == nil {
		return nil
	}
	if err := s.git.connected(ctx, clientRunner{ch.client}, s.helper.helperPath()); err != nil {
		_ = ch.close()
		s.ch = nil
		return fmt.Errorf("set up the sandbox's view of the repository: %w", err)
	}
	return nil
}

func (s *Sandbox) session() string { return fmt.Sprintf("%s-%d", s.base, s.seq) }

// channel returns a working channel, reconnecting when the last one broke
// (the container stopped, was removed, or the helper died).
func (s *Sandbox) channel(ctx context.Context) (*channel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, sandbox.ErrClosed
	}
	if s.ch != nil && !s.ch.broken() {
		return s.ch, nil
	}
	if s.ch != nil {
		_ = s.ch.close()
		s.ch = nil
	}
	s.closeTunnel()
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s.ch, nil
}

// closeTunnel ends the egress tunnel, if any. Callers hold s.mu.
func (s *Sandbox) closeTunnel() {
	if s.tun != nil {
		s.tun.close()
		s.tun = nil
	}
}

// egressEnv is the proxy environment of a command in ask mode, with a
// token naming the tool call ctx carries; release forgets the token once
// the command is done. Nil without a tunnel.
func (s *Sandbox) egressEnv(ctx context.Context) (env []string, release func() []string) {
	s.mu.Lock()
	tun, id := s.tun, s.c.id
	s.mu.Unlock()
	if tun == nil {
		return nil, nil
	}
	caller, _ := sandbox.CallerFrom(ctx)
	token, release := s.opts.Egress.Register(caller)
	return append(proxyEnv(tun.t.Port, token, containerHostname(id)), tun.trust...), release
}

// clientRunner runs a command on a channel without the git boundary's
// work around it (the boundary's own commands).
type clientRunner struct{ c *helper.Client }

func (r clientRunner) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	return r.c.Run(ctx, cmd)
}

// rawRunner runs on the current channel, if any, without the boundary.
func (s *Sandbox) rawRunner() gitshadow.Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		return nil
	}
	return clientRunner{s.ch.client}
}

// Run implements sandbox.Sandbox. Around the command, the git boundary
// brings the host's git changes into the sandbox, and afterwards moves
// repositories the command made out of the host's reach and imports its
// git changes; what it did is in Result.Notices.
func (s *Sandbox) Run(ctx context.Context, cmd sandbox.Command) (res sandbox.Result, err error) {
	if err := cmd.Validate(); err != nil {
		return sandbox.Result{}, err
	}
	ch, err := s.channel(ctx)
	if err != nil {
		return sandbox.Result{}, err
	}
	notices := s.takePending()
	if s.git != nil {
		notices = append(notices, s.git.before(ctx, ch.client)...)
	}
	if env, release := s.egressEnv(ctx); env != nil {
		cmd.Env = append(env, cmd.Env...)
		defer func() { res.Notices = append(res.Notices, release()...) }()
	}
	res, err = ch.client.Run(ctx, cmd)
	if errors.Is(err, helper.ErrKillTimeout) {
		// The helper did not confirm the kill in time: kill the session's
		// processes through a fresh exec, and drop the channel.
		s.forceKill(ctx, ch)
		if s.git != nil {
			notices = append(notices, s.git.after(ctx, nil, ch.client)...)
		}
		res.Notices = notices
		return res, ctx.Err()
	}
	if errors.Is(err, helper.ErrChannelClosed) && ctx.Err() == nil {
		return res, fmt.Errorf("the sandbox container %s stopped or was removed while the command ran: %w", s.c.name, err)
	}
	if s.git != nil {
		notices = append(notices, s.git.after(ctx, clientRunner{ch.client}, ch.client)...)
	}
	res.Notices = append(notices, s.takePending()...)
	return res, err
}

// forceKill is the fallback when the channel cannot confirm a kill: a fresh
// exec of the helper's kill, and if even that fails, a container restart.
func (s *Sandbox) forceKill(ctx context.Context, ch *channel) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s.mu.Lock()
	session, c := s.session(), s.c
	if s.ch == ch {
		s.ch = nil
	}
	s.mu.Unlock()
	if err := s.e.execKill(ctx, c, s.helper, s.opts, session); err != nil {
		_, _ = s.e.ctr.ContainerRestart(ctx, c.id, client.ContainerRestartOptions{})
	}
	_ = ch.close()
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
	s.mu.Lock()
	defer s.mu.Unlock()
	return sandbox.Info{Kind: "docker", Workspace: s.opts.Workspace, Image: s.opts.Image, Container: s.c.name, Helper: s.helper.helperPath(), Copy: s.opts.copyMode(), Engine: s.e.host}
}

// ContainerID is the id of the container the session last used.
func (s *Sandbox) ContainerID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.id
}

// Close implements sandbox.Sandbox: the helper kills every process this
// session started, then a last scan moves any repository the session made
// in the workspace out of the host's reach. The container stays for the
// next session.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	stop, done := s.stopWatch, s.watchDone
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	s.mu.Lock()
	var err error
	if s.ch != nil {
		err = s.ch.close()
		s.ch = nil
	}
	s.closeTunnel()
	c := s.c
	s.mu.Unlock()

	if s.git == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	var keep gitshadow.Runner
	if c.id != "" {
		keep = execRunner{e: s.e, c: c, opts: s.opts}
	}
	for _, n := range append(s.takePending(), s.git.sweep(ctx, keep)...) {
		s.opts.Notices(n)
	}
	s.git.journal.close()
	s.git.close()
	return err
}
