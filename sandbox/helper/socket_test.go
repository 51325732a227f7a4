package helper

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/sandbox"
)

// halfCloser is the host's writer on a socket channel: Close half-closes,
// so the helper reads EOF while its last messages still arrive.
type halfCloser struct{ *net.UnixConn }

func (h halfCloser) Close() error { return h.CloseWrite() }

func echoThrough(t *testing.T, c *Client) {
	t.Helper()
	var out bytes.Buffer
	res, err := c.Run(t.Context(), sandbox.Command{Args: []string{"echo", "through the channel"}, Stdout: &out})
	if err != nil || res.ExitCode != 0 || out.String() != "through the channel\n" {
		t.Fatalf("Run = %+v, %v, output %q", res, err, out.String())
	}
}

// TestServeOverTheSocket: serve reads the token from its stdin, connects
// to the socket and sends it; the host takes that connection, and the
// session's messages go over it, none over serve's stdout. The end of the
// host's writing ends the session.
func TestServeOverTheSocket(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "c.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	token := ChannelToken()
	var stdout, stderr bytes.Buffer // read once serve returned
	done := make(chan error, 1)
	go func() {
		done <- serveChannel(context.Background(), strings.NewReader(token+"\n"), &stdout, &stderr, sock, ServeOptions{SessionID: NewSessionID(), Dir: t.TempDir()})
	}()
	conn, err := AcceptChannel(t.Context(), l, token)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(conn, halfCloser{conn})
	echoThrough(t, c)
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	conn.Close()
	if stdout.String() != "" || stderr.String() != "" {
		t.Errorf("serve wrote on its stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// TestServeOnItsStreamsWhenTheSocketIsOutOfReach: a socket serve cannot
// connect to makes it say so in its first line on stdout and serve on its
// stdin and stdout, the rest of stdin after the token line intact.
func TestServeOnItsStreamsWhenTheSocketIsOutOfReach(t *testing.T) {
	t.Parallel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer // read once serve returned
	done := make(chan error, 1)
	go func() {
		done <- serveChannel(context.Background(), inR, outW, &stderr, filepath.Join(t.TempDir(), "missing.sock"), ServeOptions{SessionID: NewSessionID(), Dir: t.TempDir()})
		outW.Close()
	}()
	if _, err := io.WriteString(inW, ChannelToken()+"\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(outR)
	line, err := br.ReadString('\n')
	if err != nil || line != SocketRefused+"\n" {
		t.Fatalf("first line %q, %v; want %q", line, err, SocketRefused)
	}
	c := NewClient(br, inW)
	echoThrough(t, c)
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	if !strings.Contains(stderr.String(), "connect to the channel's socket") {
		t.Errorf("stderr %q does not say why", stderr.String())
	}
}

// TestAcceptChannelTakesOnlyTheToken: a connection with another token is
// closed, one that says nothing holds up no other, and the one with the
// token is returned; the listener is closed after. With no such
// connection, the context's end returns, and nothing is left running.
func TestAcceptChannelTakesOnlyTheToken(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	listen := func(name string) (*net.UnixListener, string) {
		t.Helper()
		p := filepath.Join(dir, name)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		return l, p
	}
	dial := func(p string) *net.UnixConn {
		t.Helper()
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	l, p := listen("c.sock")
	token := ChannelToken()
	silent := dial(p)
	defer silent.Close()
	wrong := dial(p)
	defer wrong.Close()
	io.WriteString(wrong, ChannelToken()+"\n")
	right := dial(p)
	defer right.Close()
	io.WriteString(right, token+"\n")

	got, err := AcceptChannel(t.Context(), l, token)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	got.Write([]byte("x"))
	right.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b := make([]byte, 1); func() bool { n, _ := right.Read(b); return n != 1 }() {
		t.Error("the connection returned is not the one that sent the token")
	}
	wrong.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := wrong.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the wrong token's connection: read %d, %v; want it closed", n, err)
	}
	if _, err := net.Dial("unix", p); err == nil {
		t.Error("the listener still accepts")
	}

	l2, _ := listen("c2.sock")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := AcceptChannel(ctx, l2, token); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("without the token: %v, want the context's deadline", err)
	}
}
