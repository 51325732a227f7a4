package helper

import (
	"bytes"
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
	// Reaper overrides the Runner's reaper command line (WithReaper) when
	// not nil.
	Reaper []string
	// OwnProcess says Serve is the whole process (`helper serve`): it makes
	// the process a child subreaper and kills every process that lands on
	// it (one whose reaper was killed), makes sure it is not dumpable (a
	// command can neither ptrace it nor open its descriptors through
	// /proc), and raises its commands' oom_score_adj to CommandOOMScoreAdj,
	// so that under memory pressure the kernel kills commands first.
	OwnProcess bool
	// PassSocket, when set, is the host's Unix socket that takes the
	// sockets of dial requests carrying a token (see the protocol);
	// without it, or when a hand-over fails, a connection's bytes go over
	// the channel.
	PassSocket string
}

// CommandOOMScoreAdj is the oom_score_adj of an owned Serve's commands.
// The helper's own processes keep the container's (they are not dumpable,
// so their /proc files are not the user's to write: the score is raised
// on each command as its reaper starts it).
const CommandOOMScoreAdj = 1000

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
	if opts.Reaper != nil {
		ropts = append(ropts, WithReaper(opts.Reaper))
	}
	if opts.OwnProcess {
		ropts = append(ropts, WithOOMScoreAdj(CommandOOMScoreAdj))
	}
	runner, err := NewRunner(opts.SessionID, ropts...)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s := &server{runner: runner, out: w, enc: json.NewEncoder(w), log: opts.Log, cmds: make(map[uint64]*serverCmd), state: opts.State,
		conns: make(map[uint64]*msgConn), passSocket: opts.PassSocket}
	s.dialCtx, s.stopDials = context.WithCancel(ctx)
	defer s.stopDials()
	if opts.OwnProcess {
		stop, err := s.ownProcess()
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer stop()
	}
	if err := runner.Prewarm(); err != nil {
		s.logf("%v", err)
	}

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
	out   io.Writer
	enc   *json.Encoder

	mu   sync.Mutex
	cmds map[uint64]*serverCmd
	wg   sync.WaitGroup

	// conns are the connections whose bytes go over the channel, by id;
	// shut is set once the session ends (guarded by mu). dialWG counts
	// the dial and listeners goroutines.
	conns      map[uint64]*msgConn
	shut       bool
	dialWG     sync.WaitGroup
	passSocket string
	dialCtx    context.Context // ends with the session: dials under way stop
	stopDials  context.CancelFunc

	state     func() string
	stateMu   sync.Mutex
	lastState string
}

// stateChange returns the state message when the state changed since the
// last report, and a function to call once it was sent.
func (s *server) stateChange() (Message, func(), bool) {
	if s.state == nil {
		return Message{}, nil, false
	}
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	st := s.state()
	if st == s.lastState {
		return Message{}, nil, false
	}
	sent := func() {
		s.stateMu.Lock()
		s.lastState = st
		s.stateMu.Unlock()
	}
	return Message{Type: TypeState, State: st}, sent, true
}

// startedDelay is how long the started message may wait to go out with the
// command's first output or its exit: a short command's started and exit
// then cross the engine's stream in one write.
const startedDelay = 10 * time.Millisecond

type serverCmd struct {
	cancel context.CancelFunc
	stdin  *stdinFeed // nil without stdin

	ready    chan struct{} // closed once the command started (started is set)
	started  Message
	announce sync.Once     // sends started, before any out message
	timer    *time.Timer   // announces after startedDelay
	fired    chan struct{} // closed when the timer's announcement is done
}

// announce sends sc's started message unless it went out already.
func (s *server) announce(sc *serverCmd) {
	sc.announce.Do(func() { _ = s.send(sc.started) })
}

// send writes one message. The encoder has copied m.Data by the time it
// returns, so callers may reuse their buffers.
func (s *server) send(m Message) error {
	s.encMu.Lock()
	defer s.encMu.Unlock()
	return s.enc.Encode(m)
}

// sendAll writes msgs in one write to the stream.
func (s *server) sendAll(msgs ...Message) error {
	if len(msgs) == 1 {
		return s.send(msgs[0])
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, m := range msgs {
		if err := enc.Encode(m); err != nil {
			return err
		}
	}
	s.encMu.Lock()
	defer s.encMu.Unlock()
	_, err := s.out.Write(buf.Bytes())
	return err
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
	case TypeDial:
		if m.Port < 1 || m.Port > 65535 {
			s.refuse(m.ID, "dial: %d is not a TCP port", m.Port)
			return
		}
		s.mu.Lock()
		shut := s.shut
		if !shut {
			s.dialWG.Add(1)
		}
		s.mu.Unlock()
		if shut {
			return
		}
		go s.dial(s.dialCtx, m)
	case TypeData, TypeAck, TypeClose:
		s.connMessage(m)
	case TypeListeners:
		s.dialWG.Add(1)
		go s.listeners(m)
	default:
		s.refuse(m.ID, "unknown message type %q", m.Type)
	}
}

// start registers the command and runs it on its own goroutine.
func (s *server) start(ctx context.Context, m Message) {
	ctx, cancel := context.WithCancel(ctx)
	sc := &serverCmd{cancel: cancel, ready: make(chan struct{}), fired: make(chan struct{})}
	cmd := sandbox.Command{
		Args:    m.Args,
		Shell:   m.Shell,
		Dir:     m.Dir,
		Env:     m.Env,
		Timeout: time.Duration(m.TimeoutMs) * time.Millisecond,
		Stdout:  outWriter{s, m.ID, StreamStdout, sc},
		Stderr:  outWriter{s, m.ID, StreamStderr, sc},
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

	// What is still to say goes out in one write: started (when the
	// command ended before it was announced), the state, the exit.
	var msgs []Message
	if closed(sc.ready) {
		if !sc.timer.Stop() {
			<-sc.fired
		}
		sc.announce.Do(func() { msgs = append(msgs, sc.started) })
	}
	state, stateSent, changed := s.stateChange()
	if changed {
		msgs = append(msgs, state)
	}
	exit := Message{ID: id, Type: TypeExit, Result: &res}
	if err != nil && !errors.Is(err, context.Canceled) {
		exit.Error, exit.Code = err.Error(), errorCode(err)
		if reflect.DeepEqual(res, sandbox.Result{}) {
			exit.Result = nil // never started
		}
	}
	if s.sendAll(append(msgs, exit)...) == nil && changed {
		stateSent()
	}
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
	sc.started = Message{ID: id, Type: TypeStarted, Marker: p.Marker(), Pid: p.Pid()}
	sc.timer = time.AfterFunc(startedDelay, func() {
		defer close(sc.fired)
		s.announce(sc)
	})
	close(sc.ready)
	return p.Wait()
}

// shutdown kills the session's commands and every process they left, and
// waits for the command goroutines.
func (s *server) shutdown() {
	s.closeConns()
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
	s      *server
	id     uint64
	stream int
	sc     *serverCmd
}

func (w outWriter) Write(p []byte) (int, error) {
	<-w.sc.ready
	w.s.announce(w.sc)
	if err := w.s.send(Message{ID: w.id, Type: TypeOut, Stream: w.stream, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}
