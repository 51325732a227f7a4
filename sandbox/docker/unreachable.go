package docker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// UnreachableError says which engine could not be reached, why, and what
// to do about it.
type UnreachableError struct {
	Host string
	Err  error
	// Why names the cause found by looking at the endpoint after the
	// client failed (a missing socket, permission denied on it, a remote
	// that refused, TLS); "" when none was found.
	Why string
	// Fix is what to do about that cause.
	Fix string
}

func (e *UnreachableError) Error() string {
	dh := e.hostSetting()
	why := e.Why
	if why == "" {
		why = e.Err.Error()
	}
	return fmt.Sprintf("cannot reach the Docker engine (DOCKER_HOST=%s): %s. Fix: %s. Or, only in a repository you trust, run with --no-sandbox: it gives up the isolation, so commands (and anything the repository makes them run) run on this machine as you.", dh, why, e.FixText())
}

// hostSetting is DOCKER_HOST as the user set it, or what its absence
// means.
func (e *UnreachableError) hostSetting() string {
	if dh := os.Getenv("DOCKER_HOST"); dh != "" {
		return dh
	}
	return "unset, so " + e.Host
}

// FixText is the fix for the cause, or the general one when no cause was
// found.
func (e *UnreachableError) FixText() string {
	if e.Fix != "" {
		return e.Fix
	}
	return "start Docker, or point DOCKER_HOST (or a docker context) at a running engine"
}

func (e *UnreachableError) Unwrap() []error { return []error{ErrEngineUnreachable, e.Err} }

// probeTimeout bounds each look at the endpoint.
const probeTimeout = 3 * time.Second

// diagnose looks at the endpoint the client could not talk to (err is
// the client's error) and says why, and the fix: the client's own errors
// often hide it ("Is the docker daemon running?" for a refused TCP
// connection, the same for a TLS engine asked in plain HTTP).
func diagnose(ctx context.Context, ep endpoint, err error) (why, fix string) {
	host := ep.address()
	switch {
	case strings.HasPrefix(host, "unix://"):
		return diagnoseSocket(ctx, strings.TrimPrefix(host, "unix://"))
	case strings.HasPrefix(host, "tcp://"), strings.HasPrefix(host, "https://"), strings.HasPrefix(host, "http://"):
		u, perr := url.Parse(host)
		if perr != nil || u.Host == "" {
			return "", ""
		}
		return diagnoseTCP(ctx, ep, u.Host, err)
	case strings.HasPrefix(host, "ssh://"):
		return "", "check that `ssh " + strings.TrimPrefix(host, "ssh://") + " docker version` works (the key, the host, Docker on it)"
	}
	return "", ""
}

// diagnoseSocket: a local engine's Unix socket.
func diagnoseSocket(ctx context.Context, path string) (why, fix string) {
	elsewhere := "point DOCKER_HOST (or the docker context: `docker context ls`) at the socket of the engine you run"
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "no socket at " + path + " (the engine is not running, or it listens elsewhere)",
			"start Docker (`sudo systemctl start docker`, or Docker Desktop), or " + elsewhere
	}
	if err != nil {
		return fmt.Sprintf("cannot look at the socket %s: %v", path, err), elsewhere
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return path + " is not a socket", elsewhere
	}
	d := net.Dialer{Timeout: probeTimeout}
	conn, err := d.DialContext(ctx, "unix", path)
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		owner := socketOwner(fi)
		group := socketGroup(fi)
		why = fmt.Sprintf("permission denied on the socket %s (%s, mode %v): the engine runs but refuses your user", path, owner, fi.Mode().Perm())
		if group != "" {
			return why, fmt.Sprintf("add your user to the group %s (`sudo usermod -aG %s $USER`, then log in again), or use rootless Docker and point DOCKER_HOST at its socket", group, group)
		}
		return why, "run the engine so that your user may open its socket (rootless Docker), or ask its owner for access"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "nothing listens on the socket " + path + " (the engine stopped and left it behind)",
			"start Docker (`sudo systemctl start docker`, or Docker Desktop), or " + elsewhere
	case err != nil:
		return fmt.Sprintf("cannot connect to the socket %s: %v", path, err), elsewhere
	}
	conn.Close()
	return path + " accepts connections but does not answer as a Docker engine", elsewhere
}

// socketOwner is "owner user:group" of the socket, by name where known.
func socketOwner(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "owner unknown"
	}
	u := strconv.Itoa(int(st.Uid))
	if n, err := user.LookupId(u); err == nil {
		u = n.Username
	}
	g := strconv.Itoa(int(st.Gid))
	if n := socketGroup(fi); n != "" {
		g = n
	}
	return "owner " + u + ":" + g
}

// socketGroup is the name of the socket's group ("" when unknown or
// root's, which is no group to join).
func socketGroup(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Gid == 0 {
		return ""
	}
	g, err := user.LookupGroupId(strconv.Itoa(int(st.Gid)))
	if err != nil {
		return ""
	}
	return g.Name
}

// diagnoseTCP: an engine reached over TCP at addr (host:port).
func diagnoseTCP(ctx context.Context, ep endpoint, addr string, err error) (why, fix string) {
	where := "correct DOCKER_HOST (or the docker context: `docker context ls`)"
	d := net.Dialer{Timeout: probeTimeout}
	conn, derr := d.DialContext(ctx, "tcp", addr)
	var dnsErr *net.DNSError
	switch {
	case errors.Is(derr, syscall.ECONNREFUSED):
		return addr + " refused the connection (no engine listens there)",
			"start the engine on that machine, or " + where
	case errors.As(derr, &dnsErr):
		return "the engine's host cannot be resolved: " + dnsErr.Error(), where
	case derr != nil:
		return fmt.Sprintf("cannot connect to %s: %v", addr, derr), "check the network to that machine, or " + where
	}
	conn.Close()
	tlsSet := ep.CA != "" || ep.Cert != "" || (ep.Context == "" && (os.Getenv("DOCKER_TLS_VERIFY") != "" || os.Getenv("DOCKER_CERT_PATH") != ""))
	certs := "DOCKER_CERT_PATH (its ca.pem, cert.pem and key.pem) and DOCKER_TLS_VERIFY=1"
	if ep.Context != "" {
		certs = "the TLS files of the docker context " + ep.Context
	}
	if msg := err.Error(); tlsSet && (strings.Contains(msg, "x509") || strings.Contains(msg, "tls") || strings.Contains(msg, "certificate")) {
		return "the TLS handshake with " + addr + " failed: " + msg, "check " + certs + " against the engine's certificate"
	}
	if !tlsSet && speaksTLS(ctx, addr) {
		return addr + " speaks TLS but no client certificates are set", "set " + certs
	}
	return addr + " accepts connections but does not answer as a Docker engine", where
}

// speaksTLS reports whether the server at addr completes a TLS handshake
// (its certificate unchecked: this only tells TLS from plain HTTP).
func speaksTLS(ctx context.Context, addr string) bool {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: probeTimeout}, Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a probe that sends nothing
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
