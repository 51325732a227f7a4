package helper

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// msgConn is one end of a connection whose bytes travel as data messages
// on the channel (where no descriptor can be handed over). Both sides use
// it: the host returns it from Dial, the helper splices it with the TCP
// connection it dialed. The channel's reader only ever appends to its
// buffer (push), which the window bounds: a slow consumer never holds up
// the reader, only its own connection's sender, which waits for acks.
type msgConn struct {
	id   uint64
	send func(Message) error
	// forget removes the connection from its owner's table, once.
	forget        func()
	local, remote net.Addr

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change of state
	buf     []byte        // received, not yet read
	eof     bool          // the peer half-closed
	credit  int           // bytes this side may still send
	wclosed bool          // this side half-closed
	closed  bool          // Close was called
	gone    error         // the peer closed, or the channel ended
	rdl     time.Time
	wdl     time.Time

	done     chan struct{} // closed once closed or gone
	doneOnce sync.Once
}

// chunkSize is the most a data message carries.
const chunkSize = 32 << 10

// errPeerClosed is a write's error on a connection the other side closed.
var errPeerClosed = fmt.Errorf("the connection was closed on the other side: %w", syscall.EPIPE)

func newMsgConn(id uint64, send func(Message) error, forget func(), local, remote net.Addr) *msgConn {
	return &msgConn{id: id, send: send, forget: forget, local: local, remote: remote,
		changed: make(chan struct{}), credit: DialWindow, done: make(chan struct{})}
}

// notify wakes every waiter. Callers hold mc.mu.
func (mc *msgConn) notify() {
	close(mc.changed)
	mc.changed = make(chan struct{})
}

func (mc *msgConn) end() { mc.doneOnce.Do(func() { close(mc.done) }) }

// push takes a data message from the channel's reader; it never blocks. A
// peer that overruns the window loses the connection.
func (mc *msgConn) push(data []byte, eof bool) {
	mc.mu.Lock()
	if mc.closed || mc.gone != nil {
		mc.mu.Unlock()
		return
	}
	if len(mc.buf)+len(data) > DialWindow || (mc.eof && len(data) > 0) {
		mc.mu.Unlock()
		mc.fail(errors.New("the other side overran the connection's window"))
		return
	}
	mc.buf = append(mc.buf, data...)
	if eof {
		mc.eof = true
	}
	mc.notify()
	mc.mu.Unlock()
}

// fail drops the connection on a protocol error: the peer is told.
func (mc *msgConn) fail(err error) {
	mc.remoteClose(err)
	_ = mc.send(Message{ID: mc.id, Type: TypeClose})
}

// ack gives the sender n more bytes of window.
func (mc *msgConn) ack(n int) {
	if n <= 0 {
		return
	}
	mc.mu.Lock()
	mc.credit = min(mc.credit+n, DialWindow)
	mc.notify()
	mc.mu.Unlock()
}

// remoteClose ends the connection from the other side (a close message, or
// the channel's end): reads return what is buffered, then EOF; writes fail.
func (mc *msgConn) remoteClose(err error) {
	mc.mu.Lock()
	if mc.gone == nil {
		mc.gone = err
		mc.notify()
	}
	mc.mu.Unlock()
	mc.end()
	mc.forget()
}

// wait blocks until the state changes or the deadline passes; it returns
// os.ErrDeadlineExceeded then. Callers hold mc.mu; it is held again on
// return.
func (mc *msgConn) wait(deadline time.Time) error {
	ch := mc.changed
	mc.mu.Unlock()
	defer mc.mu.Lock()
	if deadline.IsZero() {
		<-ch
		return nil
	}
	d := time.Until(deadline)
	if d <= 0 {
		return os.ErrDeadlineExceeded
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return os.ErrDeadlineExceeded
	}
}

func (mc *msgConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "shiro", Source: mc.local, Addr: mc.remote, Err: err}
}

