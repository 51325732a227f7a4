package sandbox

import (
	"context"
	"errors"
	"net"
)

// PortDialer is a sandbox that can reach a TCP port on its own loopback
// from the host: a published port's connections (--publish). Each
// connection is carried over the session's command channel to the helper,
// which dials the port inside the sandbox; the sandbox's network stays
// what it is (no engine port, no host network, no route).
type PortDialer interface {
	// DialPort connects to port on the sandbox's loopback. Nothing
	// listening there is an error matching ErrNothingListens; a backend
	// that cannot carry connections matches errors.ErrUnsupported.
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// PortLister is a sandbox that can say what listens on its TCP ports, for
// the question before a port is published.
type PortLister interface {
	// Listeners are the sandbox's listening TCP sockets, by port.
	Listeners(ctx context.Context) ([]Listener, error)
}

// Listener is one listening TCP socket in the sandbox.
type Listener struct {
	Port int `json:"port"`
	// Address is the local address it is bound to ("127.0.0.1", "::",
	// "0.0.0.0").
	Address string `json:"address"`
	// Pid and Command are the process holding it, when the helper can
	// tell (a process of the command user); 0 and "" otherwise.
	Pid     int    `json:"pid,omitempty"`
	Command string `json:"command,omitempty"`
}

// ErrNothingListens is DialPort's error for a port nothing listens on in
// the sandbox.
var ErrNothingListens = errors.New("nothing listens on the port in the sandbox")
