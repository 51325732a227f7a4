package helper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// ServeOptions configures Serve.
type ServeOptions struct {
	// SessionID prefixes the markers of the session's commands (required,
	// see ValidateSessionID).
	SessionID string
	// Env is the base environment of every command; nil means os.Environ().
	Env []string
	// Dir is the directory of commands without one (the workspace).
	Dir string
	// PipeGrace overrides DefaultPipeGrace when positive.
	PipeGrace time.Duration
	// Log, when set, receives diagnostics about protocol problems.
	Log io.Writer
	// State, when set, is called after every command; when its value
	// differs from the last one sent, a state message goes out before the
	// command's exit (the host's git boundary watches the shadow's
	// fingerprint this way).
	State func() string
}

// Serve answers the requests read from r, writing replies to w, until r ends
// (the host closed the session) or ctx is done. Commands run concurrently.
// Before returning it kills every process of the session and waits for all
// its command goroutines; it returns nil at EOF and ctx's error when ctx
// ended it. Serve neither closes r nor w. If ctx ends it while a read of r is
// pending, the goroutine reading r stops when that read returns: close r to
// end it.
func Serve(ctx context.Context, r io.Reader, w io.Writer, opts ServeOptions) error {
	ropts := []RunnerOption{WithDir(opts.Dir)}
	if opts.Env != nil {
		ropts = append(ropts, WithEnv(opts.Env))
	}
	if opts.PipeGrace > 0 {
		ropts = append(ropts, WithPipeGrace(opts.PipeGrace))
	}
	runner, err := NewRunner(opts.SessionID, ropts...)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s := &server{runner: runner, enc: json.NewEncoder(w), log: opts.Log, cmds: make(map[uint64]*serverCmd), state: opts.State}

	msgs := make(chan Message)
	readErr := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		dec := json.NewDecoder(r)
		for {
			var m Message
			if err := dec.Decode(&m); err != nil {
				readErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-stop:
				return
			}
		}
	}()

	var result error
loop:
	for {
		select {
		case m := <-msgs:
			s.handle(ctx, m)
		case err := <-readErr:
			if !errors.Is(err, io.EOF) {
				result = fmt.Errorf("read request: %w", err)
			}
			break loop
		case <-ctx.Done():
			result = ctx.Err()
			break loop
		}
	}
	close(stop)
	s.shutdown()
	return result
}

type server struct {
	runner *Runner
	log    io.Writer

	encMu sync.Mutex
	enc   *json.Encoder

	mu   sync.Mutex
	cmds map[uint64]*serverCmd
	wg   sync.WaitGroup

	state     func() string
	stateMu   sync.Mutex
	lastState string
}

// reportState sends the state when it changed since the last report.
func (s *server) reportState() {
	if s.state == nil {
		return
	}
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	st := s.state()
	if st == s.lastState {
		return
	}
	if s.send(Message{Type: TypeState, State: st}) == nil {
		s.lastState = st
	}
}

type serverCmd struct {
	cancel  context.CancelFunc
	stdin   *stdinFeed    // nil without stdin
	started chan struct{} // closed once the started message is sent
}

// send writes one message. The encoder has copied m.Data by the time it
// returns, so callers may reuse their buffers.
func (s *server) send(m Message) error {
	s.encMu.Lock()
	defer s.encMu.Unlock()
	return s.enc.Encode(m)
}

func (s *server) logf(format string, args ...any) {
	if s.log != nil {
		fmt.Fprintf(s.log, "shiro helper: "+format+"\n", args...)
	}
}

// refuse reports a request the helper will not carry out.
func (s *server) refuse(id uint64, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.logf("%s", msg)
	_ = s.send(Message{ID: id, Type: TypeError, Error: msg})
}

