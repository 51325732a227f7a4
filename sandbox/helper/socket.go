package helper

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// On a local engine the command channel need not go through the engine.
// The host listens on a Unix socket in a directory bind-mounted read-only
// into the container, starts `helper serve --channel <socket>` and writes
// a token on the exec's stdin; serve reads it, connects to the socket and
// sends it back, and the session's messages then go over that connection,
// through the kernel alone, where the exec's streams pass through the
// engine and the container's shim (about 0.4 ms each way, under load, on
// the machine of decision 26). The token tells serve's connection from any
// other a process in the container could make to the socket. Where the
// socket cannot be reached (an engine that runs in a VM), serve writes
// SocketRefused on its stdout and serves there, as without --channel.

// ChannelToken returns a new token for a socket channel.
func ChannelToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SocketRefused is the line serve writes on its stdout when it could not
// use the socket and serves on its standard streams instead.
const SocketRefused = `{"id":0,"type":"log","error":"the channel's socket is out of reach: serving on stdin and stdout"}`

// channelSendBuffer is the helper's send buffer on a socket channel (the
// kernel doubles it).
const channelSendBuffer = 16 << 10

// maxTokenLine bounds the token line either side reads.
const maxTokenLine = 128

// DialChannel is serve's side: it reads the token line from in, connects
// to the socket at path and sends the token. It reads in one byte at a
// time, so that nothing after the line is consumed: when it fails, the
// caller serves on in (after writing SocketRefused).
func DialChannel(in io.Reader, path string) (*net.UnixConn, error) {
	token, err := readLine(in)
	if err != nil {
		return nil, fmt.Errorf("read the channel's token: %w", err)
	}
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("connect to the channel's socket: %w", err)
	}
	uc := c.(*net.UnixConn)
	// What the kernel queues ahead of a message is what a short
	// command's exit waits behind when another command streams output:
	// a small send buffer keeps that wait short (the host reads the
	// queue at tens of MiB/s), and costs a streaming command little.
	_ = uc.SetWriteBuffer(channelSendBuffer)
	if _, err := io.WriteString(uc, token+"\n"); err != nil {
		uc.Close()
		return nil, fmt.Errorf("send the channel's token: %w", err)
	}
	return uc, nil
}

// serveChannel runs Serve on the socket channel at path (DialChannel), or
// on in and out when path is "" or the socket is out of reach (after
// saying so on out, and why on errw).
func serveChannel(ctx context.Context, in io.Reader, out, errw io.Writer, path string, opts ServeOptions) error {
	if path == "" {
		return Serve(ctx, in, out, opts)
	}
	c, err := DialChannel(in, path)
	if err != nil {
		fmt.Fprintf(errw, "shiro helper serve: %v\n", err)
		if _, err := io.WriteString(out, SocketRefused+"\n"); err != nil {
			return err
		}
		return Serve(ctx, in, out, opts)
	}
	defer c.Close()
	return Serve(ctx, c, c, opts)
}

// readLine reads up to a newline, byte by byte.
func readLine(r io.Reader) (string, error) {
	var line []byte
	var b [1]byte
	for len(line) < maxTokenLine {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", err
		}
		if b[0] == '\n' {
			return string(line), nil
		}
		line = append(line, b[0])
	}
	return "", errors.New("line too long")
}

// tokenWait bounds how long a connection to the socket may take to send
// its token line.
const tokenWait = 10 * time.Second

// AcceptChannel is the host's side: it returns the first connection on l
// that sends token, closing any other; each one's line is read on its own
// goroutine, so a connection that says nothing holds up no other. It
// returns when one matched, ctx ended or l failed, and closes l before it
// returns (nothing more is to connect), once every goroutine it started
// has stopped.
func AcceptChannel(ctx context.Context, l *net.UnixListener, token string) (*net.UnixConn, error) {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		closed  bool
		pending = map[*net.UnixConn]struct{}{}
		won     = make(chan *net.UnixConn, 1)
		failed  = make(chan error, 1)
	)
	defer func() {
		_ = l.Close()
		mu.Lock()
		closed = true
		for c := range pending {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
		select {
		case c := <-won: // it matched as ctx ended
			_ = c.Close()
		default:
		}
	}()
	wg.Add(1)
	go func() { // ends when l is closed
		defer wg.Done()
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				failed <- err
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				_ = c.Close()
				continue
			}
			pending[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = c.SetReadDeadline(time.Now().Add(tokenWait))
				line, err := readLine(c)
				ok := err == nil && subtle.ConstantTimeCompare([]byte(line), []byte(token)) == 1
				mu.Lock()
				delete(pending, c)
				mu.Unlock()
				if ok {
					_ = c.SetReadDeadline(time.Time{})
					select {
					case won <- c:
						return
					default: // another won: the token came twice
					}
				}
				_ = c.Close()
			}()
		}
	}()
	select {
	case c := <-won:
		return c, nil
	case err := <-failed:
		return nil, fmt.Errorf("accept the channel's connection: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
