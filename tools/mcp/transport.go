package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shiroagent/shiro/sandbox"
)

const (
	// stopGrace is how long a stdio server may take to exit once its
	// stdin is closed, before it is signalled (host) or killed (sandbox).
	stopGrace = time.Second
	// stderrTail is how much of a server's stderr is kept to explain a
	// failed start.
	stderrTail = 2048
	// maxUnread bounds what a sandbox server may write that the client has
	// not read yet.
	maxUnread = 32 << 20
)

// hostTransport runs a stdio server on the host: the inherited environment
// with the entry's env over it, in its cwd (relative to the workspace; the
// workspace by default), in a process group of its own so that a ctrl-c
// at the terminal does not reach it.
func hostTransport(cfg Config, workspace string, environ []string) started {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = mergeEnv(environ, cfg.Env)
	cmd.Dir = workspace
	if cfg.Cwd != "" {
		cmd.Dir = cfg.Cwd
		if !filepath.IsAbs(cfg.Cwd) {
			cmd.Dir = filepath.Join(workspace, cfg.Cwd)
		}
	}
	stderr := &tailBuffer{max: stderrTail}
	cmd.Stderr = stderr
	cmd.WaitDelay = stopGrace // a child holding stderr does not hold Close
	ownProcessGroup(cmd)
	return started{
		transport: &sdk.CommandTransport{Command: cmd, TerminateDuration: stopGrace},
		release:   func() {}, // closing the session stops the process
		explain:   stderr.explain,
	}
}

// mergeEnv puts entries over environ, replacing variables of the same name.
func mergeEnv(environ []string, entries map[string]string) []string {
	out := make([]string, 0, len(environ)+len(entries))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if _, over := entries[name]; !over {
			out = append(out, kv)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		out = append(out, name+"="+entries[name])
	}
	return out
}

// sandboxTransport runs a stdio server inside the sandbox over the
// session's command channel. Its cwd must stay inside the workspace; its
// env entries are passed as they are. The JSON-RPC stream goes through the
// command's stdin and stdout; releasing kills its process tree.
func sandboxTransport(ctx context.Context, sb sandbox.Sandbox, cfg Config, workspace string) (started, error) {
	dir := workspace
	if cfg.Cwd != "" {
		dir = cfg.Cwd
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(workspace, dir)
		}
		dir = filepath.Clean(dir)
		if rel, err := filepath.Rel(workspace, dir); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return started{}, fmt.Errorf("cwd %q is outside the workspace", cfg.Cwd)
		}
	}
	env := make([]string, 0, len(cfg.Env))
	for _, name := range slices.Sorted(maps.Keys(cfg.Env)) {
		env = append(env, name+"="+cfg.Env[name])
	}
	p := &sandboxProc{
		stdout: newPipeBuffer(maxUnread),
		stderr: &tailBuffer{max: stderrTail},
		done:   make(chan struct{}),
	}
	inR, inW := io.Pipe()
	p.stdin = inR
	// The process lives until release, not until the connect's deadline.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	cmd := sandbox.Command{
		Args:   append([]string{cfg.Command}, cfg.Args...),
		Env:    env,
		Dir:    dir,
		Stdin:  inR,
		Stdout: p.stdout,
		Stderr: p.stderr,
	}
	go p.run(runCtx, sb, cmd)
	return started{
		transport: &sdk.IOTransport{Reader: p.stdout, Writer: inW},
		release:   p.stop,
		explain:   p.explain,
	}, nil
}

// sandboxProc is a stdio server running in the sandbox.
type sandboxProc struct {
	stdin  *io.PipeReader
	stdout *pipeBuffer
	stderr *tailBuffer
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned; res and err are set

	res sandbox.Result
	err error

	stopOnce sync.Once
}

func (p *sandboxProc) run(ctx context.Context, sb sandbox.Sandbox, cmd sandbox.Command) {
	defer close(p.done)
	p.res, p.err = sb.Run(ctx, cmd)
	// The server is gone: its output ends, writes to it fail, and the
	// channel's stdin pump stops reading.
	p.stdout.closeWrite()
	p.stdin.CloseWithError(errServerEnded)
}

