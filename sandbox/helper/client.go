package helper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// Client errors.
var (
	// ErrChannelClosed means the stream to the helper broke (or the helper
	// exited): every pending and later Run fails with it, wrapped with the
	// cause.
	ErrChannelClosed = errors.New("helper channel closed")
	// ErrKillTimeout means Run's context was cancelled and the helper did
	// not confirm the kill in time: the caller should kill the command's
	// processes another way (KillTimeoutError carries its marker).
	ErrKillTimeout = errors.New("helper did not confirm the kill in time")
)

// Default waits of a Client.
const (
	DefaultKillWait  = time.Second
	DefaultCloseWait = 5 * time.Second
)

// KillTimeoutError is Run's error when the kill was not confirmed. It
// matches ErrKillTimeout and the context's error.
type KillTimeoutError struct {
	// Marker is the command's MarkerEnv value, empty when the helper never
	// reported the start (kill the session then).
	Marker string
	// Cause is the context's error.
	Cause error
}

func (e *KillTimeoutError) Error() string {
	m := e.Marker
	if m == "" {
		m = "unknown"
	}
	return fmt.Sprintf("%v (marker %s): %v", ErrKillTimeout, m, e.Cause)
}

// Unwrap returns ErrKillTimeout and the cause.
func (e *KillTimeoutError) Unwrap() []error { return []error{ErrKillTimeout, e.Cause} }

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithKillWait sets how long Run waits for the exit after sending a kill
// (default DefaultKillWait).
func WithKillWait(d time.Duration) ClientOption { return func(c *Client) { c.killWait = d } }

// WithCloseWait sets how long Close waits for the helper to finish before it
// closes the reader, when the reader is an io.Closer (default
// DefaultCloseWait).
func WithCloseWait(d time.Duration) ClientOption { return func(c *Client) { c.closeWait = d } }

// Client is the host's end of the protocol: it runs commands through a
// helper's Serve. It is safe for concurrent use.
type Client struct {
	r         io.Reader
	w         io.WriteCloser
	killWait  time.Duration
	closeWait time.Duration

	encMu sync.Mutex
	enc   *json.Encoder

	nextID atomic.Uint64
	state  atomic.Pointer[string]

	mu     sync.Mutex
	calls  map[uint64]*call
	err    error // set before done is closed
	closed bool

	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	// Connections (dial.go), guarded by mu: the requests awaiting an
	// answer by id, and the dials awaiting a socket by token; conns carry
	// their bytes in messages, passed were handed over (both are ended
	// when the session ends).
	reqs      map[uint64]*request
	tokens    map[string]*request
	conns     map[uint64]*msgConn
	passed    []*net.TCPConn
	pass      *net.UnixListener // nil: no hand-overs
	passSlots chan struct{}     // one per hand-over being read
	passWG    sync.WaitGroup
}

// call is one Run in flight.
type call struct {
	exit     chan Message // receives exit or error, once
	finished atomic.Bool  // Run returned: stop feeding stdin

	mu             sync.Mutex // serialises output with detach
	stdout, stderr io.Writer
	marker         string
	writeErr       error
	detached       bool
}

// NewClient starts a Client reading the helper's replies from r and writing
// requests to w. Close closes w.
func NewClient(r io.Reader, w io.WriteCloser, opts ...ClientOption) *Client {
	c := &Client{
		r:         r,
		w:         w,
		killWait:  DefaultKillWait,
		closeWait: DefaultCloseWait,
		enc:       json.NewEncoder(w),
		calls:     make(map[uint64]*call),
		done:      make(chan struct{}),
		reqs:      make(map[uint64]*request),
		tokens:    make(map[string]*request),
		conns:     make(map[uint64]*msgConn),
	}
	for _, o := range opts {
		o(c)
	}
	if c.pass != nil {
		c.passWG.Add(1)
		go c.acceptPassed()
	}
	go c.read()
	return c
}

// State is the last state the helper reported (ServeOptions.State), "" if
// none yet. A Run that returned has seen every state reported before its
// exit.
func (c *Client) State() string {
	if p := c.state.Load(); p != nil {
		return *p
	}
	return ""
}

// Done is closed when the Client stops reading: the channel broke or was
// closed.
func (c *Client) Done() <-chan struct{} { return c.done }

func (c *Client) read() {
	dec := json.NewDecoder(c.r)
	for {
		var m Message
		if err := dec.Decode(&m); err != nil {
			c.mu.Lock()
			c.err = fmt.Errorf("%w: %w", ErrChannelClosed, err)
			c.mu.Unlock()
			c.endConns()
			close(c.done)
			return
		}
		c.dispatch(m)
	}
}

func (c *Client) dispatch(m Message) {
	switch m.Type {
	case TypeState:
		c.state.Store(&m.State)
		return
	case TypeData, TypeAck, TypeClose:
		c.connMessage(m)
		return
	case TypeDialed, TypeListening, TypeError:
		if c.answer(m) {
			return
		}
	}
	c.mu.Lock()
	cl := c.calls[m.ID]
	if cl != nil && (m.Type == TypeExit || m.Type == TypeError) {
		delete(c.calls, m.ID)
	}
	c.mu.Unlock()
	if cl == nil {
		return // a log, or a call Run gave up on
	}
	switch m.Type {
	case TypeOut:
		cl.write(m.Stream, m.Data)
	case TypeStarted:
		cl.mu.Lock()
		cl.marker = m.Marker
		cl.mu.Unlock()
	case TypeExit, TypeError:
		cl.exit <- m
	}
}

