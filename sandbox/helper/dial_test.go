package helper_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

// portPair is a Client and a Serve joined by a channel: plain pipes (a
// connection's bytes travel as messages) or a Unix socket with a pass
// socket beside it (the helper hands the dialed socket over).
type portPair struct {
	c        *helper.Client
	passPath string // "" on pipes
	served   chan struct{}
}

func newPortPair(t *testing.T, pass bool) *portPair {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	p := &portPair{served: make(chan struct{})}
	opts := helper.ServeOptions{SessionID: helper.NewSessionID(), Dir: t.TempDir(), Env: sandboxtest.HostEnv(t), Reaper: helper.SelfReaper()}
	var hr io.Reader
	var hw io.WriteCloser
	var sr io.Reader
	var sw io.Writer
	var closeServe func()
	if pass {
		dir := t.TempDir()
		p.passPath = filepath.Join(dir, "p.sock")
		pl, err := net.ListenUnix("unix", &net.UnixAddr{Name: p.passPath, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		hostEnd, helperEnd := fileConn(t, fds[0]), fileConn(t, fds[1])
		opts.PassSocket = p.passPath
		hr, hw, sr, sw = hostEnd, halfCloser{hostEnd}, helperEnd, helperEnd
		closeServe = func() { helperEnd.Close() }
		p.c = helper.NewClient(hr, hw, helper.WithPassListener(pl))
		t.Cleanup(func() { hostEnd.Close() })
	} else {
		toHelper, fromHost := io.Pipe()
		toHost, fromHelper := io.Pipe()
		hr, hw, sr, sw = toHost, fromHost, toHelper, fromHelper
		closeServe = func() { fromHelper.Close(); toHelper.Close() }
		p.c = helper.NewClient(hr, hw)
	}
	go func() {
		defer close(p.served)
		if err := helper.Serve(ctx, sr, sw, opts); err != nil {
			t.Errorf("Serve: %v", err)
		}
		closeServe()
	}()
	t.Cleanup(func() {
		if err := p.c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		<-p.served
		cancel()
	})
	return p
}

func fileConn(t *testing.T, fd int) *net.UnixConn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "channel")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.UnixConn)
}

// halfCloser makes Close a half-close, as the backends' channels do.
type halfCloser struct{ *net.UnixConn }

func (h halfCloser) Close() error { return h.CloseWrite() }

// server is a TCP server on the loopback for the tests; handle runs for
// each connection on its own goroutine, all of them ended by Cleanup.
func server(t *testing.T, network string, handle func(net.Conn)) int {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "tcp6" {
		addr = "[::1]:0"
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().(*net.TCPAddr).Port
}

func echo(c net.Conn) { _, _ = io.Copy(c, c) }

// freePort is a port nothing listens on (one the kernel just gave back).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func transports(t *testing.T, f func(t *testing.T, p *portPair)) {
	for _, pass := range []bool{false, true} {
		name := "messages"
		if pass {
			name = "handed over"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, newPortPair(t, pass))
		})
	}
}

func dial(t *testing.T, p *portPair, port int) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := p.c.Dial(ctx, port)
	if err != nil {
		t.Fatalf("Dial(%d): %v", port, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes n random bytes to c while reading the echo, and checks
// the echo is the same bytes.
func roundTrip(t *testing.T, c net.Conn, n int) {
	t.Helper()
	data := make([]byte, n)
	_, _ = rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		errc <- err
	}()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read the echo: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatal("the echo differs from what was sent")
	}
}

func TestDialEcho(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, p *portPair) {
		port := server(t, "tcp", echo)
		c := dial(t, p, port)
		roundTrip(t, c, 4<<20)
		if _, ok := c.(*net.TCPConn); ok != (p.passPath != "") {
			t.Errorf("Dial returned a %T (hand-over %v)", c, p.passPath != "")
		}
	})
}

