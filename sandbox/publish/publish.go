// Package publish carries TCP ports of the sandbox to the host
// (--publish): a Publisher listens on a host address for each mapping and
// carries every connection it accepts to the port on the sandbox's
// loopback through sandbox.PortDialer (shiro's channel to the helper).
// The sandbox's network is not changed: no engine port, no host network,
// no route. Connections go one way only, host to sandbox.
package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

var (
	// ErrHostPortInUse is Add's error when another program listens on
	// the host port already.
	ErrHostPortInUse = errors.New("host port in use")
	// ErrNotPublished is Remove's error for a host port that is not
	// published.
	ErrNotPublished = errors.New("port not published")
	// ErrClosed is Add's error after Close.
	ErrClosed = errors.New("publisher closed")
)

// Options configure a Publisher.
type Options struct {
	// Address is the host address every port listens on; ""
	// is DefaultAddress.
	Address string
	// Sandbox returns the sandbox the next connection goes to, opening
	// it if need be. It is called for every connection, so that a port
	// carries on to a container that replaced the last one. An error
	// closes the client with a notice.
	Sandbox func(ctx context.Context) (sandbox.PortDialer, error)
	// Notice tells the user something about a port (nothing listens, the
	// sandbox is gone); nil drops it. Called from connection goroutines.
	Notice func(string)
	// NoticeEvery is the least time between two notices of one port
	// (a browser retries a refused page in a loop); 0 is 10 s.
	NoticeEvery time.Duration
	// DialTimeout bounds getting the sandbox and dialling the port for
	// one connection (the first may open the sandbox); 0 is 2 minutes.
	DialTimeout time.Duration
}

// Publisher owns the published ports of a session: their listeners, the
// goroutines that accept on them and those that carry each connection.
// Close stops them all and waits for them.
type Publisher struct {
	opts Options

	mu     sync.Mutex
	ports  map[int]*port // by host port
	closed bool
}

// Port is one published port as List tells it.
type Port struct {
	Mapping
	// Address is where the host side listens ("127.0.0.1:8080").
	Address string `json:"address"`
	// Conns is how many connections are open through it.
	Conns int `json:"conns"`
}

type port struct {
	m      Mapping
	ln     *net.TCPListener
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every connection

	mu         sync.Mutex
	conns      map[net.Conn]bool // both ends of every open connection; true for a client's
	open       int               // clients
	lastNotice time.Time
}

// New returns a Publisher with no port published.
func New(opts Options) *Publisher {
	if opts.Address == "" {
		opts.Address = DefaultAddress
	}
	if opts.NoticeEvery == 0 {
		opts.NoticeEvery = 10 * time.Second
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Minute
	}
	return &Publisher{opts: opts, ports: map[int]*port{}}
}

// Address is the host address the ports listen on.
func (p *Publisher) Address() string { return p.opts.Address }

// Add publishes m: it listens on the host port at once (a port in use is
// ErrHostPortInUse, naming the address) and carries every connection to
// the container port. A HostPort of 0 takes a free port; the Port returned
// names it.
func (p *Publisher) Add(m Mapping) (Port, error) {
	if m.ContainerPort < 1 || m.ContainerPort > 65535 || m.HostPort < 0 || m.HostPort > 65535 {
		return Port{}, fmt.Errorf("publish %s: port out of range (1-65535)", m)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Port{}, ErrClosed
	}
	if prev, ok := p.ports[m.HostPort]; ok && m.HostPort != 0 {
		return Port{}, fmt.Errorf("host port %d is published already (to container port %d)", m.HostPort, prev.m.ContainerPort)
	}
	addr := net.JoinHostPort(p.opts.Address, strconv.Itoa(m.HostPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return Port{}, fmt.Errorf("publish %s: %w: %s is taken by another program (choose another host port: HOST_PORT:%d)", m, ErrHostPortInUse, addr, m.ContainerPort)
		}
		return Port{}, fmt.Errorf("publish %s: listen on %s: %w", m, addr, err)
	}
	tl := ln.(*net.TCPListener)
	m.HostPort = tl.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	pt := &port{m: m, ln: tl, cancel: cancel, conns: map[net.Conn]bool{}}
	p.ports[m.HostPort] = pt
	pt.wg.Add(1)
	go p.accept(ctx, pt)
	return pt.info(p.opts.Address), nil
}

// Remove stops publishing the host port: it stops listening and ends the
// port's open connections, and returns when they are gone.
func (p *Publisher) Remove(hostPort int) error {
	p.mu.Lock()
	pt, ok := p.ports[hostPort]
	delete(p.ports, hostPort)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("host port %d: %w", hostPort, ErrNotPublished)
	}
	pt.stop()
	return nil
}

// List is the published ports, by host port.
func (p *Publisher) List() []Port {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Port, 0, len(p.ports))
	for _, pt := range p.ports {
		out = append(out, pt.info(p.opts.Address))
	}
	slices.SortFunc(out, func(a, b Port) int { return a.HostPort - b.HostPort })
	return out
}

