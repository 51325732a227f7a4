package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// The sandbox's network modes (sandbox.NetworkAsk and co.).
const (
	NetworkAsk  = sandbox.NetworkAsk
	NetworkOpen = sandbox.NetworkOpen
	NetworkNone = sandbox.NetworkNone
)

// networkMode is the Docker network mode of a sandbox network setting:
// ask and none have no network of their own.
func networkMode(n string) string {
	if n == NetworkOpen || n == "bridge" {
		return "bridge"
	}
	return "none"
}

// Egress serves the connections a sandbox in ask mode makes (the egress
// proxy, sandbox/egress).
type Egress = sandbox.Egress

// sockMount is where a local engine's container sees the directory of
// its sessions' sockets: the command channel's, and in ask mode the
// egress proxy's.
const sockMount = "/.shiro/sock"

// socketDir is the host directory of the workspace's session sockets,
// bind-mounted read-only at sockMount: a Unix socket carries a connection
// at the kernel's speed where the exec's streams go through the engine.
// Only a local engine (a unix:// host) can mount it; "" otherwise, and the
// exec's streams carry everything.
func (e *Engine) socketDir(opts Options, wsID string) string {
	if e.stateDir == "" || !e.Local() {
		return ""
	}
	return filepath.Join(e.stateDir, "sockets", workspaceVolumeKey(opts.Workspace, wsID))
}

// maxSocketPath is the longest path a Unix socket may have here (the
// kernel's limit is 108 bytes with the terminating NUL).
const maxSocketPath = 100

// tunnel is one session's forward exec and the proxy served on it.
type tunnel struct {
	t      *helper.Tunnel
	conn   client.HijackedResponse
	demux  chan struct{} // closed when the exec's output ends
	served chan struct{} // closed when Egress.Serve returns
	// sock is the session's Unix socket (local engines), removed on close.
	sock     *net.UnixListener
	sockPath string
	// trust is the environment pointing commands at the CA bundle, when
	// the proxy intercepts hosts for credentials.
	trust []string
}

// openTunnel starts `helper forward` in the container and serves eg on the
// streams it carries, or on a Unix socket in dir when dir is set.
func (e *Engine) openTunnel(ctx context.Context, c ctr, h helperFile, opts Options, stderr io.Writer, dir, session string) (*tunnel, error) {
	argv := []string{h.helperPath(), "helper", "forward"}
	var sock *net.UnixListener
	var sockPath string
	if dir != "" {
		name := "s-" + session + ".sock"
		if l, p := listenSocket(dir, name); l != nil {
			sock, sockPath = l, p
			argv = append(argv, "--socket", path.Join(sockMount, name))
		}
		// A path too long for a socket: the exec carries the connections.
	}
	ex, err := e.ctr.ExecCreate(ctx, c.id, client.ExecCreateOptions{
		User:         strconv.Itoa(opts.UID) + ":" + strconv.Itoa(opts.GID),
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          argv,
	})
	if err != nil {
		closeSock(sock, sockPath)
		return nil, fmt.Errorf("start the network forwarder in %s: %w", c.name, err)
	}
	att, err := e.ctr.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		closeSock(sock, sockPath)
		return nil, fmt.Errorf("attach the network forwarder in %s: %w", c.name, err)
	}
	pr, pw := io.Pipe()
	tu := &tunnel{conn: att.HijackedResponse, demux: make(chan struct{}), served: make(chan struct{}), sock: sock, sockPath: sockPath}
	go func() {
		defer close(tu.demux)
		_, err := stdcopy.StdCopy(pw, stderr, att.Reader)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	closeIO := func() error {
		_ = tu.conn.CloseWrite()
		return nil
	}
	var t *helper.Tunnel
	if sock != nil {
		var port int
		port, err = helper.ReadForwardPort(bufio.NewReader(pr))
		if err == nil {
			t = &helper.Tunnel{Listener: helper.PassListener(sock), Port: port}
		}
		go func() { _, _ = io.Copy(io.Discard, pr) }() // until the exec ends
	} else {
		t, err = helper.AcceptTunnel(pr, att.Conn, closeIO)
	}
	if err != nil {
		att.Close()
		<-tu.demux
		closeSock(sock, sockPath)
		return nil, fmt.Errorf("network forwarder in %s: %w", c.name, err)
	}
	tu.t = t
	if ca, ok := opts.Egress.(interface{ CACert() []byte }); ok && ca.CACert() != nil {
		if tu.trust, err = e.installTrust(ctx, c.id, ca.CACert(), opts.UID); err != nil {
			_ = t.Close()
			att.Close()
			<-tu.demux
			closeSock(sock, sockPath)
			return nil, err
		}
	}
	go func() {
		defer close(tu.served)
		_ = opts.Egress.Serve(t)
	}()
	return tu, nil
}

