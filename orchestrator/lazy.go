package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/shiroagent/shiro/sandbox"
)

// Lazy is a sandbox opened on its first use, so commands that never execute
// anything (file tools, `shiro tool read_file`) never pay for a container.
// Every caller waits for the same opening.
//
// Its lock covers its state only, never an open (which may pull or build
// an image for minutes): Info, Opened and Close answer at once while a
// caller opens, and a caller whose context ends stops waiting.
type Lazy struct {
	open func(context.Context) (sandbox.Sandbox, error)
	info sandbox.Info
	// opened, when set, readies a sandbox just opened (copy mode makes
	// its copy); an error closes it again.
	opened func(context.Context, sandbox.Sandbox) error
	// kept, when set, hears the Info of the sandbox it keeps.
	kept func(sandbox.Info)
	// pull is set once the user took a moved tag (Reopen).
	pull atomic.Bool

	mu     sync.Mutex
	sb     sandbox.Sandbox
	closed bool
	// failed is the error of the open that failed (not for a cancelled
	// caller): every later use returns it rather than trying again, so a
	// run without an engine fails once, not once per command.
	failed error
	// opening is set while a caller opens; it is closed when that open
	// has ended, its sandbox kept or closed.
	opening chan struct{}
}

var (
	_ sandbox.Sandbox    = (*Lazy)(nil)
	_ sandbox.PortDialer = (*Lazy)(nil)
	_ sandbox.PortLister = (*Lazy)(nil)
)

// NewLazy returns a sandbox that calls OpenSandbox(cfg) on first use.
func NewLazy(cfg SandboxConfig) *Lazy {
	l := &Lazy{info: sandbox.Info{Kind: cfg.Kind(), Workspace: cfg.Workspace, Image: cfg.Image, Copy: cfg.CopyMode()}}
	l.open = func(ctx context.Context) (sandbox.Sandbox, error) {
		c := cfg
		if l.pull.Load() {
			c.Pull = true
		}
		return OpenSandbox(ctx, c)
	}
	return l
}

// Reopen closes the open sandbox, if any, so that the next use opens it
// again; pull makes that open, and every later one, pull the image's tag
// again (a tag that moved, taken).
func (l *Lazy) Reopen(pull bool) error {
	if pull {
		l.pull.Store(true)
	}
	l.mu.Lock()
	sb := l.sb
	l.sb, l.failed = nil, nil
	l.mu.Unlock()
	if sb == nil {
		return nil
	}
	return sb.Close()
}

// OpenError is the failure to open the sandbox: a run that needs it cannot
// go on (the agent ends the turn on it, see agent.TurnEnder), and it is
// tried once.
type OpenError struct{ Err error }

func (e *OpenError) Error() string {
	return fmt.Sprintf("the sandbox could not be opened, so no command can run: %v", e.Err)
}

func (e *OpenError) Unwrap() error { return e.Err }

// EndsTurn implements agent.TurnEnder.
func (e *OpenError) EndsTurn() bool { return true }

// Get opens the sandbox if needed and returns it. While another caller
// opens, Get waits for that open (or for ctx). An open that failed is an
// *OpenError, returned again to every later caller without trying again
// (until Reopen); an open cut short by its caller's ctx is tried again by
// the next.
func (l *Lazy) Get(ctx context.Context) (sandbox.Sandbox, error) {
	for {
		l.mu.Lock()
		switch {
		case l.closed:
			l.mu.Unlock()
			return nil, sandbox.ErrClosed
		case l.sb != nil:
			sb := l.sb
			l.mu.Unlock()
			return sb, nil
		case l.failed != nil:
			err := l.failed
			l.mu.Unlock()
			return nil, err
		case l.opening != nil:
			wait := l.opening
			l.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		l.opening = done
		l.mu.Unlock()
		return l.openOnce(ctx, done)
	}
}

// openOnce opens the sandbox for Get and keeps it, unless Close came
// meanwhile; done is closed once the outcome is settled.
func (l *Lazy) openOnce(ctx context.Context, done chan struct{}) (sandbox.Sandbox, error) {
	defer close(done)
	sb, err := l.open(ctx)
	if err == nil && l.opened != nil {
		if err = l.opened(ctx, sb); err != nil {
			sb.Close()
		}
	}
	l.mu.Lock()
	l.opening = nil
	closed := l.closed
	if err == nil && !closed {
		l.sb = sb
	}
	if err != nil && ctx.Err() == nil && !closed {
		err = &OpenError{Err: err}
		l.failed = err
	}
	l.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case closed:
		sb.Close()
		return nil, sandbox.ErrClosed
	}
	if l.kept != nil {
		l.kept(sb.Info())
	}
	return sb, nil
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

// Close implements sandbox.Sandbox. An open under way is waited for (its
// sandbox is closed as it arrives), so that nothing of it outlives Close.
func (l *Lazy) Close() error {
	l.mu.Lock()
	l.closed = true
	sb, opening := l.sb, l.opening
	l.mu.Unlock()
	if opening != nil {
		<-opening
	}
	if sb == nil {
		return nil
	}
	return sb.Close()
}

// DialPort implements sandbox.PortDialer, opening the sandbox if needed; a
// sandbox that cannot carry connections is an error matching
// errors.ErrUnsupported.
func (l *Lazy) DialPort(ctx context.Context, port int) (net.Conn, error) {
	sb, err := l.Get(ctx)
	if err != nil {
		return nil, err
	}
	d, ok := sb.(sandbox.PortDialer)
	if !ok {
		return nil, fmt.Errorf("the %s sandbox cannot carry a connection to its port %d: %w", sb.Info().Kind, port, errors.ErrUnsupported)
	}
	return d.DialPort(ctx, port)
}

// Listeners implements sandbox.PortLister, opening the sandbox if needed;
// a sandbox that cannot tell is an error matching errors.ErrUnsupported.
func (l *Lazy) Listeners(ctx context.Context) ([]sandbox.Listener, error) {
	sb, err := l.Get(ctx)
	if err != nil {
		return nil, err
	}
	pl, ok := sb.(sandbox.PortLister)
	if !ok {
		return nil, fmt.Errorf("the %s sandbox cannot list its listening ports: %w", sb.Info().Kind, errors.ErrUnsupported)
	}
	return pl.Listeners(ctx)
}
