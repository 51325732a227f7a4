package docker

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// The sandbox's network modes.
const (
	// NetworkAsk: no network of the container's own; every connection goes
	// through the egress proxy on the host, host by host.
	NetworkAsk = "ask"
	// NetworkOpen: Docker's bridge network ("bridge" is another name).
	NetworkOpen = "open"
	// NetworkNone: no network at all.
	NetworkNone = "none"
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
type Egress interface {
	// Serve answers proxy requests on l until l is closed.
	Serve(l net.Listener) error
	// Register names the tool call of a command: its proxy URL carries the
	// token, release forgets it.
	Register(c sandbox.Caller) (token string, release func())
}

// tunnel is one session's forward exec and the proxy served on it.
type tunnel struct {
	t      *helper.Tunnel
	conn   client.HijackedResponse
	demux  chan struct{} // closed when the exec's output ends
	served chan struct{} // closed when Egress.Serve returns
}

// openTunnel starts `helper forward` in the container and serves eg on the
// streams it carries.
func (e *Engine) openTunnel(ctx context.Context, c ctr, h helperFile, opts Options, stderr io.Writer) (*tunnel, error) {
	ex, err := e.ctr.ExecCreate(ctx, c.id, client.ExecCreateOptions{
		User:         strconv.Itoa(opts.UID) + ":" + strconv.Itoa(opts.GID),
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          []string{h.helperPath(), "helper", "forward"},
	})
	if err != nil {
		return nil, fmt.Errorf("start the network forwarder in %s: %w", c.name, err)
	}
	att, err := e.ctr.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("attach the network forwarder in %s: %w", c.name, err)
	}
	pr, pw := io.Pipe()
	tu := &tunnel{conn: att.HijackedResponse, demux: make(chan struct{}), served: make(chan struct{})}
	go func() {
		defer close(tu.demux)
		_, err := stdcopy.StdCopy(pw, stderr, att.Reader)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	t, err := helper.AcceptTunnel(pr, att.Conn, func() error {
		_ = tu.conn.CloseWrite()
		return nil
	})
	if err != nil {
		att.Close()
		<-tu.demux
		return nil, fmt.Errorf("network forwarder in %s: %w", c.name, err)
	}
	tu.t = t
	go func() {
		defer close(tu.served)
		_ = opts.Egress.Serve(t)
	}()
	return tu, nil
}

// close ends the tunnel's session (every connection on it) and the exec.
func (tu *tunnel) close() {
	_ = tu.t.Close()
	select {
	case <-tu.demux:
	case <-time.After(3 * time.Second):
	}
	tu.conn.Close()
	<-tu.demux
	<-tu.served
}

// proxyEnv is the environment that points a command at the forwarder:
// both spellings of each proxy variable, the token naming its tool call,
// and the loopback and the container's own name kept direct.
func proxyEnv(port int, token, hostname string) []string {
	u := "http://shiro:" + token + "@127.0.0.1:" + strconv.Itoa(port)
	direct := []string{"localhost", "127.0.0.1", "::1", "127.0.0.0/8"}
	if hostname != "" {
		direct = append(direct, hostname)
	}
	no := strings.Join(direct, ",")
	var env []string
	for _, kv := range [][2]string{{"HTTP_PROXY", u}, {"HTTPS_PROXY", u}, {"ALL_PROXY", u}, {"NO_PROXY", no}} {
		env = append(env, kv[0]+"="+kv[1], strings.ToLower(kv[0])+"="+kv[1])
	}
	return env
}

// containerHostname is the hostname Docker gives a container by default:
// the first 12 characters of its id.
func containerHostname(id string) string {
	if len(id) >= 12 {
		return id[:12]
	}
	return ""
}
