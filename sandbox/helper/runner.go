package helper

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// DefaultPipeGrace is how long Wait lets the output pipes reach EOF after a
// command's main process ended. A background child that still holds them
// does not keep the call open longer than that.
const DefaultPipeGrace = 250 * time.Millisecond

// Runner starts commands for one session. Each command runs under a reaper
// (see reap.go), which keeps everything the command starts in its subtree
// and kills that subtree on request; it also gets the marker
// "<sessionID>.<seq>" in MarkerEnv and its own process group, extra layers
// of the kill. Without a reaper (WithReaper(nil), or a program that is not
// shiro) commands start directly and a kill reaches only the group and the
// marker. A Runner is safe for concurrent use.
type Runner struct {
	sessionID   string
	env         []string
	dir         string
	grace       time.Duration
	oom         *oomCounter
	reaper      []string
	oomScoreAdj int
	seq         atomic.Uint64
	pool        *reaperPool // nil without a reaper
	login       loginEnv

	afterGrace func() // test hook: Wait gave up waiting for EOF
}

// RunnerOption configures a Runner.
type RunnerOption func(*Runner)

// WithEnv sets the base environment of every command (default os.Environ()).
// A MarkerEnv entry in it is dropped.
func WithEnv(env []string) RunnerOption {
	return func(r *Runner) { r.env = env }
}

// WithDir sets the directory of commands without Dir; a relative
// Command.Dir is taken from it. Default: the current directory.
func WithDir(dir string) RunnerOption {
	return func(r *Runner) { r.dir = dir }
}

// WithPipeGrace overrides DefaultPipeGrace.
func WithPipeGrace(d time.Duration) RunnerOption {
	return func(r *Runner) { r.grace = d }
}

// WithReaper sets the command line that starts a reaper (default
// DefaultReaper()); nil starts commands directly. The Runner adds the
// flags of ReapOptions to it.
func WithReaper(argv []string) RunnerOption {
	return func(r *Runner) { r.reaper = argv }
}

// WithOOMScoreAdj makes the reapers raise the oom_score_adj of each command
// they start to n, so that under memory pressure the kernel kills them
// before the processes that serve the session.
func WithOOMScoreAdj(n int) RunnerOption {
	return func(r *Runner) { r.oomScoreAdj = n }
}

// NewRunner returns a Runner for sessionID (see ValidateSessionID).
func NewRunner(sessionID string, opts ...RunnerOption) (*Runner, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, fmt.Errorf("new runner: %w", err)
	}
	r := &Runner{sessionID: sessionID, env: os.Environ(), grace: DefaultPipeGrace, oom: newOOMCounter(oomFiles), reaper: DefaultReaper()}
	for _, o := range opts {
		o(r)
	}
	r.env = withoutMarker(r.env)
	if len(r.reaper) > 0 && supported {
		argv := append(append([]string(nil), r.reaper...), ReapOptions{SessionID: sessionID, OOMScoreAdj: r.oomScoreAdj}.args()...)
		r.pool = newReaperPool(argv)
	}
	return r, nil
}

// NewSessionID returns a random session ID.
func NewSessionID() string {
	return strings.ToLower(rand.Text()[:16])
}

// ValidateSessionID reports a session ID that cannot prefix markers: it must
// be 1 to 64 characters from [A-Za-z0-9_-], so that no session's prefix
// "<id>." is a prefix of another's.
func ValidateSessionID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("session id %q: want 1 to 64 characters", id)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("session id %q: only letters, digits, _ and - allowed", id)
		}
	}
	return nil
}

// SessionID returns the session the Runner's markers belong to.
func (r *Runner) SessionID() string { return r.sessionID }

// KillSession kills every process started by this Runner's session,
// including background processes of commands that already ended: every
// reaper kills its subtree and exits (the Runner starts new ones when it
// runs again), then every process that carries one of the session's markers
// is killed.
func (r *Runner) KillSession() error {
	if r.pool != nil {
		r.pool.closeAll()
		r.pool.wait()
	}
	return killMarkerSession(r.sessionID)
}

// Prewarm starts a reaper ahead of the first command, so that it does not
// wait for one to start. It does nothing without a reaper.
func (r *Runner) Prewarm() error {
	if r.pool == nil {
		return nil
	}
	return r.pool.warm()
}

// Run starts cmd and waits for it: Start then Process.Wait. A command that
// cannot start (no such binary, no shell, missing directory) is an error
// without a Result; errors.Is finds exec.ErrNotFound, sandbox.ErrNoShell or
// fs.ErrNotExist in it.
func (r *Runner) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	p, err := r.Start(ctx, cmd)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return sandbox.Result{Interrupted: true}, err
		}
		return sandbox.Result{}, err
	}
	return p.Wait()
}

