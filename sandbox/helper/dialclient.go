package helper

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// WithPassListener has the Client take the sockets of its dials from l,
// the Unix socket the helper's ServeOptions.PassSocket names (see the
// protocol). The Client owns l from then on: it closes it when the
// session ends. Whatever arrives on l that is not the socket of a dial in
// flight, with that dial's token, to the port it asked for, is closed.
func WithPassListener(l *net.UnixListener) ClientOption {
	return func(c *Client) { c.pass, c.passSlots = l, make(chan struct{}, maxPendingPasses) }
}

// request is a dial or listeners request awaiting its answer.
type request struct {
	reply chan reply // receives the answer, once
	// A dial's: the port, and the socket handed over for its token.
	port int
	fd   chan passResult
}

type reply struct {
	m    Message
	conn *msgConn // a dial answered without a hand-over
}

type passResult struct {
	tc  *net.TCPConn
	err error
}

// maxPendingPasses bounds the hand-overs read at once: the pass socket is
// reachable by every process in the sandbox.
const maxPendingPasses = 64

// dialPassWait bounds how long Dial waits for the socket of a dial the
// helper says it handed over.
const dialPassWait = 10 * time.Second

// answer passes m to the request awaiting it; false when m answers none.
// A dial's connection is registered before anything else is read, so that
// the data after dialed finds it; a dial nobody awaits any more is closed.
func (c *Client) answer(m Message) bool {
	c.mu.Lock()
	req := c.reqs[m.ID]
	if req == nil {
		c.mu.Unlock()
		if m.Type == TypeDialed && !m.Pass {
			_ = c.send(Message{ID: m.ID, Type: TypeClose}) // Dial gave up
		}
		return m.Type != TypeError // an error may be a command's
	}
	delete(c.reqs, m.ID)
	var mc *msgConn
	if m.Type == TypeDialed && !m.Pass {
		id := m.ID
		mc = newMsgConn(id, c.send, func() { c.forgetConn(id) }, sandboxAddr{}, sandboxAddr{port: req.port})
		c.conns[id] = mc
	}
	c.mu.Unlock()
	req.reply <- reply{m: m, conn: mc}
	return true
}

func (c *Client) forgetConn(id uint64) {
	c.mu.Lock()
	delete(c.conns, id)
	c.mu.Unlock()
}

// connMessage passes a data, ack or close message to its connection;
// one for a connection closed here already is dropped.
func (c *Client) connMessage(m Message) {
	c.mu.Lock()
	mc := c.conns[m.ID]
	c.mu.Unlock()
	if mc == nil {
		return
	}
	switch m.Type {
	case TypeData:
		mc.push(m.Data, m.EOF)
	case TypeAck:
		mc.ack(m.N)
	case TypeClose:
		mc.remoteClose(errPeerClosed)
	}
}

// endConns ends every connection of the session (the channel closed) and
// stops taking hand-overs.
func (c *Client) endConns() {
	c.mu.Lock()
	conns := make([]*msgConn, 0, len(c.conns))
	for _, mc := range c.conns {
		conns = append(conns, mc)
	}
	passed := c.passed
	c.passed = nil
	c.mu.Unlock()
	for _, mc := range conns {
		mc.remoteClose(ErrChannelClosed)
	}
	for _, tc := range passed {
		_ = tc.Close()
	}
	if c.pass != nil {
		_ = c.pass.Close()
	}
}

// register adds req under id (and token), unless the Client is closed.
func (c *Client) register(id uint64, token string, req *request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return sandbox.ErrClosed
	case c.err != nil:
		return c.err
	}
	c.reqs[id] = req
	if token != "" {
		c.tokens[token] = req
	}
	return nil
}

// abandon forgets a request whose answer will not be awaited, and closes
// what it brought if it came meanwhile.
func (c *Client) abandon(id uint64, token string, req *request) {
	c.mu.Lock()
	_, pending := c.reqs[id]
	delete(c.reqs, id)
	c.mu.Unlock()
	if !pending { // answer took it: its reply is (being) sent
		if r := <-req.reply; r.conn != nil {
			_ = r.conn.Close()
		}
	}
	c.dropPass(token, req)
}

