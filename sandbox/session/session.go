// Package session holds what a sandbox session does the same way on the
// Docker and the Kubernetes backends: the command channel and egress
// tunnel of its current connection, a new connection when the channel
// breaks, a command's proxy environment, and the run of a command with
// the fallback for a kill the helper does not confirm.
package session

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// Channel is a backend's command channel: one long-lived `helper serve`
// carrying every command of a session.
type Channel interface {
	comparable
	// Client is the helper's client on the channel.
	Client() *helper.Client
	// Close ends the session: the helper sees EOF, kills every process
	// the session started and exits.
	Close()
}

// Tunnel is the egress tunnel beside a channel, in ask mode.
type Tunnel interface {
	comparable
	// Port is the forwarder's port on the sandbox's loopback.
	Port() int
	// Trust is the environment pointing commands at the proxy CA's
	// bundle; nil without one.
	Trust() []string
	// Close ends every connection on the tunnel, and its exec.
	Close()
}

// Backend is what a Conn does each backend's own way. Connect, Hostname,
// Kill and Lost are called with the Conn's lock held.
type Backend[C Channel, T Tunnel] struct {
	// Connect opens a fresh channel and, in ask mode, its tunnel (the zero
	// T otherwise). On an error it has closed what it opened.
	Connect func(ctx context.Context) (C, T, error)
	// Egress names each command's tool call for the token in its proxy
	// URL; set whenever Connect makes tunnels.
	Egress sandbox.Egress
	// Hostname is the sandbox's own hostname, which the proxy environment
	// keeps direct; "" when it is not known.
	Hostname func() string
	// Kill returns the fallback for a kill the helper did not confirm: it
	// kills the current session's processes without the channel, and runs
	// without the lock, within KillTimeout.
	Kill        func() func(ctx context.Context)
	KillTimeout time.Duration
	// Lost is the error of a command whose channel closed while it ran,
	// err being the client's.
	Lost func(err error) error
	// Before and After, when After is set, run around each command on the
	// channel: Before once the channel is ready, After once the command
	// ended (live false after the kill fallback, when the channel is
	// gone). The result's notices are theirs, in that order; without
	// After they are the helper's.
	Before func(ctx context.Context, c *helper.Client) []string
	After  func(ctx context.Context, c *helper.Client, live bool) []string
}

// Conn is a session's connection to its sandbox: the current channel and
// its tunnel. The embedded mutex guards them, and the fields of the
// backend's session that change with them.
type Conn[C Channel, T Tunnel] struct {
	sync.Mutex
	b      Backend[C, T]
	ch     C // the zero C when there is none
	tun    T // the egress tunnel of ch, in ask mode
	closed bool
}

// New returns a Conn that connects through b; the first Channel call
// connects.
func New[C Channel, T Tunnel](b Backend[C, T]) *Conn[C, T] {
	return &Conn[C, T]{b: b}
}

// Channel returns a working channel, reconnecting when the last one broke
// (the sandbox ended or the helper died).
func (c *Conn[C, T]) Channel(ctx context.Context) (C, error) {
	c.Lock()
	defer c.Unlock()
	var none C
	if c.closed {
		return none, sandbox.ErrClosed
	}
	if c.ch != none && !broken(c.ch) {
		return c.ch, nil
	}
	c.release()
	ch, tun, err := c.b.Connect(ctx)
	if err != nil {
		return none, err
	}
	c.ch, c.tun = ch, tun
	return ch, nil
}

// broken reports whether ch can no longer carry commands.
func broken[C Channel](ch C) bool {
	select {
	case <-ch.Client().Done():
		return true
	default:
		return false
	}
}

// Current is the channel the session last connected, if it still holds
// it (the zero C otherwise).
func (c *Conn[C, T]) Current() C {
	c.Lock()
	defer c.Unlock()
	return c.ch
}

// release ends the channel and the tunnel, if any. Callers hold the lock.
func (c *Conn[C, T]) release() {
	var none C
	if c.ch != none {
		c.ch.Close()
		c.ch = none
	}
	c.closeTunnel()
}

// closeTunnel ends the egress tunnel, if any. Callers hold the lock.
func (c *Conn[C, T]) closeTunnel() {
	var none T
	if c.tun != none {
		c.tun.Close()
		c.tun = none
	}
}

// Close refuses channels from now on, runs stop without the lock (nil:
// nothing to stop), then ends the channel and the tunnel. It reports
// false, and does nothing, when c was closed already.
func (c *Conn[C, T]) Close(stop func()) bool {
	c.Lock()
	if c.closed {
		c.Unlock()
		return false
	}
	c.closed = true
	c.Unlock()
	if stop != nil {
		stop()
	}
	c.Lock()
	c.release()
	c.Unlock()
	return true
}

