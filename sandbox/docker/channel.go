package docker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox/helper"
)

// channel is one long-lived exec of the helper carrying every command of a
// session: over a Unix socket in the session sockets directory on a local
// engine (helper.DialChannel), over the exec's stdin and stdout otherwise.
type channel struct {
	client *helper.Client
	conn   client.HijackedResponse
	sock   *net.UnixConn // nil when the exec's streams carry the messages
	demux  chan struct{} // closed when the output demultiplexer stops
	// passPath is the session's pass socket (the client owns its
	// listener), removed on close; "" without one.
	passPath string
}

// defaultPath is the PATH of an image that sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Login shells (bash -l) read /etc/profile, which on Debian and Alpine
// resets PATH and so loses what the image's ENV PATH added (a toolchain in
// /usr/local/go/bin, ~/.cargo/bin...). A script in /etc/profile.d, which
// /etc/profile runs after the reset, puts back the PATH the command was
// started with (SHIRO_PATH).
const (
	profilePathScript  = "profile.d/00-shiro-path.sh" // under /etc
	profilePathContent = "# Written by shiro: a login shell keeps the PATH of the image and of --env.\n" +
		"if [ -n \"${SHIRO_PATH-}\" ]; then PATH=$SHIRO_PATH; export PATH; fi\n"
)

// envValue returns the last value of name in env.
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// baseEnv is the environment every command starts from. PATH is the
// image's (imagePath), or defaultPath, unless the user's entries set it.
func baseEnv(opts Options, imagePath string) []string {
	path := imagePath
	if p := envValue(opts.Env, "PATH"); p != "" {
		path = p
	}
	if path == "" {
		path = defaultPath
	}
	env := []string{
		"PATH=" + path,
		"SHIRO_PATH=" + path,
		"HOME=" + homeDir,
		"LANG=C.UTF-8",
		"TERM=dumb",
		"SHIRO_SANDBOX=docker",
	}
	if name := opts.UserName; name != "" {
		env = append(env, "USER="+name, "LOGNAME="+name)
	}
	return append(env, opts.Env...)
}

// channelWait bounds how long a new channel may take to say which way it
// carries the messages (the helper's start, on a loaded machine).
const channelWait = 30 * time.Second