var errServerEnded = errors.New("the server has ended")

// stop lets the server exit on its own (the session closed its stdin),
// then kills its process tree, and waits for Run to return.
func (p *sandboxProc) stop() {
	p.stopOnce.Do(func() {
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
		}
		p.cancel()
		<-p.done
	})
}

// explain adds how the server ended, when it has, and its stderr.
func (p *sandboxProc) explain(err error) error {
	select {
	case <-p.done:
		switch {
		case p.err != nil && !errors.Is(p.err, context.Canceled):
			err = fmt.Errorf("%w (the sandbox could not run it: %v)", err, p.err)
		case p.err == nil:
			err = fmt.Errorf("%w (the server exited with status %d)", err, p.res.ExitCode)
		}
	default:
	}
	return p.stderr.explain(err)
}

// remoteTransport reaches a remote server: streamable HTTP, or SSE for
// type "sse", with the entry's headers on every request.
func remoteTransport(cfg Config) started {
	base := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{Transport: &headerTransport{base: base, headers: cfg.Headers}}
	var t sdk.Transport
	if cfg.Transport() == TransportSSE {
		t = &sdk.SSEClientTransport{Endpoint: cfg.URL, HTTPClient: client}
	} else {
		// Server-initiated messages (list changes) are not used: no
		// standing GET stream.
		t = &sdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client, DisableStandaloneSSE: true}
	}
	return started{
		transport: t,
		release:   base.CloseIdleConnections,
		explain:   func(err error) error { return err },
	}
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int

	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// explain appends the stderr kept, on one line, to err.
func (t *tailBuffer) explain(err error) error {
	s := strings.Join(strings.Fields(t.String()), " ")
	if s == "" {
		return err
	}
	return fmt.Errorf("%w; stderr: %s", err, s)
}

// pipeBuffer is a pipe whose writer never blocks (the command channel's
// reader goroutine writes a sandbox server's output into it and must not
// wait for the MCP client): written bytes wait in memory, up to a bound.
type pipeBuffer struct {
	max  int
	wake chan struct{} // a Read may have something to do

	mu      sync.Mutex
	buf     []byte
	ended   bool  // the writer is done: EOF once buf is drained
	failErr error // set when the reader side fails (closed, overflow)
}

func newPipeBuffer(max int) *pipeBuffer {
	return &pipeBuffer{max: max, wake: make(chan struct{}, 1)}
}

func (b *pipeBuffer) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Write implements io.Writer; it never blocks.
func (b *pipeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failErr != nil {
		return 0, b.failErr
	}
	if len(b.buf)+len(p) > b.max {
		b.failErr = fmt.Errorf("the server wrote more than %d bytes that were not read", b.max)
		b.signal()
		return 0, b.failErr
	}
	b.buf = append(b.buf, p...)
	b.signal()
	return len(p), nil
}

// Read implements io.Reader: it waits for data, the writer's end or Close.
func (b *pipeBuffer) Read(p []byte) (int, error) {
	for {
		b.mu.Lock()
		switch {
		case b.failErr != nil:
			b.mu.Unlock()
			return 0, b.failErr
		case len(b.buf) > 0:
			n := copy(p, b.buf)
			b.buf = b.buf[n:]
			b.mu.Unlock()
			return n, nil
		case b.ended:
			b.mu.Unlock()
			return 0, io.EOF
		}
		b.mu.Unlock()
		<-b.wake
	}
}

// closeWrite ends the stream: Read returns io.EOF once the data is read.
func (b *pipeBuffer) closeWrite() {
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
	b.signal()
}

// Close implements io.Closer for the reader: Read and Write fail from now.
func (b *pipeBuffer) Close() error {
	b.mu.Lock()
	if b.failErr == nil {
		b.failErr = io.ErrClosedPipe
	}
	b.buf = nil
	b.mu.Unlock()
	b.signal()
	return nil
}