// listenSocket listens on the socket name in dir, for the command user
// (the socket's owner) alone; nil when that cannot be (a path too long).
func listenSocket(dir, name string) (*net.UnixListener, string) {
	p := filepath.Join(dir, name)
	if len(p) > maxSocketPath {
		return nil, ""
	}
	_ = os.Remove(p)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		return nil, ""
	}
	if err := os.Chmod(p, 0o600); err != nil {
		closeSock(l, p)
		return nil, ""
	}
	return l, p
}

func closeSock(l *net.UnixListener, p string) {
	if l != nil {
		l.Close()
		_ = os.Remove(p)
	}
}

// Port is the forwarder's port on the container's loopback.
func (tu *tunnel) Port() int { return tu.t.Port }

// Trust is the environment pointing commands at the CA bundle, if any.
func (tu *tunnel) Trust() []string { return tu.trust }

// Close ends the tunnel's session (every connection on it) and the exec.
func (tu *tunnel) Close() {
	_ = tu.t.Close()
	if tu.sock != nil {
		_ = os.Remove(tu.sockPath)
		_ = tu.conn.CloseWrite() // the forwarder stops at EOF
	}
	select {
	case <-tu.demux:
	case <-time.After(3 * time.Second):
	}
	tu.conn.Close()
	<-tu.demux
	<-tu.served
}

// containerHostname is the hostname Docker gives a container by default:
// the first 12 characters of its id.
func containerHostname(id string) string {
	if len(id) >= 12 {
		return id[:12]
	}
	return ""
}

// trustDir holds the CA bundle in the container: the image's system bundle
// and the certificate of the CA that signs for the hosts the proxy
// intercepts (for credentials; its key never leaves the host).
const trustDir = helperDir + "/ca"

// installTrust writes the CA's certificate and a bundle of the image's
// system bundle and it under trustDir, owned like the helper (not by the
// command user), and returns the environment that points clients at it.
func (e *Engine) installTrust(ctx context.Context, id string, caPEM []byte, cmdUID int) ([]string, error) {
	var system []byte
	for _, p := range sandbox.SystemBundles {
		if b, err := e.readFile(ctx, id, p); err == nil && len(b) > 0 {
			system = b
			break
		}
	}
	bundle := append(append([]byte(nil), system...), '\n')
	bundle = append(bundle, caPEM...)
	owner := 0
	if cmdUID == 0 {
		owner = nobody
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	store, err := sandbox.JavaTrustStore(bundle, now)
	if err != nil {
		return nil, fmt.Errorf("the sandbox CA's trust store for Java: %w", err)
	}
	err = tw.WriteHeader(&tar.Header{Name: "ca/", Typeflag: tar.TypeDir, Mode: 0o755, Uid: owner, Gid: owner, ModTime: now})
	for _, f := range []struct {
		name string
		data []byte
	}{{"ca/shiro-ca.pem", caPEM}, {"ca/bundle.pem", bundle}, {"ca/truststore.jks", store}, {"ca/wgetrc", sandbox.Wgetrc(trustDir + "/bundle.pem")}} {
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Uid: owner, Gid: owner, Size: int64(len(f.data)), ModTime: now})
		}
		if err == nil {
			_, err = tw.Write(f.data)
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		_, err = e.ctr.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: helperDir, Content: &buf})
	}
	if err != nil {
		return nil, fmt.Errorf("put the sandbox CA's certificate into %s: %w", short(id), err)
	}
	return sandbox.TrustEnv(trustDir+"/bundle.pem", trustDir+"/truststore.jks", trustDir+"/wgetrc"), nil
}
