package publish_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/publish"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dialer is a sandbox whose ports are listeners of the test on 127.0.0.1:
// DialPort(port) dials ports[port], and a port it does not know is
// sandbox.ErrNothingListens, as the backends say it.
type dialer struct {
	ports map[int]string
	dials atomic.Int32
}

func (d *dialer) DialPort(ctx context.Context, port int) (net.Conn, error) {
	d.dials.Add(1)
	addr, ok := d.ports[port]
	if !ok {
		return nil, fmt.Errorf("dial port %d: %w", port, sandbox.ErrNothingListens)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", addr)
}

// serve listens on 127.0.0.1 and runs handle for each connection until the
// test ends.
func serve(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func newPublisher(t *testing.T, sb func(context.Context) (sandbox.PortDialer, error), notice func(string)) *publish.Publisher {
	t.Helper()
	p := publish.New(publish.Options{Sandbox: sb, Notice: notice})
	t.Cleanup(func() { p.Close() })
	return p
}

func fixed(d sandbox.PortDialer) func(context.Context) (sandbox.PortDialer, error) {
	return func(context.Context) (sandbox.PortDialer, error) { return d, nil }
}

func add(t *testing.T, p *publish.Publisher, container int) publish.Port {
	t.Helper()
	pt, err := p.Add(publish.Mapping{ContainerPort: container})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pt.Address, "127.0.0.1:") || pt.HostPort == 0 {
		t.Fatalf("port %+v: want a port on 127.0.0.1", pt)
	}
	return pt
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c.(*net.TCPConn)
}

func TestTwoConnectionsAtOnce(t *testing.T) {
	// The server answers no connection before it has two open at once.
	var mu sync.Mutex
	both := make(chan struct{})
	n := 0
	addr := serve(t, func(c net.Conn) {
		mu.Lock()
		n++
		if n == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-time.After(10 * time.Second):
			return
		}
		line := make([]byte, 5)
		if _, err := io.ReadFull(c, line); err != nil {
			return
		}
		c.Write(bytes.ToUpper(line))
	})
	p := newPublisher(t, fixed(&dialer{ports: map[int]string{3000: addr}}), nil)
	pt := add(t, p, 3000)

	a, b := dial(t, pt.Address), dial(t, pt.Address)
	for i, c := range []net.Conn{a, b} {
		fmt.Fprintf(c, "conn%d", i)
	}
	for i, c := range []net.Conn{a, b} {
		got := make([]byte, 5)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if want := fmt.Sprintf("CONN%d", i); string(got) != want {
			t.Errorf("connection %d read %q, want %q", i, got, want)
		}
	}
	if l := p.List(); len(l) != 1 || l[0].Conns != 2 || l[0].ContainerPort != 3000 {
		t.Errorf("List() = %+v, want one port with 2 connections", l)
	}
}

func TestIntegrityBothWaysAndHalfClose(t *testing.T) {
	up := make([]byte, 4<<20)
	down := make([]byte, 3<<20)
	rand.Read(up)
	rand.Read(down)
	// The server sends down while it reads what comes up; once the
	// client's half-close arrives it sends the hash of what it read.
	addr := serve(t, func(c net.Conn) {
		var wg sync.WaitGroup
		wg.Go(func() { c.Write(down) })
		h := sha256.New()
		if _, err := io.Copy(h, c); err != nil {
			return
		}
		wg.Wait()
		c.Write(h.Sum(nil))
	})
	p := newPublisher(t, fixed(&dialer{ports: map[int]string{8000: addr}}), nil)
	pt := add(t, p, 8000)

	c := dial(t, pt.Address)
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		if _, werr = c.Write(up); werr == nil {
			werr = c.CloseWrite()
		}
	})
	got, err := io.ReadAll(c)
	wg.Wait()
	if err != nil || werr != nil {
		t.Fatalf("read: %v, write: %v", err, werr)
	}
	sum := sha256.Sum256(up)
	if len(got) != len(down)+len(sum) {
		t.Fatalf("read %d bytes, want %d", len(got), len(down)+len(sum))
	}
	if !bytes.Equal(got[:len(down)], down) {
		t.Error("the bytes from the sandbox differ from those it sent")
	}
	if !bytes.Equal(got[len(down):], sum[:]) {
		t.Error("the sandbox read other bytes than the host sent")
	}
}