func TestDialIPv6Only(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, p *portPair) {
		// A server on [::1] alone: 127.0.0.1 refuses, the helper tries
		// [::1] next.
		port := server(t, "tcp6", echo)
		c := dial(t, p, port)
		roundTrip(t, c, 1000)
		c.Close()
	})
}

func TestDialHalfClose(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, p *portPair) {
		// The server answers once it read EOF: the client's half-close
		// must reach it while the other direction stays open.
		port := server(t, "tcp", func(c net.Conn) {
			n, _ := io.Copy(io.Discard, c)
			fmt.Fprintf(c, "got %d", n)
		})
		c := dial(t, p, port)
		if _, err := c.Write(bytes.Repeat([]byte("x"), 100000)); err != nil {
			t.Fatal(err)
		}
		cw, ok := c.(interface{ CloseWrite() error })
		if !ok {
			t.Fatalf("%T has no CloseWrite", c)
		}
		if err := cw.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "got 100000" {
			t.Fatalf("the server said %q", got)
		}
	})
}

func TestDialTwoConnections(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, p *portPair) {
		port := server(t, "tcp", echo)
		a, b := dial(t, p, port), dial(t, p, port)
		var wg sync.WaitGroup
		for _, c := range []net.Conn{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				roundTrip(t, c, 2<<20)
			}()
		}
		wg.Wait()
	})
}

func TestDialNothingListens(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, p *portPair) {
		port := freePort(t)
		start := time.Now()
		_, err := p.c.Dial(t.Context(), port)
		if !errors.Is(err, sandbox.ErrNothingListens) {
			t.Fatalf("Dial to a closed port: %v, want ErrNothingListens", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("the refusal took %v", d)
		}
		// The channel still works.
		port = server(t, "tcp", echo)
		roundTrip(t, dial(t, p, port), 10)
	})
}

func TestDialSlowReaderDoesNotStallCommands(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, p *portPair) {
		port := server(t, "tcp", func(c net.Conn) {
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		})
		c := dial(t, p, port) // never read
		_ = c
		time.Sleep(200 * time.Millisecond) // let the window fill
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var out strings.Builder
		res, err := p.c.Run(ctx, sandbox.Command{Shell: "echo hi", Stdout: &out})
		if err != nil || res.ExitCode != 0 || out.String() != "hi\n" {
			t.Fatalf("a command beside a stalled connection: %+v %v %q", res, err, out.String())
		}
		// A second connection still flows.
		roundTrip(t, dial(t, p, server(t, "tcp", echo)), 1<<20)
	})
}

func TestDialSessionCloseEndsConnections(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, p *portPair) {
		serverSaw := make(chan error, 1)
		port := server(t, "tcp", func(c net.Conn) {
			_, err := io.Copy(io.Discard, c)
			serverSaw <- err
		})
		c := dial(t, p, port)
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if err := p.c.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-serverSaw:
		case <-time.After(5 * time.Second):
			t.Fatal("the server's connection outlived the session")
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a read after the session closed: %v", err)
		}
		if _, err := p.c.Dial(t.Context(), port); !errors.Is(err, sandbox.ErrClosed) {
			t.Fatalf("Dial after Close: %v", err)
		}
	})
}

func TestDialSessionCloseWithAServerThatDoesNotRead(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, p *portPair) {
		release := make(chan struct{})
		port := server(t, "tcp", func(net.Conn) { <-release })
		t.Cleanup(func() { close(release) }) // before the server's cleanup
		c := dial(t, p, port)
		wrote := make(chan error, 1)
		go func() {
			// More than the socket buffers and the window hold: the
			// helper's write to the server gets stuck.
			_, err := c.Write(make([]byte, 64<<20))
			wrote <- err
		}()
		time.Sleep(300 * time.Millisecond)
		if err := p.c.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.served:
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not end: a connection's stuck write held the session")
		}
		select {
		case err := <-wrote:
			if err == nil {
				t.Fatal("the write went through to a server that never read")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the host's write outlived the session")
		}
	})
}