// openChannel starts `helper serve` in the container and connects a client
// to it, over a socket in dir when dir is set (see helper.DialChannel).
// stderr receives the helper's own diagnostics.
func (e *Engine) openChannel(ctx context.Context, c ctr, h helperFile, opts Options, session string, stderr io.Writer, serveArgs []string, dir string) (*channel, error) {
	argv := append([]string{h.helperPath(), "helper", "serve", "--session", session}, serveArgs...)
	var sock, pass *net.UnixListener
	var sockPath, passPath string
	if dir != "" {
		name := "c-" + session + ".sock"
		if sock, sockPath = listenSocket(dir, name); sock != nil {
			argv = append(argv, "--channel", path.Join(sockMount, name))
			defer closeSock(sock, sockPath) // once connected, nothing more is to connect
			// Published ports' connections: the helper hands each dialed
			// socket over this one, so that the host splices it itself.
			pname := "p-" + session + ".sock"
			if pass, passPath = listenSocket(dir, pname); pass != nil {
				argv = append(argv, "--pass", path.Join(sockMount, pname))
			}
		}
	}
	handed := false // the client owns pass
	defer func() {
		if !handed {
			closeSock(pass, passPath)
		}
	}()
	exec, err := e.ctr.ExecCreate(ctx, c.id, client.ExecCreateOptions{
		User:         strconv.Itoa(opts.UID) + ":" + strconv.Itoa(opts.GID),
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Env:          baseEnv(opts, c.path),
		WorkingDir:   opts.Workspace,
		Cmd:          argv,
	})
	if err != nil {
		return nil, fmt.Errorf("start the command channel in %s: %w", c.name, err)
	}
	att, err := e.ctr.ExecAttach(ctx, exec.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("attach the command channel in %s: %w", c.name, err)
	}
	pr, pw := io.Pipe()
	ch := &channel{conn: att.HijackedResponse, demux: make(chan struct{})}
	go func() {
		defer close(ch.demux)
		_, err := stdcopy.StdCopy(pw, stderr, att.Reader)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	var copts []helper.ClientOption
	if pass != nil {
		copts = append(copts, helper.WithPassListener(pass))
		ch.passPath = passPath
	}
	if sock == nil {
		ch.client, handed = helper.NewClient(pr, closeWriter{&ch.conn}, copts...), true
		return ch, nil
	}
	out := bufio.NewReader(pr)
	conn, err := ch.connect(ctx, sock, out)
	if err != nil {
		att.Close()
		<-ch.demux
		return nil, fmt.Errorf("connect to the command channel in %s: %w", c.name, err)
	}
	if conn == nil { // the helper serves on the exec's streams
		ch.client, handed = helper.NewClient(out, closeWriter{&ch.conn}, copts...), true
		return ch, nil
	}
	ch.sock = conn
	ch.client, handed = helper.NewClient(conn, sockCloser{conn}, copts...), true
	return ch, nil
}

// connect sends the helper the token on its stdin and waits for its
// connection on sock, or for the line that says it serves on its stdout
// (conn is nil then; out is left at the first message).
func (ch *channel) connect(ctx context.Context, sock *net.UnixListener, out *bufio.Reader) (*net.UnixConn, error) {
	token := helper.ChannelToken()
	if _, err := io.WriteString(ch.conn.Conn, token+"\n"); err != nil {
		return nil, fmt.Errorf("send the token: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, channelWait)
	defer cancel()
	refused := make(chan error, 1)
	go func() { // ends at the helper's line, or with the exec's output
		line, err := out.ReadString('\n')
		fallback := err == nil && strings.TrimSuffix(line, "\n") == helper.SocketRefused
		if err == nil && !fallback {
			err = fmt.Errorf("the helper wrote %q on its stdout", line)
		}
		refused <- err // nil: the client reads out from here on
		cancel()       // no connection is coming (once connect returned, a no-op)
		if !fallback {
			_, _ = io.Copy(io.Discard, out) // the helper's stdout is not the channel
		}
	}()
	conn, err := helper.AcceptChannel(ctx, sock, token)
	if err == nil {
		return conn, nil
	}
	select {
	case err := <-refused:
		return nil, err
	default:
		return nil, err // ctx's: the output reader stops with the exec
	}
}

// Client is the helper's client on the channel.
func (ch *channel) Client() *helper.Client { return ch.client }

// Close ends the session: the helper sees EOF on its channel, kills every
// process the session started and exits.
func (ch *channel) Close() {
	if ch.sock != nil {
		_ = ch.sock.CloseWrite()
	}
	_ = ch.conn.CloseWrite()
	select {
	case <-ch.demux:
	case <-time.After(3 * time.Second):
	}
	ch.conn.Close()
	<-ch.demux
	ch.client.Close() //nolint:errcheck // its writer is already half-closed; nothing new to report
	if ch.sock != nil {
		_ = ch.sock.Close()
	}
	if ch.passPath != "" {
		_ = os.Remove(ch.passPath) // the client closed the listener
	}
}

// closeWriter turns Close into a half-close of the hijacked connection, so
// the helper reads EOF while its last messages can still arrive.
type closeWriter struct{ h *client.HijackedResponse }

func (w closeWriter) Write(p []byte) (int, error) { return w.h.Conn.Write(p) }
func (w closeWriter) Close() error {
	_ = w.h.CloseWrite() // a second close, or one after the conn died, changes nothing
	return nil
}

// sockCloser turns Close into a half-close of the channel's socket, so the
// helper reads EOF while its last messages can still arrive.
type sockCloser struct{ *net.UnixConn }

func (w sockCloser) Close() error {
	_ = w.CloseWrite()
	return nil
}
