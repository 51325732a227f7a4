package kube

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
// pod's loopback and the connection's bytes travel in messages on the
// exec's streams; the pod gets no service, port or route. A pod replaced
// since the last command is reached through a new channel.
func (s *Sandbox) DialPort(ctx context.Context, port int) (net.Conn, error) {
	return s.conn.Dial(ctx, port)
}

// Listeners implements sandbox.PortLister.
func (s *Sandbox) Listeners(ctx context.Context) ([]sandbox.Listener, error) {
	return s.conn.Listeners(ctx)
}