func (s *server) handle(ctx context.Context, m Message) {
	s.mu.Lock()
	sc := s.cmds[m.ID]
	s.mu.Unlock()
	switch m.Type {
	case TypeRun:
		if sc != nil {
			s.refuse(m.ID, "run: id %d is already running", m.ID)
			return
		}
		s.start(ctx, m)
	case TypeStdin:
		if sc != nil && sc.stdin != nil {
			sc.stdin.push(m.Data, m.EOF)
		}
	case TypeKill:
		if sc != nil {
			sc.cancel()
		}
	default:
		s.refuse(m.ID, "unknown message type %q", m.Type)
	}
}

// start registers the command and runs it on its own goroutine.
func (s *server) start(ctx context.Context, m Message) {
	ctx, cancel := context.WithCancel(ctx)
	sc := &serverCmd{cancel: cancel, started: make(chan struct{})}
	cmd := sandbox.Command{
		Args:    m.Args,
		Shell:   m.Shell,
		Dir:     m.Dir,
		Env:     m.Env,
		Timeout: time.Duration(m.TimeoutMs) * time.Millisecond,
		Stdout:  outWriter{s, m.ID, StreamStdout, sc.started},
		Stderr:  outWriter{s, m.ID, StreamStderr, sc.started},
	}
	if m.Stdin {
		feed, childEnd, err := newStdinFeed()
		if err != nil {
			cancel()
			_ = s.send(Message{ID: m.ID, Type: TypeExit, Error: fmt.Sprintf("stdin pipe: %v", err)})
			return
		}
		sc.stdin = feed
		cmd.Stdin = childEnd
	}
	s.mu.Lock()
	s.cmds[m.ID] = sc
	s.mu.Unlock()
	s.wg.Add(1)
	go s.run(ctx, m.ID, sc, cmd)
}

func (s *server) run(ctx context.Context, id uint64, sc *serverCmd, cmd sandbox.Command) {
	defer s.wg.Done()
	defer sc.cancel()
	res, err := s.execute(ctx, id, sc, cmd)
	if sc.stdin != nil {
		sc.stdin.stop()
	}
	s.mu.Lock()
	delete(s.cmds, id)
	s.mu.Unlock()

	s.reportState()
	exit := Message{ID: id, Type: TypeExit, Result: &res}
	if err != nil && !errors.Is(err, context.Canceled) {
		exit.Error, exit.Code = err.Error(), errorCode(err)
		if reflect.DeepEqual(res, sandbox.Result{}) {
			exit.Result = nil // never started
		}
	}
	_ = s.send(exit)
}

func (s *server) execute(ctx context.Context, id uint64, sc *serverCmd, cmd sandbox.Command) (sandbox.Result, error) {
	p, err := s.runner.Start(ctx, cmd)
	if sc.stdin != nil {
		_ = cmd.Stdin.(*os.File).Close() // the child has its copy
	}
	if err != nil {
		if ctx.Err() != nil {
			return sandbox.Result{Interrupted: true}, ctx.Err()
		}
		return sandbox.Result{}, err
	}
	if sc.stdin != nil {
		sc.stdin.run()
	}
	_ = s.send(Message{ID: id, Type: TypeStarted, Marker: p.Marker(), Pid: p.Pid()})
	close(sc.started)
	return p.Wait()
}

// shutdown kills the session's commands and every process they left, and
// waits for the command goroutines.
func (s *server) shutdown() {
	s.mu.Lock()
	for _, sc := range s.cmds {
		sc.cancel()
	}
	s.mu.Unlock()
	if err := s.runner.KillSession(); err != nil {
		s.logf("%v", err)
	}
	s.wg.Wait()
	if err := s.runner.KillSession(); err != nil {
		s.logf("%v", err)
	}
}

// outWriter turns a command's output into out messages, all after the
// started message.
type outWriter struct {
	s       *server
	id      uint64
	stream  int
	started <-chan struct{}
}

func (w outWriter) Write(p []byte) (int, error) {
	<-w.started
	if err := w.s.send(Message{ID: w.id, Type: TypeOut, Stream: w.stream, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}
