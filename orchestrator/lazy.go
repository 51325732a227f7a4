package orchestrator

import (
	"context"
	"sync"

	"github.com/shiroagent/shiro/sandbox"
)

// Lazy is a sandbox opened on its first use, so commands that never execute
// anything (file tools, `shiro tool read_file`) never pay for a container.
// Every caller waits for the same opening.
type Lazy struct {
	open func(context.Context) (sandbox.Sandbox, error)
	info sandbox.Info
	// opened, when set, readies a sandbox just opened (copy mode makes
	// its copy); an error closes it again.
	opened func(context.Context, sandbox.Sandbox) error

	mu     sync.Mutex
	sb     sandbox.Sandbox
	closed bool
}

var _ sandbox.Sandbox = (*Lazy)(nil)

// NewLazy returns a sandbox that calls OpenSandbox(cfg) on first use.
func NewLazy(cfg SandboxConfig) *Lazy {
	kind := "docker"
	if cfg.NoSandbox {
		kind = "local"
	}
	return &Lazy{
		open: func(ctx context.Context) (sandbox.Sandbox, error) { return OpenSandbox(ctx, cfg) },
		info: sandbox.Info{Kind: kind, Workspace: cfg.Workspace, Image: cfg.Image, Copy: cfg.CopyMode()},
	}
}

// Get opens the sandbox if needed and returns it.
func (l *Lazy) Get(ctx context.Context) (sandbox.Sandbox, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, sandbox.ErrClosed
	}
	if l.sb == nil {
		sb, err := l.open(ctx)
		if err != nil {
			return nil, err
		}
		if l.opened != nil {
			if err := l.opened(ctx, sb); err != nil {
				sb.Close()
				return nil, err
			}
		}
		l.sb = sb
	}
	return l.sb, nil
}

// Opened reports whether the sandbox has been opened.
func (l *Lazy) Opened() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sb != nil
}

// Run implements sandbox.Sandbox.
func (l *Lazy) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	sb, err := l.Get(ctx)
	if err != nil {
		return sandbox.Result{}, err
	}
	return sb.Run(ctx, cmd)
}

// Info implements sandbox.Sandbox; before opening it reports the configuration.
func (l *Lazy) Info() sandbox.Info {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sb != nil {
		return l.sb.Info()
	}
	return l.info
}

// Close implements sandbox.Sandbox.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.sb == nil {
		return nil
	}
	return l.sb.Close()
}
