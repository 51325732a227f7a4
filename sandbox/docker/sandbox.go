package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// Sandbox is a session on the workspace's container.
type Sandbox struct {
	e      *Engine
	opts   Options
	helper helperFile
	base   string // session id prefix
	logs   io.Writer

	mu     sync.Mutex
	c      ctr
	ch     *channel
	seq    int
	closed bool
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// Open finds or creates the workspace's container and opens a session on it.
func (e *Engine) Open(ctx context.Context, opts Options) (*Sandbox, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("sandbox options: %w", err)
	}
	h, err := loadHelper(opts.HelperBinary)
	if err != nil {
		return nil, err
	}
	if opts.UserName == "" {
		opts.UserName = hostUserName()
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	s := &Sandbox{e: e, opts: opts, helper: h, base: hex.EncodeToString(id[:]), logs: io.Discard}
	e.sweep(ctx)
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// connect (re)creates the container if needed and opens a fresh channel.
// Callers hold s.mu.
func (s *Sandbox) connect(ctx context.Context) error {
	c, err := s.e.ensureContainer(ctx, s.opts, s.helper)
	if err != nil {
		return err
	}
	s.seq++
	ch, err := s.e.openChannel(ctx, c, s.helper, s.opts, s.session(), s.logs)
	if err != nil {
		return err
	}
	s.c, s.ch = c, ch
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
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s.ch, nil
}

// Run implements sandbox.Sandbox.
func (s *Sandbox) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	if err := cmd.Validate(); err != nil {
		return sandbox.Result{}, err
	}
	ch, err := s.channel(ctx)
	if err != nil {
		return sandbox.Result{}, err
	}
	res, err := ch.client.Run(ctx, cmd)
	if errors.Is(err, helper.ErrKillTimeout) {
		// The helper did not confirm the kill in time: kill the session's
		// processes through a fresh exec, and drop the channel.
		s.forceKill(ctx, ch)
		return res, ctx.Err()
	}
	if errors.Is(err, helper.ErrChannelClosed) && ctx.Err() == nil {
		return res, fmt.Errorf("the sandbox container %s stopped or was removed while the command ran: %w", s.c.name, err)
	}
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
		_, _ = s.e.api.ContainerRestart(ctx, c.id, client.ContainerRestartOptions{})
	}
	_ = ch.close()
}

// execKill runs `helper kill --session` in a fresh exec and waits for it.
func (e *Engine) execKill(ctx context.Context, c ctr, h helperFile, opts Options, session string) error {
	ex, err := e.api.ExecCreate(ctx, c.id, client.ExecCreateOptions{
		User: fmt.Sprintf("%d:%d", opts.UID, opts.GID),
		Cmd:  []string{h.helperPath(), "helper", "kill", "--session", session},
	})
	if err != nil {
		return fmt.Errorf("create kill exec: %w", err)
	}
	att, err := e.api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return fmt.Errorf("start kill exec: %w", err)
	}
	defer att.Close()
	_, _ = io.Copy(io.Discard, att.Reader)
	in, err := e.api.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect kill exec: %w", err)
	}
	if in.ExitCode != 0 {
		return fmt.Errorf("kill exec exited %d", in.ExitCode)
	}
	return nil
}

// Info implements sandbox.Sandbox.
func (s *Sandbox) Info() sandbox.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sandbox.Info{Kind: "docker", Workspace: s.opts.Workspace, Image: s.opts.Image, Container: s.c.name}
}

// ContainerID is the id of the container the session last used.
func (s *Sandbox) ContainerID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.id
}

// Close implements sandbox.Sandbox: the helper kills every process this
// session started. The container stays for the next session.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.ch == nil {
		return nil
	}
	err := s.ch.close()
	s.ch = nil
	return err
}