func TestListeners(t *testing.T) {
	t.Parallel()
	transports(t, func(t *testing.T, p *portPair) {
		port := server(t, "tcp", echo)
		ls, err := p.c.Listeners(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Port == port && l.Address == "127.0.0.1" {
				// The test process holds it: the helper (this process
				// too, in the test) may look at its own descriptors.
				if l.Pid == 0 || !strings.Contains(l.Command, "helper.test") {
					t.Errorf("listener %+v names no command", l)
				}
				return
			}
		}
		t.Fatalf("port %d not among %+v", port, ls)
	})
}

// sendRights connects to the pass socket and sends line with fd.
func sendRights(t *testing.T, path, line string, fd int) {
	t.Helper()
	u, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if _, _, err := u.WriteMsgUnix([]byte(line), unix.UnixRights(fd), nil); err != nil {
		t.Fatal(err)
	}
}

func TestForgedHandOverIsDropped(t *testing.T) {
	t.Parallel()
	p := newPortPair(t, true)
	accepted := make(chan struct{}, 1)
	ended := make(chan struct{})
	port := server(t, "tcp", func(c net.Conn) {
		accepted <- struct{}{}
		_, _ = io.Copy(io.Discard, c) // returns once every copy of the client's socket is closed
		close(ended)
	})
	forged, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	<-accepted
	f, err := forged.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	forged.Close()
	sendRights(t, p.passPath, helper.ChannelToken()+"\n", int(f.Fd()))
	f.Close()
	// The host dropped the socket: the server reads EOF. (Were it kept, a
	// copy would stay open.) Meanwhile a real dial works.
	c := dial(t, p, server(t, "tcp", echo))
	roundTrip(t, c, 1000)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the host kept a socket handed over with a token of no dial")
	}
}

// fakeDialHelper answers the dials on the host→helper stream r itself: for
// each it sends what hand(token) returns on the pass socket, then
// dialed {pass: true}.
func fakeDialHelper(t *testing.T, r io.Reader, w io.Writer, hand func(token string)) {
	dec := json.NewDecoder(r)
	enc := json.NewEncoder(w)
	for {
		var m helper.Message
		if err := dec.Decode(&m); err != nil {
			return
		}
		if m.Type == helper.TypeDial {
			hand(m.Token)
			_ = enc.Encode(helper.Message{ID: m.ID, Type: helper.TypeDialed, Pass: true})
		}
	}
}

func TestHandOverOfTheWrongSocketFailsTheDial(t *testing.T) {
	t.Parallel()
	otherPort := server(t, "tcp", echo)
	cases := []struct {
		name string
		fd   func(t *testing.T) int
	}{
		{"a Unix socket", func(t *testing.T) int {
			fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Close(fds[0]); syscall.Close(fds[1]) })
			return fds[0]
		}},
		{"a TCP socket to another port", func(t *testing.T) int {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", otherPort))
			if err != nil {
				t.Fatal(err)
			}
			f, err := c.(*net.TCPConn).File()
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			t.Cleanup(func() { f.Close() })
			return int(f.Fd())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "p.sock")
			pl, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			toHelper, fromHost := io.Pipe()
			toHost, fromHelper := io.Pipe()
			c := helper.NewClient(toHost, fromHost, helper.WithPassListener(pl))
			done := make(chan struct{})
			go func() {
				defer close(done)
				fakeDialHelper(t, toHelper, fromHelper, func(token string) { sendRights(t, path, token+"\n", tc.fd(t)) })
				fromHelper.Close()
			}()
			defer func() {
				c.Close()
				<-done
			}()
			start := time.Now()
			conn, err := c.Dial(t.Context(), freePort(t))
			if err == nil {
				conn.Close()
				t.Fatalf("Dial took %s handed over with the dial's token", tc.name)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the dial failed after %v", d)
			}
			t.Logf("%v", err)
		})
	}
}
