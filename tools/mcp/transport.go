package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
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
// at the terminal does not reach it. The process is shiro's own (not the
// SDK's command transport) so that its exit status is known when the
// connection breaks.
func hostTransport(cfg Config, workspace string, environ []string) (started, error) {
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
	cmd.WaitDelay = stopGrace // a child holding stderr does not hold Wait
	ownProcessGroup(cmd)
	// Pipes of our own: Wait closes neither, so the server's last output
	// is read even when it has exited.
	inR, inW, err := os.Pipe()
	if err != nil {
		return started{}, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return started{}, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return started{}, fmt.Errorf("start %s: %w", cfg.Command, err)
	}
	p := &hostProc{cmd: cmd, stdin: inW, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	out := &stdoutWatch{r: outR}
	return started{
		transport: &sdk.IOTransport{Reader: out, Writer: inW},
		release:   p.stop,
		explain: func(err error, waitExit bool) error {
			return explainEnd(err, out, stderr, p.done, waitExit, func() string { return exitText(p.err) })
		},
	}, nil
}

// hostProc is a stdio server running on the host.
type hostProc struct {
	cmd   *exec.Cmd
	stdin *os.File
	done  chan struct{} // closed when Wait returned; err is set
	err   error

	stopOnce sync.Once
}

// stop closes the server's stdin (the session has closed it already, as a
// rule), gives it stopGrace to exit, then terminates its process group,
// and kills it stopGrace later.
func (p *hostProc) stop() {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		for _, sig := range []func(*exec.Cmd){terminateGroup, killGroup} {
			t := time.NewTimer(stopGrace)
			select {
			case <-p.done:
				t.Stop()
				return
			case <-t.C:
			}
			sig(p.cmd)
		}
		<-p.done
	})
}

// exitText says how a host server ended, from Wait's error.
func exitText(err error) string {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return "the server exited with status 0"
	case errors.As(err, &exit):
		if s := exitSignal(exit); s != "" {
			return "the server was killed by " + s
		}
		return fmt.Sprintf("the server exited with status %d", exit.ExitCode())
	default:
		return "the server ended: " + err.Error()
	}
}

// exitWait is how long a failed start waits to see the server exit, when
// its pipe broke (the exit is the better explanation).
const exitWait = 500 * time.Millisecond

// explainEnd builds a failed start's message: a line of stdout that is not
// JSON-RPC first, else the server's exit (which makes the transport's own
// error — a broken pipe, an EOF — noise), else err; the stderr tail last.
func explainEnd(err error, out *stdoutWatch, stderr *tailBuffer, done <-chan struct{}, waitExit bool, exit func() string) error {
	ended := false
	if waitExit {
		t := time.NewTimer(exitWait)
		select {
		case <-done:
			ended = true
		case <-t.C:
		}
		t.Stop()
	} else {
		select {
		case <-done:
			ended = true
		default:
		}
	}
	if line, ok := out.bad(); ok {
		// Its exit, if seen, follows the client's hanging up: not news.
		err = fmt.Errorf("the server wrote to stdout a line that is not JSON-RPC: %q (a stdio server may write only JSON-RPC messages there; its logs belong on stderr)", line)
	} else if ended {
		err = errors.New(exit() + " before it answered")
	}
	return stderr.explain(err)
}

// stdoutWatch passes a server's stdout to the client and keeps the first
// line that cannot be a JSON-RPC message (one that does not start with '{'
// or '['): a banner, a log line, a prompt.
type stdoutWatch struct {
	r io.ReadCloser

	mu        sync.Mutex
	midLine   bool   // the last byte seen was not a newline
	recording bool   // the bad line is still being read
	line      []byte // the bad line, up to maxBadLine bytes
	found     bool
}

// maxBadLine is how much of a bad line is kept.
const maxBadLine = 200

func (w *stdoutWatch) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	w.scan(p[:n])
	return n, err
}

func (w *stdoutWatch) Close() error { return w.r.Close() }

func (w *stdoutWatch) scan(p []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range p {
		if b == '\n' {
			w.midLine, w.recording = false, false
			continue
		}
		if w.recording {
			if len(w.line) < maxBadLine {
				w.line = append(w.line, b)
			}
			continue
		}
		if w.midLine {
			continue
		}
		if b == ' ' || b == '\t' || b == '\r' {
			continue // leading space: the line has not started yet
		}
		w.midLine = true
		if b != '{' && b != '[' && !w.found {
			w.found, w.recording = true, true
			w.line = append(w.line, b)
		}
	}
}

// bad is the first line that is not JSON-RPC, if one was seen.
func (w *stdoutWatch) bad() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimRight(string(w.line), "\r"), w.found
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
	out := &stdoutWatch{r: p.stdout}
	return started{
		transport: &sdk.IOTransport{Reader: out, Writer: inW},
		release:   p.stop,
		explain: func(err error, waitExit bool) error {
			return explainEnd(err, out, p.stderr, p.done, waitExit, p.exitText)
		},
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

// exitText says how the server ended (once done is closed).
func (p *sandboxProc) exitText() string {
	switch {
	case p.err != nil && !errors.Is(p.err, context.Canceled):
		return "the sandbox could not run the server: " + p.err.Error()
	case p.res.Signal != "":
		return "the server was killed by " + p.res.Signal
	default:
		return fmt.Sprintf("the server exited with status %d", p.res.ExitCode)
	}
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
		explain:   func(err error, _ bool) error { return err },
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