// Dial connects to port on the sandbox's loopback (127.0.0.1, then
// [::1]) through the helper. Nothing listening there is an error matching
// sandbox.ErrNothingListens, returned as soon as the helper's connect is
// refused. With a pass listener the connection is the sandbox's socket
// itself (a *net.TCPConn, which the kernel splices); otherwise its bytes
// travel over the channel. Either way CloseWrite half-closes it, Close
// ends it on both sides, and the end of the session ends it.
func (c *Client) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("dial port %d in the sandbox: not a TCP port", port)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id := c.nextID.Add(1)
	req := &request{reply: make(chan reply, 1), port: port}
	token := ""
	if c.pass != nil {
		token = ChannelToken()
		req.fd = make(chan passResult, 1)
	}
	if err := c.register(id, token, req); err != nil {
		return nil, err
	}
	if err := c.send(Message{ID: id, Type: TypeDial, Port: port, Token: token}); err != nil {
		c.abandon(id, token, req)
		return nil, err
	}
	var r reply
	select {
	case r = <-req.reply:
	case <-c.done:
		c.abandon(id, token, req)
		return nil, c.doneErr()
	case <-ctx.Done():
		c.abandon(id, token, req)
		return nil, ctx.Err()
	}
	switch {
	case r.m.Type == TypeError:
		c.dropPass(token, req)
		return nil, fmt.Errorf("dial port %d in the sandbox: %w", port, &RemoteError{Code: r.m.Code, Msg: r.m.Error})
	case r.conn != nil:
		c.dropPass(token, req)
		return r.conn, nil
	case !r.m.Pass || req.fd == nil:
		c.dropPass(token, req)
		return nil, fmt.Errorf("dial port %d in the sandbox: the helper answered %q", port, r.m.Type)
	}
	t := time.NewTimer(dialPassWait)
	defer t.Stop()
	select {
	case p := <-req.fd:
		if p.err != nil {
			return nil, fmt.Errorf("dial port %d in the sandbox: %w", port, p.err)
		}
		c.mu.Lock()
		if c.err != nil || c.closed {
			c.mu.Unlock()
			_ = p.tc.Close()
			return nil, sandbox.ErrClosed
		}
		c.passed = append(pruneClosed(c.passed), p.tc)
		c.mu.Unlock()
		return p.tc, nil
	case <-t.C:
		c.dropPass(token, req)
		return nil, fmt.Errorf("dial port %d in the sandbox: the helper's socket did not arrive", port)
	case <-c.done:
		c.dropPass(token, req)
		return nil, c.doneErr()
	case <-ctx.Done():
		c.dropPass(token, req)
		return nil, ctx.Err()
	}
}

// dropPass stops waiting for a dial's socket, and closes it if it came
// meanwhile.
func (c *Client) dropPass(token string, req *request) {
	if req.fd == nil {
		return
	}
	c.mu.Lock()
	delete(c.tokens, token)
	c.mu.Unlock()
	select { // deliverPassed sends under the lock: nothing comes after the delete
	case p := <-req.fd:
		if p.tc != nil {
			_ = p.tc.Close()
		}
	default:
	}
}

func (c *Client) doneErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return sandbox.ErrClosed
	}
	return c.err
}

// pruneClosed drops the connections their users closed.
func pruneClosed(conns []*net.TCPConn) []*net.TCPConn {
	out := conns[:0]
	for _, tc := range conns {
		raw, err := tc.SyscallConn()
		if err == nil && raw.Control(func(uintptr) {}) == nil {
			out = append(out, tc)
		}
	}
	clear(conns[len(out):])
	return out
}

// acceptPassed takes the hand-overs on the pass listener until it is
// closed; each is read on its own goroutine, within passWait.
func (c *Client) acceptPassed() {
	defer c.passWG.Done()
	for {
		u, err := c.pass.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		select {
		case c.passSlots <- struct{}{}:
		default: // a flood of connections that say nothing: drop the surplus
			_ = u.Close()
			continue
		}
		c.passWG.Add(1)
		go func() {
			defer c.passWG.Done()
			defer func() { <-c.passSlots }()
			defer u.Close()
			token, tc, err := receiveDialed(u)
			if err != nil {
				if token != "" {
					c.deliverPassed(token, nil, err)
				}
				return
			}
			if !c.deliverPassed(token, tc, nil) {
				_ = tc.Close()
			}
		}()
	}
}

// deliverPassed gives tc to the dial whose token it came with, if that
// dial is in flight; bad (what else came with the token) or a socket that
// is not a loopback connection to the dial's port fails the dial. It
// reports whether the dial took tc.
func (c *Client) deliverPassed(token string, tc *net.TCPConn, bad error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var req *request
	for t, r := range c.tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			req = r
			delete(c.tokens, t)
			break
		}
	}
	if req == nil {
		return false
	}
	if bad != nil {
		req.fd <- passResult{err: bad}
		return false
	}
	peer, ok := tc.RemoteAddr().(*net.TCPAddr)
	if !ok || peer.Port != req.port || !peer.IP.IsLoopback() {
		req.fd <- passResult{err: fmt.Errorf("the socket handed over is connected to %v, not to port %d on the loopback", tc.RemoteAddr(), req.port)}
		return false
	}
	req.fd <- passResult{tc: tc}
	return true
}

// Listeners asks the helper what listens on the sandbox's TCP ports.
func (c *Client) Listeners(ctx context.Context) ([]sandbox.Listener, error) {
	id := c.nextID.Add(1)
	req := &request{reply: make(chan reply, 1)}
	if err := c.register(id, "", req); err != nil {
		return nil, err
	}
	if err := c.send(Message{ID: id, Type: TypeListeners}); err != nil {
		c.abandon(id, "", req)
		return nil, err
	}
	select {
	case r := <-req.reply:
		if r.m.Type == TypeError {
			return nil, fmt.Errorf("list the sandbox's listeners: %w", &RemoteError{Code: r.m.Code, Msg: r.m.Error})
		}
		return r.m.Listeners, nil
	case <-c.done:
		c.abandon(id, "", req)
		return nil, c.doneErr()
	case <-ctx.Done():
		c.abandon(id, "", req)
		return nil, ctx.Err()
	}
}