// egressEnv is the proxy environment of a command in ask mode, with a
// token naming the tool call ctx carries; release forgets the token once
// the command is done. Nil without a tunnel.
func (c *Conn[C, T]) egressEnv(ctx context.Context) (env []string, release func() []string) {
	var none T
	c.Lock()
	tun, host := c.tun, c.b.Hostname()
	c.Unlock()
	if tun == none {
		return nil, nil
	}
	caller, _ := sandbox.CallerFrom(ctx)
	token, release := c.b.Egress.Register(caller)
	return sandbox.JoinEnv(append(sandbox.ProxyEnv(tun.Port(), token, host), tun.Trust()...)), release
}

// Run runs cmd on a working channel, with the proxy environment in ask
// mode (see sandbox.Sandbox.Run).
func (c *Conn[C, T]) Run(ctx context.Context, cmd sandbox.Command) (res sandbox.Result, err error) {
	if err := cmd.Validate(); err != nil {
		return sandbox.Result{}, err
	}
	ch, err := c.Channel(ctx)
	if err != nil {
		return sandbox.Result{}, err
	}
	var notices []string
	if c.b.Before != nil {
		notices = c.b.Before(ctx, ch.Client())
	}
	if env, release := c.egressEnv(ctx); env != nil {
		cmd.Env = append(env, cmd.Env...)
		defer func() { res.Notices = append(res.Notices, release()...) }()
	}
	res, err = ch.Client().Run(ctx, cmd)
	if errors.Is(err, helper.ErrKillTimeout) {
		// The helper did not confirm the kill in time: kill the session's
		// processes through a fresh exec, and drop the channel.
		c.forceKill(ctx, ch)
		if c.b.After != nil {
			res.Notices = append(notices, c.b.After(ctx, ch.Client(), false)...)
		}
		res.Notices = append(res.Notices, KillFallbackNotice)
		return res, ctx.Err()
	}
	if errors.Is(err, helper.ErrChannelClosed) && ctx.Err() == nil {
		c.Lock()
		err = c.b.Lost(err)
		c.Unlock()
		return res, err
	}
	if c.b.After != nil {
		res.Notices = append(notices, c.b.After(ctx, ch.Client(), true)...)
	}
	return res, err
}

// KillFallbackNotice is the notice of a command whose kill the helper did
// not confirm in time: the session's processes were ended from outside
// the channel, which is then dropped.
const KillFallbackNotice = "the sandbox did not confirm the kill in time: shiro ended this session's processes from outside (a fresh exec, or a new container or pod if that failed), and the next command opens a new channel"

// forceKill is the fallback when ch cannot confirm a kill: the backend's
// Kill, then the end of ch (and of its tunnel, if ch is still the
// current channel).
func (c *Conn[C, T]) forceKill(ctx context.Context, ch C) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.b.KillTimeout)
	defer cancel()
	c.Lock()
	kill := c.b.Kill()
	if c.ch == ch {
		var none C
		c.ch = none
		c.closeTunnel()
	}
	c.Unlock()
	kill(ctx)
	ch.Close()
}

// Dial connects to port on the sandbox's loopback through the helper on a
// working channel (see helper.Client.Dial), reconnecting when the last one
// broke, and once more when it breaks under the dial (the container was
// replaced). A connection is not a command: it has neither the git
// boundary's Before and After nor the proxy environment.
func (c *Conn[C, T]) Dial(ctx context.Context, port int) (net.Conn, error) {
	return retryOnce(ctx, c, func(cl *helper.Client) (net.Conn, error) { return cl.Dial(ctx, port) })
}

// Listeners asks the helper on a working channel what listens on the
// sandbox's TCP ports (see helper.Client.Listeners).
func (c *Conn[C, T]) Listeners(ctx context.Context) ([]sandbox.Listener, error) {
	return retryOnce(ctx, c, func(cl *helper.Client) ([]sandbox.Listener, error) { return cl.Listeners(ctx) })
}

// retryOnce runs f on a working channel, and on a fresh one when that
// channel broke under it.
func retryOnce[C Channel, T Tunnel, R any](ctx context.Context, c *Conn[C, T], f func(*helper.Client) (R, error)) (R, error) {
	for attempt := 0; ; attempt++ {
		ch, err := c.Channel(ctx)
		if err != nil {
			var none R
			return none, err
		}
		r, err := f(ch.Client())
		if attempt == 0 && errors.Is(err, helper.ErrChannelClosed) && ctx.Err() == nil {
			continue
		}
		return r, err
	}
}