func TestNothingListens(t *testing.T) {
	var mu sync.Mutex
	var notices []string
	d := &dialer{}
	p := newPublisher(t, fixed(d), func(s string) { mu.Lock(); notices = append(notices, s); mu.Unlock() })
	pt := add(t, p, 3000)

	// A browser's retries: each gets a clean end (EOF, not a reset), not
	// a hang, and the user hears once.
	for i := range 3 {
		c := dial(t, pt.Address)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		start := time.Now()
		n, err := c.Read(make([]byte, 10))
		if n != 0 || err != io.EOF {
			t.Fatalf("try %d: read %d bytes, %v; want a clean close (EOF)", i, n, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("try %d: closed after %s", i, d)
		}
		c.Close()
	}
	if d.dials.Load() != 3 {
		t.Errorf("%d dials, want 3", d.dials.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	want := "nothing listens on port 3000 in the sandbox (published at " + pt.Address + ")"
	if len(notices) != 1 || notices[0] != want {
		t.Errorf("notices %q, want one: %q", notices, want)
	}
}

func TestSandboxGone(t *testing.T) {
	notices := make(chan string, 10)
	p := newPublisher(t, func(context.Context) (sandbox.PortDialer, error) {
		return nil, errors.New("the session is closing")
	}, func(s string) { notices <- s })
	pt := add(t, p, 3000)
	c := dial(t, pt.Address)
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read %d, %v; want EOF", n, err)
	}
	if got := <-notices; !strings.Contains(got, "port 3000") || !strings.Contains(got, "the session is closing") {
		t.Errorf("notice %q names neither the port nor the cause", got)
	}
}

func TestHostPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	p := newPublisher(t, fixed(&dialer{}), nil)
	_, err = p.Add(publish.Mapping{HostPort: taken, ContainerPort: 3000})
	if !errors.Is(err, publish.ErrHostPortInUse) {
		t.Fatalf("Add on a taken port: %v, want ErrHostPortInUse", err)
	}
	if want := "127.0.0.1:" + strconv.Itoa(taken); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
	if l := p.List(); len(l) != 0 {
		t.Errorf("List() = %+v after a failed Add", l)
	}
	// The same host port twice in one publisher.
	pt := add(t, p, 3000)
	if _, err := p.Add(publish.Mapping{HostPort: pt.HostPort, ContainerPort: 4000}); err == nil || !strings.Contains(err.Error(), "published already") {
		t.Errorf("a second Add of host port %d: %v", pt.HostPort, err)
	}
}

// held is a server that keeps every connection open until the test ends.
func held(t *testing.T) string {
	stop := make(chan struct{})
	addr := serve(t, func(c net.Conn) {
		c.Write([]byte("hi"))
		<-stop
	})
	t.Cleanup(func() { close(stop) })
	return addr
}

func TestRemoveEndsConnectionsAndListener(t *testing.T) {
	for _, how := range []string{"Remove", "Close"} {
		t.Run(how, func(t *testing.T) {
			p := newPublisher(t, fixed(&dialer{ports: map[int]string{3000: held(t)}}), nil)
			pt := add(t, p, 3000)
			c := dial(t, pt.Address)
			if _, err := io.ReadFull(c, make([]byte, 2)); err != nil {
				t.Fatal(err)
			}
			if how == "Remove" {
				if err := p.Remove(pt.HostPort); err != nil {
					t.Fatal(err)
				}
				if err := p.Remove(pt.HostPort); !errors.Is(err, publish.ErrNotPublished) {
					t.Errorf("a second Remove: %v", err)
				}
			} else {
				p.Close()
				if _, err := p.Add(publish.Mapping{ContainerPort: 3000}); !errors.Is(err, publish.ErrClosed) {
					t.Errorf("Add after Close: %v", err)
				}
			}
			// The open connection ends at once, the server still holding it.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, syscall.ETIMEDOUT) || isTimeout(err) {
				t.Errorf("read after %s: %v, want the connection ended", how, err)
			}
			if _, err := net.DialTimeout("tcp", pt.Address, 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("dial after %s: %v, want refused", how, err)
			}
			if l := p.List(); len(l) != 0 {
				t.Errorf("List() = %+v", l)
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestReplacedSandbox(t *testing.T) {
	name := func(s string) string {
		return serve(t, func(c net.Conn) { io.WriteString(c, s) })
	}
	first := &dialer{ports: map[int]string{3000: name("first")}}
	second := &dialer{ports: map[int]string{3000: name("second")}}
	var current atomic.Pointer[dialer]
	current.Store(first)
	p := newPublisher(t, func(context.Context) (sandbox.PortDialer, error) { return current.Load(), nil }, nil)
	pt := add(t, p, 3000)
	read := func() string {
		b, err := io.ReadAll(dial(t, pt.Address))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(); got != "first" {
		t.Fatalf("before: %q", got)
	}
	current.Store(second)
	if got := read(); got != "second" {
		t.Errorf("after the sandbox was replaced: %q, want the new one", got)
	}
}

func TestParseMapping(t *testing.T) {
	t.Parallel()
	good := map[string]publish.Mapping{
		"8080:3000":   {HostPort: 8080, ContainerPort: 3000},
		"3000":        {HostPort: 3000, ContainerPort: 3000},
		" 1:65535 ":   {HostPort: 1, ContainerPort: 65535},
		"65535:65535": {HostPort: 65535, ContainerPort: 65535},
	}
	for in, want := range good {
		if got, err := publish.ParseMapping(in); err != nil || got != want {
			t.Errorf("ParseMapping(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":                 "empty",
		"0:3000":           "host port: 0 is out of range",
		"8080:70000":       "container port: 70000 is out of range",
		"http":             `"http" is not a number`,
		"8080:":            "container port: missing",
		":3000":            "host port: missing",
		"127.0.0.1:80:80":  "--publish-address",
		"-1":               "out of range",
		"8080:3000/udp":    "not a number",
		"99999999999999:1": "out of range",
	}
	for in, want := range bad {
		if _, err := publish.ParseMapping(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMapping(%q): %v, want an error with %q", in, err, want)
		}
	}
	if _, err := publish.ParseMappings([]string{"8080:3000", "9000", "8080:4000"}); err == nil || !strings.Contains(err.Error(), "host port 8080 is published twice") {
		t.Errorf("a duplicate host port: %v", err)
	}
	if ms, err := publish.ParseMappings([]string{"8080:3000", "8081:3000"}); err != nil || len(ms) != 2 {
		t.Errorf("one container port at two host ports: %v, %v", ms, err)
	}
}

func TestCheckAddress(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"127.0.0.1", "::1", "127.0.0.2"} {
		if w, err := publish.CheckAddress(a); w != "" || err != nil {
			t.Errorf("CheckAddress(%q) = %q, %v; want quiet", a, w, err)
		}
	}
	for _, a := range []string{"0.0.0.0", "192.168.1.5", "::"} {
		if w, err := publish.CheckAddress(a); err != nil || !strings.Contains(w, "other machines") {
			t.Errorf("CheckAddress(%q) = %q, %v; want a warning", a, w, err)
		}
	}
	if _, err := publish.CheckAddress("localhost"); err == nil {
		t.Error("CheckAddress(localhost): want an error (an IP address)")
	}
}
