//go:build unix

package helper

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// startForward runs Forward with socket as a local engine's forwarder
// does, and returns its port; stop ends its stdin and checks its result.
func startForward(t *testing.T, socket string) (port int, stop func()) {
	t.Helper()
	stdin, stdinW := io.Pipe()
	stdoutR, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Forward(context.Background(), stdin, stdout, socket)
		stdout.Close()
	}()
	br := bufio.NewReader(stdoutR)
	port, err := ReadForwardPort(br)
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, br) //nolint:errcheck // ends when the forwarder closes stdout
	return port, func() {
		t.Helper()
		stdinW.Close()
		if err := <-done; err != nil {
			t.Errorf("Forward: %v", err)
		}
	}
}

func listenUnix(t *testing.T) (*net.UnixListener, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "p.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	return l, sock
}

// TestForwardHandsTheConnectionOver: with a socket, the host's
// PassListener gets the command's own TCP socket (the forwarder's end of
// it, on the forwarder's port), not a connection the forwarder copies
// into; bytes pass both ways and a half-close reaches the command. The
// end of stdin stops the forwarder.
func TestForwardHandsTheConnectionOver(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ul, sock := listenUnix(t)
	l := PassListener(ul)
	port, stop := startForward(t, sock)
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	got := acceptWithin(t, l)
	tc, ok := got.(*net.TCPConn)
	if !ok || tc.LocalAddr().String() != c.RemoteAddr().String() || tc.RemoteAddr().String() != c.LocalAddr().String() {
		t.Fatalf("the host got %T %v→%v, want the command's socket %v→%v", got, got.RemoteAddr(), got.LocalAddr(), c.LocalAddr(), c.RemoteAddr())
	}
	io.WriteString(c, "ping\n")
	line, _ := bufio.NewReader(tc).ReadString('\n')
	io.WriteString(tc, "via the host: "+line)
	tc.CloseWrite()
	back, _ := io.ReadAll(c)
	if string(back) != "via the host: ping\n" {
		t.Errorf("the command read %q", back)
	}
	c.Close()
	tc.Close()
	stop()
	l.Close()
}

// TestForwardCarriesWhatCannotBeHandedOver: a host that takes no
// descriptor answers spliceByte, and the forwarder carries the bytes over
// the Unix connection instead.
func TestForwardCarriesWhatCannotBeHandedOver(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ul, sock := listenUnix(t)
	served := make(chan struct{})
	go func() { // a host whose socket carries no descriptors
		defer close(served)
		for {
			u, err := ul.AcceptUnix()
			if err != nil {
				return
			}
			oob := make([]byte, 64)
			var b [1]byte
			_, oobn, _, _, _ := u.ReadMsgUnix(b[:], oob)
			for _, f := range parseRights(oob[:oobn]) {
				f.Close()
			}
			u.Write([]byte{spliceByte})
			line, _ := bufio.NewReader(u).ReadString('\n')
			io.WriteString(u, "via socket: "+line)
			u.Close()
		}
	}()
	port, stop := startForward(t, sock)
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "ping\n")
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "via socket: ping\n" {
		t.Errorf("got %q", got)
	}
	stop()
	ul.Close()
	<-served
}

// TestPassListenerTakesOnlyTheForwardersHandOver: a connection to the
// host's socket that passes no descriptor gets spliceByte and is served
// itself; one that says something else, or passes anything but one TCP
// socket, is closed; one that says nothing holds up no other, and Close
// ends it.
func TestPassListenerTakesOnlyTheForwardersHandOver(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ul, sock := listenUnix(t)
	l := PassListener(ul)
	dial := func() *net.UnixConn {
		t.Helper()
		u, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	silent := dial() // says nothing: must not hold up the others
	defer silent.Close()

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	refused := map[string]func(*net.UnixConn){
		"another first byte": func(u *net.UnixConn) { io.WriteString(u, "GET / HTTP/1.1\r\n\r\n") },
		"a pipe":             func(u *net.UnixConn) { u.WriteMsgUnix([]byte{passByte}, unix.UnixRights(int(pr.Fd())), nil) },
		"a Unix socket":      func(u *net.UnixConn) { u.WriteMsgUnix([]byte{passByte}, unix.UnixRights(int(fileOf(t, u).Fd())), nil) },
		"two sockets": func(u *net.UnixConn) {
			u.WriteMsgUnix([]byte{passByte}, unix.UnixRights(int(fileOf(t, u).Fd()), int(fileOf(t, u).Fd())), nil)
		},
	}
	for name, send := range refused {
		u := dial()
		send(u)
		u.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := u.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); n != 0 || err == nil || ok && ne.Timeout() {
			t.Errorf("%s: read %d, %v; want the connection closed (EOF or reset)", name, n, err)
		}
		u.Close()
	}

	plain := dial()
	defer plain.Close()
	io.WriteString(plain, string(passByte)+"hello\n")
	got := acceptWithin(t, l)
	if _, ok := got.(*net.UnixConn); !ok {
		t.Fatalf("got %T, want the Unix connection itself", got)
	}
	var answer [1]byte
	if _, err := io.ReadFull(plain, answer[:]); err != nil || answer[0] != spliceByte {
		t.Errorf("answer %q, %v; want %q", answer[:], err, spliceByte)
	}
	if line, _ := bufio.NewReader(got).ReadString('\n'); line != "hello\n" {
		t.Errorf("the host read %q", line)
	}
	got.Close()
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
}

// acceptWithin returns the next connection l accepts, failing the test
// if none comes within ten seconds.
func acceptWithin(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		ch <- accepted{c, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatal(a.err)
		}
		return a.c
	case <-time.After(10 * time.Second):
		l.Close()
		<-ch
		t.Fatal("nothing was handed over within 10s")
		return nil
	}
}

// fileOf returns a duplicate of u's descriptor, closed with the test.
func fileOf(t *testing.T, u *net.UnixConn) *os.File {
	t.Helper()
	f, err := u.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
