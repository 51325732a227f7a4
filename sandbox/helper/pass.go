package helper

import (
	"errors"
	"net"
	"sync"
	"time"
)

// On a local engine the forwarder does not carry a connection's bytes: it
// hands the connection itself to the host. It connects to the bind-mounted
// Unix socket and sends one byte, passByte, with the descriptor of the
// socket the command connected (SCM_RIGHTS); the host takes that socket
// and closes the Unix connection, and from then on the proxy reads and
// writes the command's socket itself. A download then crosses one process
// (the proxy) and one splice, not two of each. Where no descriptor
// arrives (a socket that does not carry them), the host answers
// spliceByte and the bytes go over the Unix connection, spliced by the
// forwarder, as before.
const (
	passByte   = 'P'
	spliceByte = 'S'
)

// passWait bounds each side's wait in the hand-over: a connection to the
// host's socket that says nothing for that long is dropped.
const passWait = 10 * time.Second

// errNotForwarder is the hand-over's error for a connection whose first
// byte is not the forwarder's, or that carries something other than one
// TCP socket.
var errNotForwarder = errors.New("not a connection handed over by the forwarder")

// errNotDialed is the error for what arrives on a pass socket that is not
// one TCP socket with a token line (see ServeOptions.PassSocket).
var errNotDialed = errors.New("not a socket the helper dialed")

// PassListener is the host's end of a forwarder with --socket: it accepts
// on l and returns the connections the forwarder hands over (the
// command's own socket, a *net.TCPConn), or the Unix connection itself
// when the hand-over carried no descriptor. Each hand-over runs on its
// own goroutine, so a connection that never speaks holds up no other.
// Closing it closes l, drops the hand-overs in flight and waits for their
// goroutines.
func PassListener(l *net.UnixListener) net.Listener {
	pl := &passListener{l: l, conns: make(chan acceptResult), stop: make(chan struct{}), pending: map[*net.UnixConn]struct{}{}}
	pl.wg.Add(1)
	go pl.acceptLoop()
	return pl
}

type passListener struct {
	l     *net.UnixListener
	conns chan acceptResult
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	pending map[*net.UnixConn]struct{} // hand-overs in flight
}

type acceptResult struct {
	c   net.Conn
	err error
}

func (pl *passListener) acceptLoop() {
	defer pl.wg.Done()
	for {
		u, err := pl.l.AcceptUnix()
		if err != nil {
			temporary := false
			if t, ok := err.(interface{ Temporary() bool }); ok {
				temporary = t.Temporary() // e.g. out of descriptors: net/http waits and asks again
			}
			if !pl.deliver(acceptResult{err: err}) || !temporary {
				return
			}
			continue
		}
		if !pl.track(u) {
			_ = u.Close()
			return
		}
		pl.wg.Add(1)
		go func() {
			defer pl.wg.Done()
			c, err := receiveConn(u)
			pl.untrack(u)
			if err != nil {
				_ = u.Close()
				return
			}
			if !pl.deliver(acceptResult{c: c}) {
				_ = c.Close()
			}
		}()
	}
}

// deliver hands r to Accept; false once the listener is closed.
func (pl *passListener) deliver(r acceptResult) bool {
	select {
	case pl.conns <- r:
		return true
	case <-pl.stop:
		return false
	}
}

func (pl *passListener) track(u *net.UnixConn) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed {
		return false
	}
	pl.pending[u] = struct{}{}
	return true
}

func (pl *passListener) untrack(u *net.UnixConn) {
	pl.mu.Lock()
	delete(pl.pending, u)
	pl.mu.Unlock()
}

// Accept implements net.Listener.
func (pl *passListener) Accept() (net.Conn, error) {
	select {
	case r := <-pl.conns:
		return r.c, r.err
	case <-pl.stop:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (pl *passListener) Close() error {
	var err error
	pl.once.Do(func() {
		err = pl.l.Close()
		pl.mu.Lock()
		pl.closed = true
		for u := range pl.pending {
			_ = u.Close()
		}
		pl.mu.Unlock()
		close(pl.stop)
		pl.wg.Wait()
	})
	return err
}

// Addr implements net.Listener.
func (pl *passListener) Addr() net.Addr { return pl.l.Addr() }

// handOver is the forwarder's side: it hands c to the host over u (see
// passByte) and reports whether it is done with c — the host took the
// socket, or the hand-over failed — rather than to carry its bytes over u.
func handOver(u *net.UnixConn, c net.Conn) bool {
	if err := sendConn(u, c); err != nil {
		return true
	}
	_ = u.SetReadDeadline(time.Now().Add(passWait))
	var b [1]byte
	n, _ := u.Read(b[:])
	if n == 1 && b[0] == spliceByte {
		_ = u.SetReadDeadline(time.Time{})
		return false
	}
	return true // the host closed u: the socket is its own now
}