// Start starts cmd. Cancelling ctx kills the command's tree (as does
// cmd.Timeout); the caller must call Wait.
//
// Stdout and Stderr receive each chunk as it arrives, from two goroutines
// that never call them at the same time (one writer may serve both). A
// writer that fails stops receiving; the command goes on and Wait reports the
// error. Stdin, when set, is copied to the command until EOF; after the
// command ended its copy stops at the next chunk, but a Read already blocked
// on Stdin keeps the copying goroutine until it returns.
func (r *Runner) Start(ctx context.Context, cmd sandbox.Command) (*Process, error) {
	if !supported {
		return nil, fmt.Errorf("start command: %w", errors.ErrUnsupported)
	}
	if err := cmd.Validate(); err != nil {
		return nil, fmt.Errorf("start command: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, shell, err := r.command(ctx, cmd)
	if err != nil {
		return nil, err
	}
	id := r.seq.Add(1)
	return r.start(ctx, cmd, c, shell, id, r.sessionID+"."+strconv.FormatUint(id, 10))
}

// start starts c, built from cmd, as command id with marker.
func (r *Runner) start(ctx context.Context, cmd sandbox.Command, c *exec.Cmd, shell string, id uint64, marker string) (*Process, error) {
	c.Env = append(c.Env, MarkerEntry(marker))
	p := r.newProcess(ctx, cmd, shell, id, marker)
	if err := p.start(c, cmd, r.pool); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Args[0], err)
	}
	return p, nil
}

// newProcess is command id, built from cmd, before it starts.
func (r *Runner) newProcess(ctx context.Context, cmd sandbox.Command, shell string, id uint64, marker string) *Process {
	return &Process{
		ctx:        ctx,
		id:         id,
		marker:     marker,
		shell:      shell,
		timeout:    cmd.Timeout,
		grace:      r.grace,
		oom:        r.oom,
		afterGrace: r.afterGrace,
		exited:     make(chan struct{}),
		drained:    make(chan struct{}),
	}
}

// command builds the exec.Cmd for cmd, without its streams and marker.
func (r *Runner) command(ctx context.Context, cmd sandbox.Command) (*exec.Cmd, string, error) {
	var c *exec.Cmd
	var shell string
	env := r.env
	if len(cmd.Args) > 0 {
		c = exec.Command(cmd.Args[0], cmd.Args[1:]...)
		if c.Err != nil {
			return nil, "", fmt.Errorf("start %s: %w", cmd.Args[0], c.Err)
		}
	} else {
		path, name, err := lookShell()
		if err != nil {
			return nil, "", err
		}
		base, flag := r.env, "-"+shellFlags[name]
		if name == "bash" {
			if env := r.loginEnvironment(ctx, path); env != nil {
				base, flag = env, "-c"
			}
		}
		c = &exec.Cmd{Path: path, Args: []string{name, flag, cmd.Shell}}
		shell = name
		env = base
	}
	c.Dir = r.dir
	if cmd.Dir != "" {
		c.Dir = cmd.Dir
		if !filepath.IsAbs(cmd.Dir) && r.dir != "" {
			c.Dir = filepath.Join(r.dir, cmd.Dir)
		}
	}
	c.Env = make([]string, 0, len(env)+len(cmd.Env)+2)
	c.Env = append(c.Env, env...)
	c.Env = append(c.Env, withoutMarker(cmd.Env)...)
	if c.Dir != "" {
		// The SysProcAttr we set turns off os.StartProcess's own check, which
		// would otherwise report a missing directory as a missing binary.
		fi, err := os.Stat(c.Dir)
		if err != nil {
			return nil, "", fmt.Errorf("working directory: %w", err)
		}
		if !fi.IsDir() {
			return nil, "", fmt.Errorf("working directory %s: not a directory", c.Dir)
		}
		if abs, err := filepath.Abs(c.Dir); err == nil {
			c.Env = append(c.Env, "PWD="+abs)
		}
	}
	c.SysProcAttr = sysProcAttr()
	return c, shell, nil
}

var shellFlags = map[string]string{"bash": "lc", "sh": "c"}

// lookShell finds bash, else sh.
func lookShell() (path, name string, err error) {
	for _, name := range []string{"bash", "sh"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, name, nil
		}
	}
	return "", "", sandbox.ErrNoShell
}

// MarkerEntry is the environment entry that marks a process with marker.
func MarkerEntry(marker string) string { return sandbox.MarkerEnv + "=" + marker }

