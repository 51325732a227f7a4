package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// endpoint is the engine Connect reaches, as docker's CLI finds it:
// DOCKER_HOST, else the context DOCKER_CONTEXT names, else the current
// context of the CLI's configuration, else the local socket.
type endpoint struct {
	// Host is the engine's address (unix://, tcp://, ssh://); "" is the
	// local default socket.
	Host string
	// Context names the docker context Host came from.
	Context string
	// CA, Cert and Key are the context's TLS files, when it has them.
	CA, Cert, Key string
	SkipTLSVerify bool
}

// local reports whether the endpoint is on this machine (a Unix socket).
func (ep endpoint) local() bool { return ep.Host == "" || strings.HasPrefix(ep.Host, "unix://") }

// address is the engine's address for messages and Engine.Host.
func (ep endpoint) address() string {
	if ep.Host == "" {
		return client.DefaultDockerHost
	}
	return ep.Host
}

// dockerConfigDir is the CLI's configuration directory.
func dockerConfigDir() string {
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".docker")
}

// resolveEndpoint finds the engine to reach.
func resolveEndpoint() (endpoint, error) {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return endpoint{Host: h}, nil
	}
	dir := dockerConfigDir()
	name := os.Getenv("DOCKER_CONTEXT")
	if name == "" && dir != "" {
		var cfg struct {
			CurrentContext string `json:"currentContext"`
		}
		if data, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil {
			if err := json.Unmarshal(data, &cfg); err != nil {
				return endpoint{}, fmt.Errorf("read %s: %w", filepath.Join(dir, "config.json"), err)
			}
			name = cfg.CurrentContext
		}
	}
	if name == "" || name == "default" {
		return endpoint{}, nil
	}
	return contextEndpoint(dir, name)
}

// contextEndpoint reads the docker context name: its metadata lives under
// contexts/meta/<sha256 of the name>/meta.json, its TLS files under
// contexts/tls/<the same>/docker/.
func contextEndpoint(dir, name string) (endpoint, error) {
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	data, err := os.ReadFile(filepath.Join(dir, "contexts", "meta", id, "meta.json"))
	if err != nil {
		return endpoint{}, fmt.Errorf("docker context %q: %w", name, err)
	}
	var meta struct {
		Endpoints map[string]struct {
			Host          string `json:"Host"`
			SkipTLSVerify bool   `json:"SkipTLSVerify"`
		} `json:"Endpoints"`
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return endpoint{}, fmt.Errorf("docker context %q: %w", name, err)
	}
	d, ok := meta.Endpoints["docker"]
	if !ok || d.Host == "" {
		return endpoint{}, fmt.Errorf("docker context %q has no docker endpoint", name)
	}
	ep := endpoint{Host: d.Host, Context: name, SkipTLSVerify: d.SkipTLSVerify}
	tlsDir := filepath.Join(dir, "contexts", "tls", id, "docker")
	for _, f := range []struct {
		name string
		to   *string
	}{{"ca.pem", &ep.CA}, {"cert.pem", &ep.Cert}, {"key.pem", &ep.Key}} {
		if p := filepath.Join(tlsDir, f.name); fileExists(p) {
			*f.to = p
		}
	}
	return ep, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// clientOptions are the client's options for the endpoint. lastError,
// for an ssh endpoint, says what the last connection's command printed
// when it failed (the client's own error hides it).
func (ep endpoint) clientOptions() (opts []client.Opt, lastError func() string, err error) {
	opts = []client.Opt{client.WithAPIVersionFromEnv(), client.WithAPIVersionNegotiation()}
	lastError = func() string { return "" }
	if strings.HasPrefix(ep.Host, "ssh://") {
		dial, last, err := sshDialer(ep.Host)
		if err != nil {
			return nil, nil, err
		}
		// The host only names the requests; every connection is a new
		// `docker system dial-stdio` over ssh.
		return append(opts, client.WithHost("http://docker.example.com"), client.WithDialContext(dial)), last, nil
	}
	switch {
	case ep.CA != "" || ep.Cert != "":
		opts = append(opts, client.WithTLSClientConfig(ep.CA, ep.Cert, ep.Key))
	case ep.Context == "":
		opts = append(opts, client.WithTLSClientConfigFromEnv())
	}
	if ep.Host != "" {
		opts = append(opts, client.WithHost(ep.Host))
	}
	return opts, lastError, nil
}

// sshDialer reaches the engine behind an ssh:// host as docker's CLI
// does: each connection is `ssh [-l user] [-p port] -- host docker system
// dial-stdio`, its standard input and output the connection.
func sshDialer(host string) (dial func(ctx context.Context, network, addr string) (net.Conn, error), lastError func() string, err error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, nil, fmt.Errorf("DOCKER_HOST %s: %w", host, err)
	}
	if u.Hostname() == "" || (u.Path != "" && u.Path != "/") {
		return nil, nil, fmt.Errorf("DOCKER_HOST %s: want ssh://[user@]host[:port]", host)
	}
	var args []string
	if u.User != nil {
		args = append(args, "-l", u.User.Username())
	}
	if p := u.Port(); p != "" {
		args = append(args, "-p", p)
	}
	args = append(args, "--", u.Hostname(), "docker", "system", "dial-stdio")
	var mu sync.Mutex
	var last *commandConn
	dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := dialCommand(ctx, "ssh", args...)
		if err == nil {
			mu.Lock()
			last = c
			mu.Unlock()
		}
		return c, err
	}
	lastError = func() string {
		mu.Lock()
		c := last
		mu.Unlock()
		if c == nil {
			return ""
		}
		select {
		case <-c.waited:
		case <-time.After(2 * time.Second):
			return ""
		}
		if c.waitErr == nil {
			return ""
		}
		return fmt.Sprintf("ssh %s: %v: %s", strings.Join(args, " "), c.waitErr, strings.TrimSpace(c.stderr.String()))
	}
	return dial, lastError, nil
}

