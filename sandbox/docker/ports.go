package docker

import (
	"context"
	"net"

	"github.com/shiroagent/shiro/sandbox"
)

var (
	_ sandbox.PortDialer = (*Sandbox)(nil)
	_ sandbox.PortLister = (*Sandbox)(nil)
)

// DialPort implements sandbox.PortDialer: the helper dials the port on the
// container's loopback and, on a local engine, hands the socket over the
// session's pass socket; the container's network stays as it is (no
// engine port, no route). A container replaced since the last command is
// reached through a new channel.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	return s.conn.Dial(ctx, port)
}

// Listeners implements sandbox.PortLister.
func (s *Sandbox) Listeners(ctx context.Context) ([]sandbox.Listener, error) {
	return s.conn.Listeners(ctx)
}