func withoutMarker(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, sandbox.MarkerEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Process is a started command.
type Process struct {
	ctx        context.Context
	id         uint64
	marker     string
	shell      string
	timeout    time.Duration
	grace      time.Duration
	oom        *oomCounter
	afterGrace func()

	pid       int
	reaper    *reaper   // the command's reaper; nil when started directly
	cmd       *exec.Cmd // when started directly
	started   time.Time
	oomBefore uint64
	oomKnown  bool

	stdout, stderr *os.File // read ends
	stdin          *os.File // write end, when Stdin is copied
	outMu          sync.Mutex
	writeErr       error

	exited     chan struct{} // closed by finish
	finishOnce sync.Once
	exitCode   int
	signal     string
	waitErr    error
	reapMu     sync.Mutex // held while a directly started leader is reaped, and by Kill
	reaped     bool
	drained    chan struct{} // closed when both output readers stopped
}

// finish records how the main process ended; only the first call counts.
func (p *Process) finish(code int, signal string, err error) {
	p.finishOnce.Do(func() {
		p.exitCode, p.signal, p.waitErr = code, signal, err
		close(p.exited)
	})
}

func (p *Process) start(c *exec.Cmd, cmd sandbox.Command, pool *reaperPool) error {
	p.oomBefore, p.oomKnown = p.oom.read()
	p.started = time.Now()
	if err := p.spawn(c, cmd.Stdin, pool); err != nil {
		return err
	}
	p.attach(cmd)
	return nil
}

// spawn makes the command's pipes and starts c, under a reaper from pool
// when pool is set. The output is read, and stdin copied, once attach says
// where to.
func (p *Process) spawn(c *exec.Cmd, stdin io.Reader, pool *reaperPool) (err error) {
	var files []*os.File // ours to close whatever happens
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return err
	}
	errR, errW, err := pipe()
	if err != nil {
		return err
	}
	var inR, inW *os.File
	switch in := stdin.(type) {
	case nil:
		if pool != nil { // os/exec opens it itself
			if inR, err = os.Open(os.DevNull); err != nil {
				return err
			}
			files = append(files, inR)
		}
	case *os.File:
		inR = in
	default:
		if inR, inW, err = pipe(); err != nil {
			return err
		}
	}

	if pool != nil {
		err = p.startReaped(c, pool, []*os.File{inR, outW, errW})
	} else {
		err = p.startDirect(c, inR, outW, errW)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) { // the directory exists: the binary (or its interpreter) does not
			err = &exec.Error{Name: c.Args[0], Err: exec.ErrNotFound}
		}
		return err
	}
	p.stdout, p.stderr, p.stdin = outR, errR, inW
	// Close the child's ends (the child holds its copies); keep ours.
	childEnds := files[:0]
	for _, f := range files {
		if f != outR && f != errR && f != inW {
			childEnds = append(childEnds, f)
		}
	}
	files = childEnds
	return nil
}

// attach starts copying the command's output to cmd's writers, and cmd's
// Stdin to the command when spawn made a pipe for it.
func (p *Process) attach(cmd sandbox.Command) {
	var wg sync.WaitGroup
	wg.Add(2)
	go p.drain(&wg, p.stdout, cmd.Stdout)
	go p.drain(&wg, p.stderr, cmd.Stderr)
	go func() {
		wg.Wait()
		close(p.drained)
	}()
	if in := p.stdin; in != nil {
		go func() {
			_, _ = io.Copy(in, cmd.Stdin)
			_ = in.Close()
		}()
	}
}

// startReaped starts c under a reaper from pool; files are its stdin,
// stdout and stderr.
func (p *Process) startReaped(c *exec.Cmd, pool *reaperPool, files []*os.File) error {
	m := reapMsg{Op: reapStart, ID: p.id, Path: c.Path, Args: c.Args, Env: c.Env, Dir: c.Dir}
	for try := 0; ; try++ {
		r, err := pool.get()
		if err != nil {
			return err
		}
		p.reaper = r
		err = r.start(p, m, files)
		if errors.Is(err, errReaperDied) {
			// It died after it got the request, so the command may have
			// started and killed it before the answer went out: what
			// carries the marker goes, as after any reaper's death.
			_ = KillMarker(p.marker, false)
		}
		// An idle reaper may have died unnoticed (a command killed it):
		// then another one.
		if !errors.Is(err, errNotSent) || try > 0 {
			return err
		}
	}
}

// startDirect starts c as a child of this process.
func (p *Process) startDirect(c *exec.Cmd, stdin, stdout, stderr *os.File) error {
	if stdin != nil {
		c.Stdin = stdin
	}
	c.Stdout, c.Stderr = stdout, stderr
	if err := c.Start(); err != nil {
		return err
	}
	p.cmd = c
	p.pid = c.Process.Pid
	go func() {
		// Wait for the exit without reaping, so the pid (and the process
		// group it leads) cannot be reused while Kill may still signal it;
		// then reap under reapMu.
		waitExited(c.Process.Pid)
		p.reapMu.Lock()
		err := c.Wait()
		p.reaped = true
		p.reapMu.Unlock()
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			err = nil
		}
		code, sig := -1, ""
		if c.ProcessState != nil {
			code, sig = processExit(c.ProcessState)
		}
		p.finish(code, sig, err)
	}()
	return nil
}