var _ net.Conn = (*commandConn)(nil)

// commandConn is a connection carried by a command's standard input and
// output; closing it ends the command.
type commandConn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *limitedWriter
	waited chan struct{}

	closeOnce sync.Once
	waitErr   error
}

// dialCommand starts name args as a connection. The command outlives ctx
// (ctx only bounds the start): the connection owns it and stops it on
// Close.
func dialCommand(ctx context.Context, name string, args ...string) (*commandConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &commandConn{cmd: cmd, stdin: stdin, stdout: stdout, stderr: &limitedWriter{max: 4 << 10}, waited: make(chan struct{})}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.waited)
	}()
	return c, nil
}

func (c *commandConn) Read(p []byte) (int, error) {
	n, err := c.stdout.Read(p)
	if errors.Is(err, io.EOF) {
		<-c.waited
		if c.waitErr != nil {
			return n, fmt.Errorf("%s: %v: %s", c.cmd.Path, c.waitErr, strings.TrimSpace(c.stderr.String()))
		}
	}
	return n, err
}

func (c *commandConn) Write(p []byte) (int, error) { return c.stdin.Write(p) }

// CloseWrite half-closes the connection: the command reads EOF.
func (c *commandConn) CloseWrite() error { return c.stdin.Close() }

func (c *commandConn) Close() error {
	c.closeOnce.Do(func() {
		c.stdin.Close()
		select {
		case <-c.waited:
		case <-time.After(2 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.waited
		}
	})
	return nil
}

type commandAddr string

func (a commandAddr) Network() string { return "command" }
func (a commandAddr) String() string  { return string(a) }

func (c *commandConn) LocalAddr() net.Addr              { return commandAddr("local") }
func (c *commandConn) RemoteAddr() net.Addr             { return commandAddr(c.cmd.Path) }
func (c *commandConn) SetDeadline(time.Time) error      { return nil }
func (c *commandConn) SetReadDeadline(time.Time) error  { return nil }
func (c *commandConn) SetWriteDeadline(time.Time) error { return nil }

// limitedWriter keeps the first max bytes written to it.
type limitedWriter struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (w *limitedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
