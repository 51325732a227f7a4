package helper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"time"
)

// The helper's side of a published port's connections: a dial request
// makes it connect to the port on the sandbox's loopback, as the command
// user, and either hand the socket to the host (the pass socket) or carry
// its bytes in data messages.

// dialTimeout bounds the helper's connect to a port on the loopback (a
// listener whose backlog is full does not answer).
const dialTimeout = 5 * time.Second

// DialLoopback connects to 127.0.0.1:port, then to [::1]:port when
// nothing listens on the first (many dev servers bind "localhost" on
// IPv6 alone). Nothing on either is a *RemoteError with CodeRefused,
// which matches sandbox.ErrNothingListens.
func DialLoopback(ctx context.Context, port int) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	p := strconv.Itoa(port)
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", p))
	if err == nil {
		return c.(*net.TCPConn), nil
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return nil, err
	}
	c, err6 := d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", p))
	if err6 == nil {
		return c.(*net.TCPConn), nil
	}
	if errors.Is(err6, syscall.ECONNREFUSED) || errors.Is(err6, syscall.EADDRNOTAVAIL) ||
		errors.Is(err6, syscall.ENETUNREACH) || errors.Is(err6, syscall.EAFNOSUPPORT) {
		return nil, &RemoteError{Code: CodeRefused, Msg: fmt.Sprintf("nothing listens on port %d in the sandbox (127.0.0.1 and [::1])", port)}
	}
	return nil, err6
}

// dial answers a dial request; it runs on its own goroutine, which the
// connection keeps until it ends.
func (s *server) dial(ctx context.Context, m Message) {
	defer s.dialWG.Done()
	tc, err := DialLoopback(ctx, m.Port)
	if err != nil {
		var re *RemoteError
		code := ""
		if errors.As(err, &re) {
			code = re.Code
		}
		_ = s.send(Message{ID: m.ID, Type: TypeError, Error: fmt.Sprintf("connect to port %d in the sandbox: %v", m.Port, err), Code: code})
		return
	}
	if s.passSocket != "" && m.Token != "" {
		if err := passDialed(s.passSocket, m.Token, tc); err == nil {
			_ = tc.Close() // the host has its own copy
			_ = s.send(Message{ID: m.ID, Type: TypeDialed, Pass: true})
			return
		} else {
			s.logf("hand over the connection to port %d: %v (its bytes go over the channel)", m.Port, err)
		}
	}
	mc := newMsgConn(m.ID, s.send, func() { s.forgetConn(m.ID) }, tc.LocalAddr(), tc.RemoteAddr())
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		_ = tc.Close()
		_ = s.send(Message{ID: m.ID, Type: TypeError, Error: "the session is ending"})
		return
	}
	s.conns[m.ID] = mc
	s.mu.Unlock()
	if err := s.send(Message{ID: m.ID, Type: TypeDialed}); err != nil {
		_ = tc.Close()
		_ = mc.Close()
		return
	}
	pipeConn(tc, mc)
}

func (s *server) forgetConn(id uint64) {
	s.mu.Lock()
	delete(s.conns, id)
	s.mu.Unlock()
}

// connMessage passes a data, ack or close message to its connection.
func (s *server) connMessage(m Message) {
	s.mu.Lock()
	mc := s.conns[m.ID]
	s.mu.Unlock()
	if mc == nil {
		return // closed here already
	}
	switch m.Type {
	case TypeData:
		mc.push(m.Data, m.EOF)
	case TypeAck:
		mc.ack(m.N)
	case TypeClose:
		mc.remoteClose(io.EOF)
	}
}

// closeConns ends every connection of the session and waits for their
// goroutines. No connection starts after it.
func (s *server) closeConns() {
	s.mu.Lock()
	s.shut = true
	conns := make([]*msgConn, 0, len(s.conns))
	for _, mc := range s.conns {
		conns = append(conns, mc)
	}
	s.mu.Unlock()
	s.stopDials()
	for _, mc := range conns {
		mc.remoteClose(errors.New("the session ended"))
	}
	s.dialWG.Wait()
}

// pipeConn copies between the dialed socket and the channel's end of the
// connection, half-closes passing on, until both directions ended; the
// end of the connection on the host's side (or of the session) closes the
// socket at once, even while a write to it is stuck.
func pipeConn(tc *net.TCPConn, mc *msgConn) {
	watch := make(chan struct{})
	go func() {
		defer close(watch)
		<-mc.Done()
		_ = tc.Close()
	}()
	up := make(chan struct{})
	go func() {
		defer close(up)
		_, _ = io.Copy(mc, tc)
		_ = mc.CloseWrite()
	}()
	_, _ = io.Copy(tc, mc)
	_ = tc.CloseWrite()
	<-up
	_ = mc.Close()
	<-watch
}

// listeners answers a listeners request.
func (s *server) listeners(m Message) {
	defer s.dialWG.Done()
	ls, err := ListListeners()
	if err != nil {
		_ = s.send(Message{ID: m.ID, Type: TypeError, Error: fmt.Sprintf("list the sandbox's listening ports: %v", err)})
		return
	}
	_ = s.send(Message{ID: m.ID, Type: TypeListening, Listeners: ls})
}