// Close stops every port and ends every connection, and returns when
// their goroutines are gone. Add fails after it.
func (p *Publisher) Close() error {
	p.mu.Lock()
	p.closed = true
	ports := p.ports
	p.ports = map[int]*port{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, pt := range ports {
		wg.Go(pt.stop)
	}
	wg.Wait()
	return nil
}

func (pt *port) info(address string) Port {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return Port{Mapping: pt.m, Address: net.JoinHostPort(address, strconv.Itoa(pt.m.HostPort)), Conns: pt.open}
}

// stop closes the listener and every connection and waits for the port's
// goroutines.
func (pt *port) stop() {
	pt.cancel()
	pt.ln.Close()
	pt.mu.Lock()
	for c := range pt.conns {
		c.Close()
	}
	pt.conns = nil // track refuses from now on
	pt.mu.Unlock()
	pt.wg.Wait()
}

func (p *Publisher) accept(ctx context.Context, pt *port) {
	defer pt.wg.Done()
	for {
		c, err := pt.ln.AcceptTCP()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (out of descriptors): wait a
			// little, or stop with the port.
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !pt.track(c, true) {
			c.Close()
			return
		}
		pt.wg.Add(1)
		go func() {
			defer pt.wg.Done()
			defer pt.untrack(c)
			p.carry(ctx, pt, c)
		}()
	}
}

// track records an open connection end, so that stop can close it; false
// once the port is stopping.
func (pt *port) track(c net.Conn, client bool) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.conns == nil {
		return false
	}
	pt.conns[c] = client
	if client {
		pt.open++
	}
	return true
}

// untrack closes c and forgets it.
func (pt *port) untrack(c net.Conn) {
	pt.mu.Lock()
	client, ok := pt.conns[c]
	if ok {
		delete(pt.conns, c)
		if client {
			pt.open--
		}
	}
	pt.mu.Unlock()
	c.Close()
}

// carry dials the container port for the client c and copies both ways
// until both directions are done.
func (p *Publisher) carry(ctx context.Context, pt *port, c *net.TCPConn) {
	dctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	sc, err := p.dial(dctx, pt.m.ContainerPort)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			p.refused(pt, err)
		}
		closeClean(c)
		return
	}
	if !pt.track(sc, false) {
		sc.Close()
		return
	}
	defer pt.untrack(sc)
	var wg sync.WaitGroup
	wg.Go(func() { pipe(sc, c) })
	pipe(c, sc)
	wg.Wait()
}

func (p *Publisher) dial(ctx context.Context, containerPort int) (net.Conn, error) {
	sb, err := p.opts.Sandbox(ctx)
	if err != nil {
		return nil, fmt.Errorf("the sandbox is not available: %w", err)
	}
	return sb.DialPort(ctx, containerPort)
}

// pipe copies src to dst, then half-closes dst so that the other side sees
// the end of this direction while the other one goes on. Both ends are
// passed unwrapped: io.Copy between two *net.TCPConn splices in the
// kernel.
func pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		if cw.CloseWrite() == nil {
			return
		}
	}
	// An error, or an end that cannot half-close: end the whole
	// connection (the other direction's copy ends with it).
	dst.Close()
	src.Close()
}

// refused tells the user, at most once per NoticeEvery, why a connection
// of the port was closed.
func (p *Publisher) refused(pt *port, err error) {
	if p.opts.Notice == nil {
		return
	}
	now := time.Now()
	pt.mu.Lock()
	quiet := !pt.lastNotice.IsZero() && now.Sub(pt.lastNotice) < p.opts.NoticeEvery
	if !quiet {
		pt.lastNotice = now
	}
	pt.mu.Unlock()
	if quiet {
		return
	}
	at := net.JoinHostPort(p.opts.Address, strconv.Itoa(pt.m.HostPort))
	switch {
	case errors.Is(err, sandbox.ErrNothingListens):
		p.opts.Notice(fmt.Sprintf("nothing listens on port %d in the sandbox (published at %s)", pt.m.ContainerPort, at))
	case errors.Is(err, errors.ErrUnsupported):
		p.opts.Notice(fmt.Sprintf("port %d (published at %s): this sandbox backend cannot carry connections: %v", pt.m.ContainerPort, at, err))
	default:
		p.opts.Notice(fmt.Sprintf("port %d (published at %s): connection closed: %v", pt.m.ContainerPort, at, err))
	}
}

// closeClean ends a client the port cannot serve with a FIN rather than a
// reset: it half-closes, reads what the client had sent until the client
// closes too (or a second passes), then closes.
func closeClean(c *net.TCPConn) {
	if c.CloseWrite() == nil {
		c.SetReadDeadline(time.Now().Add(time.Second))
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	}
	c.Close()
}