// maxFinalDrain bounds what a drainer still reads once the pipe grace is
// over, when a background process keeps writing.
const maxFinalDrain = 1 << 20

// drain copies one output pipe to w until EOF, or until Wait ends the pipe
// grace with a read deadline: then it still takes what the pipe holds (its
// reader may simply not have been scheduled yet), without waiting for more.
func (p *Process) drain(wg *sync.WaitGroup, f *os.File, w io.Writer) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	write := func(b []byte) {
		if w == nil || len(b) == 0 {
			return
		}
		p.outMu.Lock()
		defer p.outMu.Unlock()
		if _, err := w.Write(b); err != nil {
			w = nil
			if p.writeErr == nil {
				p.writeErr = err
			}
		}
	}
	for {
		n, err := f.Read(buf)
		write(buf[:n])
		if errors.Is(err, os.ErrDeadlineExceeded) {
			_ = f.SetReadDeadline(time.Time{}) // readAvailable never waits
			for total := 0; total < maxFinalDrain; total += n {
				if n = readAvailable(f, buf); n <= 0 {
					break
				}
				write(buf[:n])
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// Marker returns the value of MarkerEnv in the command's environment.
func (p *Process) Marker() string { return p.marker }

// Pid returns the main process's pid (also its process group).
func (p *Process) Pid() int { return p.pid }

// Kill kills the command's tree and does not wait for Wait. Under a reaper:
// the reaper kills its whole subtree (the main process's group first);
// directly: the process group, while its leader is not reaped (after that
// its number may belong to an unrelated group). Then, in both cases, every
// process that carries the command's marker.
func (p *Process) Kill() error {
	var err error
	if p.reaper != nil {
		err = p.reaper.kill(p.id)
	} else {
		p.reapMu.Lock()
		if !p.reaped {
			err = killGroup(p.pid)
		}
		p.reapMu.Unlock()
	}
	return errors.Join(err, KillMarker(p.marker, false))
}

// Wait waits for the command's main process to exit (killing the tree first
// when the context is cancelled or the timeout passes), gives the output
// pipes the pipe grace to reach EOF, closes them and returns how the command
// ended. On cancellation it returns the Result (Interrupted set) with the
// context's error. Wait must be called exactly once.
func (p *Process) Wait() (sandbox.Result, error) {
	res := sandbox.Result{Shell: p.shell}
	var err error
	var timeout <-chan time.Time
	if p.timeout > 0 {
		t := time.NewTimer(time.Until(p.started.Add(p.timeout)))
		defer t.Stop()
		timeout = t.C
	}
	killed := false
	select {
	case <-p.exited:
	case <-timeout:
		if !closed(p.exited) {
			res.TimedOut = true
			killed = true
		}
	case <-p.ctx.Done():
		killed = true
	}
	if killed {
		if p.reaper != nil {
			// The reaper first: the marker scan below reads every process's
			// environment, and the main process's exit need not wait for it.
			_ = p.reaper.kill(p.id)
			<-p.exited
		}
		_ = p.Kill()
	}
	<-p.exited
	// Also when the process ended just before or by another kill (a session
	// kill races with the cancellation that ordered it).
	if err = p.ctx.Err(); err != nil && !res.TimedOut {
		res.Interrupted = true
	} else {
		err = nil
	}

	grace := time.NewTimer(p.grace)
	select {
	case <-p.drained:
	case <-grace.C:
		// A background process holds the pipes: stop waiting for EOF.
		for _, f := range []*os.File{p.stdout, p.stderr} {
			if f.SetReadDeadline(time.Now()) != nil {
				_ = f.Close() // not pollable: a blocked Read ends on close
			}
		}
		if p.afterGrace != nil {
			p.afterGrace()
		}
	}
	grace.Stop()
	<-p.drained
	_ = p.stdout.Close()
	_ = p.stderr.Close()
	if p.stdin != nil {
		_ = p.stdin.Close()
	}

	res.ExitCode, res.Signal = p.exitCode, p.signal
	if res.TimedOut {
		res.ExitCode, res.Signal = 128+9, "SIGKILL"
	}
	if after, ok := p.oom.read(); ok && p.oomKnown && after > p.oomBefore {
		res.OutOfMemory = true
	}
	res.Duration = time.Since(p.started)

	if p.waitErr != nil {
		if errors.Is(p.waitErr, errReaperDied) {
			// Its reaper cannot kill what is left: the marker may.
			_ = KillMarker(p.marker, false)
		}
		if err == nil {
			err = fmt.Errorf("wait: %w", p.waitErr)
		}
	}
	if err == nil && p.writeErr != nil {
		err = fmt.Errorf("write output: %w", p.writeErr)
	}
	return res, err
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
