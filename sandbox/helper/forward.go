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
// yamux session on in/out until in ends or ctx is done.
func Forward(ctx context.Context, in io.Reader, out io.Writer) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on the loopback: %w", err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if _, err := fmt.Fprintf(out, "%d\n", port); err != nil {
		return err
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
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || sess.IsClosed() {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			s, err := sess.OpenStream()
			if err != nil {
				return
			}
			splice(c, s)
		}()
	}
}

// splice copies both ways until both directions ended, then closes both.
func splice(a net.Conn, b *yamux.Stream) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(b, a)
		_ = b.Close() // half-close: the peer reads EOF
		close(done)
	}()
	_, _ = io.Copy(a, b)
	if tc, ok := a.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	_ = a.Close()
	_ = b.Close()
	<-done
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
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("read the forwarder's port: %w", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("the forwarder said %q, not a port", line)
	}
	sess, err := yamux.Server(rwc{Reader: br, Writer: w, close: closeIO}, tunnelConfig())
	if err != nil {
		return nil, err
	}
	return &Tunnel{Listener: sess, Port: port}, nil
}
