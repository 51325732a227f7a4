package helper

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

// The egress tunnel: in ask mode the container has no network of its own.
// `helper forward` listens on the container's loopback and carries every
// connection a command makes to it as one stream of a yamux session over
// the forward exec's stdin and stdout; the host accepts the streams
// (AcceptTunnel) and serves its egress proxy on them. Nothing but the
// engine's exec API is needed, so a remote engine works the same.

// tunnelConfig is yamux's configuration on both sides: a window large
// enough for bulk downloads, no logging, keepalives off (the exec's
// stream ends with the session).
func tunnelConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.MaxStreamWindowSize = 16 << 20
	c.EnableKeepAlive = false
	c.LogOutput = io.Discard
	c.StreamOpenTimeout = 30 * time.Second
	c.ConnectionWriteTimeout = 30 * time.Second
	return c
}

// rwc joins a reader and a writer into the connection yamux runs on.
type rwc struct {
	io.Reader
	io.Writer
	close func() error
}

func (c rwc) Close() error { return c.close() }

// Forward listens on 127.0.0.1 (an ephemeral port), writes the port on a
// line of its own to out, then carries each accepted connection over a
// yamux session on in/out until in ends or ctx is done. With socket set
// (a Unix socket the host serves, bind-mounted from a local engine's
// host), each connection goes to the socket instead and in only says when
// to stop.
func Forward(ctx context.Context, in io.Reader, out io.Writer, socket string) error {
	// A forwarder counts as a session for init and carries every
	// connection: a command must not be able to take it over.
	notDumpable()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on the loopback: %w", err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if _, err := fmt.Fprintf(out, "%d\n", port); err != nil {
		return err
	}
	if socket != "" {
		return forwardToSocket(ctx, l, in, socket)
	}
	sess, err := yamux.Client(rwc{Reader: in, Writer: out, close: func() error { return nil }}, tunnelConfig())
	if err != nil {
		return err
	}
	defer sess.Close()
	go func() {
		select {
		case <-ctx.Done():
		case <-sess.CloseChan():
		}
		l.Close()
	}()
	err = serveEach(l, func(c net.Conn) {
		defer c.Close()
		s, err := sess.OpenStream()
		if err != nil {
			return
		}
		splice(c, s)
	})
	if ctx.Err() != nil || sess.IsClosed() {
		return nil
	}
	return err
}

// forwardToSocket hands each connection accepted on l over to the host
// through the Unix socket (see passByte), or carries it there when the
// socket cannot take it, until in ends or ctx is done.
func forwardToSocket(ctx context.Context, l net.Listener, in io.Reader, socket string) error {
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(stop)
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		l.Close()
	}()
	_ = serveEach(l, func(c net.Conn) {
		defer c.Close()
		u, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
		if err != nil {
			return
		}
		if handOver(u, c) {
			_ = u.Close()
			return
		}
		splice(c, u)
	})
	return nil
}

// serveEach runs handle on its own goroutine for each connection l
// accepts, until Accept fails; it returns that error once every handle
// has returned.
func serveEach(l net.Listener, handle func(net.Conn)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle(c)
		}()
	}
}

// splice copies both ways until both directions ended, then closes both.
func splice(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(b, a)
		closeWrite(b) // half-close: the peer reads EOF
		close(done)
	}()
	_, _ = io.Copy(a, b)
	closeWrite(a)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	_ = a.Close()
	_ = b.Close()
	<-done
}

// closeWrite half-closes c where it can (TCP, Unix sockets); a yamux
// stream's Close is its half-close.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	if s, ok := c.(*yamux.Stream); ok {
		_ = s.Close()
	}
}

// ReadForwardPort reads the port line the forward helper writes first.
func ReadForwardPort(br *bufio.Reader) (int, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("read the forwarder's port: %w", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || port <= 0 || port > 65535 {
		return 0, fmt.Errorf("the forwarder said %q, not a port", line)
	}
	return port, nil
}

// Tunnel is the host's end of a forward exec: a listener of the streams
// the container opens, and the loopback port commands reach it on.
type Tunnel struct {
	net.Listener
	Port int
}

// AcceptTunnel reads the port line the forward helper writes and opens the
// host's end of the session on r and w. Closing the Tunnel ends the session
// (and every connection on it); closeIO closes the underlying exec.
func AcceptTunnel(r io.Reader, w io.Writer, closeIO func() error) (*Tunnel, error) {
	br := bufio.NewReader(r)
	port, err := ReadForwardPort(br)
	if err != nil {
		return nil, err
	}
	sess, err := yamux.Server(rwc{Reader: br, Writer: w, close: closeIO}, tunnelConfig())
	if err != nil {
		return nil, err
	}
	return &Tunnel{Listener: sess, Port: port}, nil
}
