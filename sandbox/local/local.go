// Package local implements sandbox.Sandbox on the host, for --no-sandbox and
// fast tool tests: commands run as the user, in the workspace, with the
// host's environment, each under a reaper that kills everything it started,
// as in the container (see sandbox/helper).
package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// Sandbox runs commands on the host.
type Sandbox struct {
	workspace string
	runner    *helper.Runner

	mu     sync.Mutex
	closed bool
}

var (
	_ sandbox.Sandbox    = (*Sandbox)(nil)
	_ sandbox.PortDialer = (*Sandbox)(nil)
	_ sandbox.PortLister = (*Sandbox)(nil)
)

type config struct {
	env       []string
	sessionID string
	reaper    []string
	setReaper bool
}

// Option configures New.
type Option func(*config)

// WithEnv sets the base environment of commands (default os.Environ()).
func WithEnv(env []string) Option { return func(c *config) { c.env = env } }

// WithReaper sets the command line of the commands' reaper (default
// helper.DefaultReaper(): shiro's own; nil: none, a kill then reaches only
// the process group and the marker). See helper.WithReaper.
func WithReaper(argv []string) Option {
	return func(c *config) { c.reaper, c.setReaper = argv, true }
}

// WithSessionID sets the session ID that prefixes the commands' markers
// (default: a random one).
func WithSessionID(id string) Option { return func(c *config) { c.sessionID = id } }

// New returns a Sandbox for workspace, an existing directory.
func New(workspace string, opts ...Option) (*Sandbox, error) {
	cfg := config{env: os.Environ(), sessionID: helper.NewSessionID()}
	for _, o := range opts {
		o(&cfg)
	}
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("local sandbox for %s: %w", workspace, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("local sandbox: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("local sandbox: %s is not a directory", abs)
	}
	ropts := []helper.RunnerOption{helper.WithEnv(cfg.env), helper.WithDir(abs)}
	if cfg.setReaper {
		ropts = append(ropts, helper.WithReaper(cfg.reaper))
	}
	r, err := helper.NewRunner(cfg.sessionID, ropts...)
	if err != nil {
		return nil, fmt.Errorf("local sandbox: %w", err)
	}
	return &Sandbox{workspace: abs, runner: r}, nil
}

// Run implements sandbox.Sandbox. A relative cmd.Dir is taken from the
// workspace.
func (s *Sandbox) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	// Starting under the lock means Close's kill sees every started command.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return sandbox.Result{}, sandbox.ErrClosed
	}
	p, err := s.runner.Start(ctx, cmd)
	s.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return sandbox.Result{Interrupted: true}, err
		}
		return sandbox.Result{}, err
	}
	return p.Wait()
}

// Info implements sandbox.Sandbox.
func (s *Sandbox) Info() sandbox.Info {
	return sandbox.Info{Kind: "local", Workspace: s.workspace}
}

// SessionID returns the session ID that prefixes the commands' markers.
func (s *Sandbox) SessionID() string { return s.runner.SessionID() }

// Close kills every process the session started, background ones included.
// Runs in flight end with their tree killed. Close may be called again.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if err := s.runner.KillSession(); err != nil {
		return fmt.Errorf("close local sandbox: %w", err)
	}
	return nil
}

// DialPort implements sandbox.PortDialer: without a sandbox, the port is
// the host's own loopback's (127.0.0.1, then [::1]).
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("dial port %d: not a TCP port", port)
	}
	c, err := helper.DialLoopback(ctx, port)
	if err != nil {
		return nil, fmt.Errorf("dial port %d: %w", port, err)
	}
	return c, nil
}

// Listeners implements sandbox.PortLister: the host's listening sockets.
func (s *Sandbox) Listeners(ctx context.Context) ([]sandbox.Listener, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	return helper.ListListeners()
}

func (s *Sandbox) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return sandbox.ErrClosed
	}
	return nil
}
