package egress

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// The proxy's fast paths. A CONNECT tunnel that is not intercepted is
// carried here rather than by goproxy: the command's connection and the
// target's stay the kernel's own (*net.UnixConn, *net.TCPConn), so io.Copy
// splices between them, each direction is half-closed when its source
// ends, and the bytes are counted from io.Copy's result rather than on
// every read. Plain HTTP goes through goproxy; its response bodies are
// copied to the command in large blocks (serveConn.ReadFrom).

// copyBlock is the size of the blocks a plain HTTP body is copied in: a
// few system calls per megabyte rather than 32 (io.Copy's 32 KiB).
const copyBlock = 256 << 10

var blockPool = sync.Pool{New: func() any { b := make([]byte, copyBlock); return &b }}

// serveConn is a connection the proxy serves. net/http hands a response
// body to the connection's ReadFrom when it has one (it has no other way
// to reach it), which copies it in copyBlock blocks.
type serveConn struct{ net.Conn }

// ReadFrom copies r to the connection: a plain response's body straight
// from the target's socket (plainBody.spliceTo), anything else in large
// blocks.
func (c serveConn) ReadFrom(r io.Reader) (int64, error) {
	if pb, ok := r.(*plainBody); ok {
		if n, ok, err := pb.spliceTo(c.Conn); ok {
			return n, err
		}
	}
	b := blockPool.Get().(*[]byte)
	defer blockPool.Put(b)
	return io.CopyBuffer(struct{ io.Writer }{c.Conn}, struct{ io.Reader }{r}, *b)
}

// unwrap returns the connection a serveConn wraps.
func unwrap(c net.Conn) net.Conn {
	if s, ok := c.(serveConn); ok {
		return s.Conn
	}
	return c
}

// serveListener wraps the connections it accepts in serveConn.
type serveListener struct{ net.Listener }

func (l serveListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return serveConn{c}, nil
}

// tunnels are the CONNECTs of one Serve: their handlers, and the
// connections hijacked for them, which end with it (net/http forgets a
// connection once it is hijacked).
type tunnels struct {
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// start counts a handler in; false once the Serve has ended.
func (t *tunnels) start() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

func (t *tunnels) end() { t.wg.Done() }

// track takes c on, to close when the Serve ends; false once it has.
func (t *tunnels) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.conns == nil {
		t.conns = map[net.Conn]struct{}{}
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *tunnels) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// closeAll ends every tunnel and waits for their handlers.
func (t *tunnels) closeAll() {
	t.mu.Lock()
	t.closed = true
	conns := make([]net.Conn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	t.wg.Wait()
}

// tunnel answers a CONNECT that is not intercepted: it decides and dials
// the target, answers 200, and carries the bytes both ways until both
// directions end.
func (p *Proxy) tunnel(ts *tunnels, w http.ResponseWriter, r *http.Request) {
	target, done, err := p.connect(r.Context(), tokenOf(r), r.URL.Host)
	hj, ok := w.(http.Hijacker)
	if !ok {
		if target != nil {
			_ = target.Close()
			done(0, 0)
		}
		http.Error(w, "this connection cannot carry a tunnel", http.StatusInternalServerError)
		return
	}
	hc, rw, herr := hj.Hijack()
	if herr != nil {
		if target != nil {
			_ = target.Close()
			done(0, 0)
		}
		return
	}
	client := unwrap(hc)
	if err != nil {
		_ = errorResponse(r, err).Write(client)
		_ = client.Close()
		return
	}
	if !ts.track(client) {
		_ = client.Close()
		_ = target.Close()
		done(0, 0)
		return
	}
	defer ts.untrack(client)
	_, err = io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n")
	// Bytes the client sent right behind its CONNECT, read with it.
	var early int64
	if n := rw.Reader.Buffered(); n > 0 && err == nil {
		b, _ := rw.Reader.Peek(n)
		var m int
		m, err = target.Write(b)
		early = int64(m)
	}
	if err != nil {
		_ = client.Close()
		_ = target.Close()
		done(early, 0)
		return
	}
	sent, recv := pipe(client, target)
	done(early+sent, recv)
}

// pipe copies both ways between a command's connection and its target
// until both directions have ended, then closes both. A direction that
// ends cleanly half-closes its destination, so the peer reads EOF and the
// other direction goes on; one that fails ends both.
func pipe(client, target net.Conn) (sent, recv int64) {
	up := make(chan int64, 1)
	go func() {
		n, err := io.Copy(target, client)
		endWrite(target, client, err)
		up <- n
	}()
	recv, err := io.Copy(client, target)
	endWrite(client, target, err)
	sent = <-up
	_ = client.Close()
	_ = target.Close()
	return sent, recv
}

// endWrite ends the writing to dst once the copy from src is over: a
// half-close after a clean end (a Close where dst has no half-close, as a
// multiplexed stream, whose Close is one), both closed after an error.
func endWrite(dst, src net.Conn, err error) {
	if err != nil {
		_ = dst.Close()
		_ = src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = dst.Close()
}

// readHeaderTimeout bounds how long a command may take to send a request's
// header.
const readHeaderTimeout = time.Minute