// Read implements net.Conn.
func (mc *msgConn) Read(p []byte) (int, error) {
	mc.mu.Lock()
	for {
		switch {
		case mc.closed:
			mc.mu.Unlock()
			return 0, mc.opErr("read", net.ErrClosed)
		case len(mc.buf) > 0:
			n := copy(p, mc.buf)
			mc.buf = mc.buf[n:]
			if len(mc.buf) == 0 {
				mc.buf = nil
			}
			live := mc.gone == nil
			mc.mu.Unlock()
			if live && n > 0 {
				_ = mc.send(Message{ID: mc.id, Type: TypeAck, N: n})
			}
			return n, nil
		case mc.eof || mc.gone != nil:
			mc.mu.Unlock()
			return 0, io.EOF
		case len(p) == 0:
			mc.mu.Unlock()
			return 0, nil
		}
		if err := mc.wait(mc.rdl); err != nil {
			if d := mc.rdl; !d.IsZero() && time.Until(d) <= 0 {
				mc.mu.Unlock()
				return 0, mc.opErr("read", err)
			}
		}
	}
}

// Write implements net.Conn.
func (mc *msgConn) Write(p []byte) (int, error) {
	written := 0
	mc.mu.Lock()
	for len(p) > 0 {
		switch {
		case mc.closed:
			mc.mu.Unlock()
			return written, mc.opErr("write", net.ErrClosed)
		case mc.wclosed:
			mc.mu.Unlock()
			return written, mc.opErr("write", syscall.EPIPE)
		case mc.gone != nil:
			mc.mu.Unlock()
			return written, mc.opErr("write", errPeerClosed)
		case mc.credit > 0:
			n := min(len(p), mc.credit, chunkSize)
			mc.credit -= n
			mc.mu.Unlock()
			if err := mc.send(Message{ID: mc.id, Type: TypeData, Data: p[:n]}); err != nil {
				return written, mc.opErr("write", err)
			}
			written += n
			p = p[n:]
			mc.mu.Lock()
			continue
		}
		if err := mc.wait(mc.wdl); err != nil {
			if d := mc.wdl; !d.IsZero() && time.Until(d) <= 0 {
				mc.mu.Unlock()
				return written, mc.opErr("write", err)
			}
		}
	}
	mc.mu.Unlock()
	return written, nil
}

// CloseWrite half-closes the connection: the peer reads EOF once it read
// what was sent.
func (mc *msgConn) CloseWrite() error {
	mc.mu.Lock()
	if mc.closed || mc.wclosed || mc.gone != nil {
		mc.mu.Unlock()
		return nil
	}
	mc.wclosed = true
	mc.notify()
	mc.mu.Unlock()
	return mc.send(Message{ID: mc.id, Type: TypeData, EOF: true})
}

// Close implements net.Conn: it ends both directions on both sides.
func (mc *msgConn) Close() error {
	mc.mu.Lock()
	if mc.closed {
		mc.mu.Unlock()
		return nil
	}
	mc.closed = true
	live := mc.gone == nil
	mc.buf = nil
	mc.notify()
	mc.mu.Unlock()
	mc.end()
	mc.forget()
	if live {
		_ = mc.send(Message{ID: mc.id, Type: TypeClose})
	}
	return nil
}

// Done is closed once the connection is closed on either side.
func (mc *msgConn) Done() <-chan struct{} { return mc.done }

// LocalAddr implements net.Conn.
func (mc *msgConn) LocalAddr() net.Addr { return mc.local }

// RemoteAddr implements net.Conn.
func (mc *msgConn) RemoteAddr() net.Addr { return mc.remote }

// SetDeadline implements net.Conn.
func (mc *msgConn) SetDeadline(t time.Time) error {
	mc.mu.Lock()
	mc.rdl, mc.wdl = t, t
	mc.notify()
	mc.mu.Unlock()
	return nil
}

// SetReadDeadline implements net.Conn.
func (mc *msgConn) SetReadDeadline(t time.Time) error {
	mc.mu.Lock()
	mc.rdl = t
	mc.notify()
	mc.mu.Unlock()
	return nil
}

// SetWriteDeadline implements net.Conn.
func (mc *msgConn) SetWriteDeadline(t time.Time) error {
	mc.mu.Lock()
	mc.wdl = t
	mc.notify()
	mc.mu.Unlock()
	return nil
}

// sandboxAddr is the address of a connection's far end as the host sees
// it: a port on the sandbox's loopback.
type sandboxAddr struct{ port int }

func (a sandboxAddr) Network() string { return "shiro" }
func (a sandboxAddr) String() string  { return fmt.Sprintf("sandbox:%d", a.port) }