func (cl *call) write(stream int, data []byte) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.detached {
		return
	}
	w := &cl.stdout
	if stream == StreamStderr {
		w = &cl.stderr
	}
	if *w == nil {
		return
	}
	if _, err := (*w).Write(data); err != nil {
		*w = nil
		if cl.writeErr == nil {
			cl.writeErr = err
		}
	}
}

func (c *Client) send(m Message) error {
	c.encMu.Lock()
	defer c.encMu.Unlock()
	if err := c.enc.Encode(m); err != nil {
		return fmt.Errorf("%w: send %s: %w", ErrChannelClosed, m.Type, err)
	}
	return nil
}

// Run runs cmd in the helper; see sandbox.Sandbox.Run. Output is written to
// cmd.Stdout and cmd.Stderr from the Client's reader goroutine, so writers
// should not block; none is called after Run returned. cmd.Stdin is copied
// by a goroutine that stops at its next Read after Run returned.
func (c *Client) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	if err := cmd.Validate(); err != nil {
		return sandbox.Result{}, fmt.Errorf("run: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Result{Interrupted: true}, err
	}
	id := c.nextID.Add(1)
	cl := &call{exit: make(chan Message, 1), stdout: cmd.Stdout, stderr: cmd.Stderr}
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return sandbox.Result{}, sandbox.ErrClosed
	case c.err != nil:
		c.mu.Unlock()
		return sandbox.Result{}, c.err
	}
	c.calls[id] = cl
	c.mu.Unlock()
	defer cl.finished.Store(true)

	err := c.send(Message{
		ID:        id,
		Type:      TypeRun,
		Args:      cmd.Args,
		Shell:     cmd.Shell,
		Dir:       cmd.Dir,
		Env:       cmd.Env,
		TimeoutMs: ceilMillis(cmd.Timeout),
		Stdin:     cmd.Stdin != nil,
	})
	if err != nil {
		c.forget(id, cl)
		return sandbox.Result{}, err
	}
	if cmd.Stdin != nil {
		go c.pumpStdin(id, cl, cmd.Stdin)
	}

	select {
	case m := <-cl.exit:
		return c.result(ctx, cl, m)
	case <-c.done:
		return c.broken(ctx, cl)
	case <-ctx.Done():
	}

	if err := c.send(Message{ID: id, Type: TypeKill}); err != nil {
		c.forget(id, cl)
		return sandbox.Result{Interrupted: true}, errors.Join(ctx.Err(), err)
	}
	t := time.NewTimer(c.killWait)
	defer t.Stop()
	select {
	case m := <-cl.exit:
		return c.result(ctx, cl, m)
	case <-c.done:
		return c.broken(ctx, cl)
	case <-t.C:
		c.forget(id, cl)
		cl.mu.Lock()
		marker := cl.marker
		cl.mu.Unlock()
		return sandbox.Result{Interrupted: true}, &KillTimeoutError{Marker: marker, Cause: ctx.Err()}
	}
}

// broken answers a Run whose channel broke, unless its exit came first.
func (c *Client) broken(ctx context.Context, cl *call) (sandbox.Result, error) {
	select {
	case m := <-cl.exit:
		return c.result(ctx, cl, m)
	default:
	}
	cl.detach()
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	return sandbox.Result{Interrupted: ctx.Err() != nil}, err
}

// forget drops a call whose exit will not be awaited.
func (c *Client) forget(id uint64, cl *call) {
	c.mu.Lock()
	delete(c.calls, id)
	c.mu.Unlock()
	cl.detach()
}

func (cl *call) detach() {
	cl.mu.Lock()
	cl.detached = true
	cl.mu.Unlock()
}

func (c *Client) result(ctx context.Context, cl *call, m Message) (sandbox.Result, error) {
	cl.detach()
	var res sandbox.Result
	if m.Result != nil {
		res = *m.Result
	}
	if err := ctx.Err(); err != nil {
		res.Interrupted = true
		return res, err
	}
	if m.Error != "" {
		return res, &RemoteError{Code: m.Code, Msg: m.Error}
	}
	if res.Interrupted { // the helper stopped it on its own: the session ended
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return res, sandbox.ErrClosed
		}
		return res, fmt.Errorf("%w: the helper ended the session", ErrChannelClosed)
	}
	if cl.writeErr != nil {
		return res, fmt.Errorf("write output: %w", cl.writeErr)
	}
	return res, nil
}

func (c *Client) pumpStdin(id uint64, cl *call, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if cl.finished.Load() {
			return
		}
		if n > 0 {
			if c.send(Message{ID: id, Type: TypeStdin, Data: buf[:n]}) != nil {
				return
			}
		}
		if err != nil {
			_ = c.send(Message{ID: id, Type: TypeStdin, EOF: true})
			return
		}
	}
}

// Close ends the session: it closes w, so that the helper kills every
// process the session started and exits, and waits for the reader to stop.
// Runs still pending then fail with ErrChannelClosed; later Runs return
// sandbox.ErrClosed. If the helper does not finish within the close wait
// and r is an io.Closer, Close closes r; otherwise it returns an error and
// the reader goroutine stops when r does.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		err := c.w.Close()
		t := time.NewTimer(c.closeWait)
		defer t.Stop()
		select {
		case <-c.done:
		case <-t.C:
			rc, ok := c.r.(io.Closer)
			if !ok {
				err = errors.Join(err, errors.New("close helper channel: the helper did not finish"))
				break
			}
			err = errors.Join(err, rc.Close())
			<-c.done
		}
		c.endConns()
		c.passWG.Wait()
		if err != nil {
			c.closeErr = fmt.Errorf("close helper channel: %w", err)
		}
	})
	return c.closeErr
}

func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
