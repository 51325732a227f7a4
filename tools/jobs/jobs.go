// Package jobs runs a session's background commands (bash with
// run_in_background): each job is one Sandbox.Run held by a goroutine the
// Manager owns, with no timeout, its output kept in a Ring, its stdin a
// pipe when asked for, and its whole process tree killed by Kill or Close
// exactly as an interrupted command's is.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// Runner runs a command (a sandbox.Sandbox is one).
type Runner interface {
	Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error)
}

// State is where a job is.
type State string

// The states of a job.
const (
	StateRunning State = "running"
	// StateExited: the command ended by itself (Code, or Signal).
	StateExited State = "exited"
	// StateKilled: Kill or Close ended it.
	StateKilled State = "killed"
	// StateFailed: it could not run, or the sandbox failed under it (Err).
	StateFailed State = "failed"
)

// Errors of the manager's calls.
var (
	// ErrNoJob: no job has the id.
	ErrNoJob = errors.New("no such job")
	// ErrNoStdin: the job was not started with stdin.
	ErrNoStdin = errors.New("the job was not started with stdin: true")
	// ErrStdinClosed: the job's stdin was closed already, or it ended.
	ErrStdinClosed = errors.New("the job's stdin is closed")
	// ErrClosed: the session ended; no new job starts.
	ErrClosed = errors.New("the session's jobs are closed")
	// ErrTooMany: MaxRunning jobs run already.
	ErrTooMany = fmt.Errorf("%d background jobs are running already: end one with job_kill first", MaxRunning)
)

// Bounds of a session's jobs, so that the host's memory stays bounded
// whatever the model starts: at most MaxRunning run at once, and of the
// jobs that ended only the newest MaxEnded are kept (with their output);
// an older one is forgotten when a new job starts.
const (
	MaxRunning = 16
	MaxEnded   = 32
)

// Status is a job's state at one moment.
type Status struct {
	ID      string    `json:"id"`
	Command string    `json:"command"`
	Pid     int       `json:"pid,omitempty"`
	State   State     `json:"state"`
	Code    int       `json:"code"`
	Signal  string    `json:"signal,omitempty"`
	Err     string    `json:"error,omitempty"`
	Stdin   bool      `json:"stdin,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// Output is the number of bytes the job printed so far.
	Output int64 `json:"output"`
	// LastLine is the job's last line of output, cut at 120 characters.
	LastLine string `json:"lastLine,omitempty"`
}

// Running reports whether the job still runs.
func (s Status) Running() bool { return s.State == StateRunning }

// Uptime is how long the job ran (so far).
func (s Status) Uptime(now time.Time) time.Duration {
	if !s.Ended.IsZero() {
		now = s.Ended
	}
	return now.Sub(s.Started).Round(time.Second)
}

// Ending says how a job ended, in words ("exited with code 0", "killed by
// SIGKILL"), or "running".
func (s Status) Ending() string {
	switch s.State {
	case StateRunning:
		return "running"
	case StateKilled:
		return "killed"
	case StateFailed:
		return "failed: " + s.Err
	}
	if s.Signal != "" {
		return fmt.Sprintf("exited: killed by %s (code %d)", s.Signal, s.Code)
	}
	return fmt.Sprintf("exited with code %d", s.Code)
}

// Event is what the manager tells its owner: a job started, ended by
// itself, or was killed.
type Event struct {
	// Kind is "started", "exited" (by itself, or failed) or "killed".
	Kind string
	Status
}

// Kinds of Event.
const (
	EventStarted = "started"
	EventExited  = "exited"
	EventKilled  = "killed"
)

// Spec is a job to start.
type Spec struct {
	Command string
	Dir     string
	Env     []string
	// Stdin makes the job's standard input a pipe Input writes to;
	// without it the job reads end-of-file at once.
	Stdin bool
}

// Manager runs a session's jobs. It owns every job's goroutine: Close
// kills them all and waits for them.
type Manager struct {
	run     Runner
	onEvent func(Event)
	// ringSize is each job's ring size (RingSize).
	ringSize int
	// closeWait bounds Close's wait for the kills to be confirmed.
	closeWait time.Duration

	mu     sync.Mutex
	jobs   []*Job
	next   int
	closed bool
	untold []string // exits the model was not told of yet
	wg     sync.WaitGroup
}

// Option configures a Manager.
type Option func(*Manager)

// WithRingSize sets the ring size of each job (tests).
func WithRingSize(n int) Option { return func(m *Manager) { m.ringSize = n } }

// NewManager returns a manager running jobs on r; onEvent (may be nil)
// hears every start, exit and kill, from the job's goroutine or Kill's
// caller; it must not block.
func NewManager(r Runner, onEvent func(Event), opts ...Option) *Manager {
	m := &Manager{run: r, onEvent: onEvent, ringSize: RingSize, closeWait: 10 * time.Second}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Job is one background command.
type Job struct {
	id      string
	command string
	started time.Time
	out     *Ring
	cancel  context.CancelFunc
	pid     atomic.Int64
	done    chan struct{} // closed when Run returned
	// started is closed once the command has started (its pid known) or
	// ended: the sandbox may have had to open first.
	running     chan struct{}
	startedOnce sync.Once

	stdinMu sync.Mutex
	stdin   *io.PipeWriter // nil without stdin, or once closed
	hasIn   bool

	mu     sync.Mutex
	killed bool
	told   bool // the model knows it ended (job_kill, job_output, bash)
	res    sandbox.Result
	err    error
	ended  time.Time
	seen   int64 // the offset job_output read up to
}

// ID is the job's id ("job-1").
func (j *Job) ID() string { return j.id }

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Output is the job's output (stdout and stderr together, as written).
func (j *Job) Output() *Ring { return j.out }

// Status is the job's state now.
func (j *Job) Status() Status {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := Status{ID: j.id, Command: j.command, Pid: int(j.pid.Load()), State: StateRunning, Started: j.started, Stdin: j.hasIn, Output: j.out.Total()}
	if !j.ended.IsZero() {
		s.Ended = j.ended
		s.Code, s.Signal = j.res.ExitCode, j.res.Signal
		switch {
		case j.killed:
			s.State = StateKilled
		case j.err != nil && !j.res.Interrupted:
			s.State, s.Err = StateFailed, j.err.Error()
		default:
			s.State = StateExited
		}
	}
	s.LastLine = lastLine(j.out)
	return s
}

func lastLine(r *Ring) string {
	c := r.Tail(1)
	s := strings.TrimSpace(strings.ToValidUTF8(string(c.Data), "?"))
	if i := strings.LastIndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	if r := []rune(s); len(r) > 120 {
		s = string(r[:120]) + "..."
	}
	return s
}

// Start starts spec as a new job. ctx is the starting tool call's: its
// values (the caller, which the egress proxy's asks list as "job-N:
// <command>") go with the job, its cancellation does not. The job runs
// until it ends, Kill or Close.
func (m *Manager) Start(ctx context.Context, spec Spec) (*Job, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if m.runningLocked() >= MaxRunning {
		m.mu.Unlock()
		return nil, ErrTooMany
	}
	m.forgetEndedLocked()
	m.next++
	j := &Job{id: fmt.Sprintf("job-%d", m.next), command: spec.Command, started: time.Now(), out: NewRing(m.ringSize), done: make(chan struct{}), running: make(chan struct{}), hasIn: spec.Stdin}
	caller, _ := sandbox.CallerFrom(ctx)
	caller.Summary = j.id + ": " + clipLine(spec.Command, 100)
	jctx, cancel := context.WithCancel(sandbox.WithCaller(context.WithoutCancel(ctx), caller))
	j.cancel = cancel
	m.jobs = append(m.jobs, j)
	m.wg.Add(1)
	m.mu.Unlock()

	cmd := sandbox.Command{Shell: spec.Command, Dir: spec.Dir, Env: spec.Env, Stdout: j.out, Stderr: j.out, Started: func(pid int) {
		j.pid.Store(int64(pid))
		j.markStarted()
	}}
	var pr *io.PipeReader
	if spec.Stdin {
		pr, j.stdin = io.Pipe()
		cmd.Stdin = pr
	}
	m.emit(Event{Kind: EventStarted, Status: j.Status()})
	go func() {
		defer m.wg.Done()
		defer cancel()
		res, err := m.run.Run(jctx, cmd)
		if pr != nil {
			pr.CloseWithError(ErrStdinClosed)
		}
		// The end is recorded, noted and published before Done closes, so
		// that whoever waited for Done (Kill) finds all of it.
		defer close(j.done)
		defer j.markStarted()
		j.mu.Lock()
		j.res, j.err, j.ended = res, err, time.Now()
		killed := j.killed
		j.mu.Unlock()
		st := j.Status()
		kind := EventExited
		if killed {
			kind = EventKilled
		} else {
			m.mu.Lock()
			m.untold = append(m.untold, j.id)
			m.mu.Unlock()
		}
		m.emit(Event{Kind: kind, Status: st})
	}()
	return j, nil
}

func (m *Manager) emit(e Event) {
	if m.onEvent != nil {
		m.onEvent(e)
	}
}

func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "..."
	}
	return s
}

func (j *Job) markStarted() { j.startedOnce.Do(func() { close(j.running) }) }

// First waits for the job to start (the sandbox may have to open first;
// bounded by ctx), then for its first output: until it printed limit
// bytes, ended, wait passed or ctx ended, whichever comes first.
func (j *Job) First(ctx context.Context, wait time.Duration, limit int64) {
	select {
	case <-j.running:
	case <-ctx.Done():
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		ch := j.out.Changed()
		if j.out.Total() >= limit {
			return
		}
		select {
		case <-ch:
		case <-j.done:
			return
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// runningLocked counts the jobs that have not ended. Callers hold m.mu.
func (m *Manager) runningLocked() int {
	n := 0
	for _, j := range m.jobs {
		select {
		case <-j.done:
		default:
			n++
		}
	}
	return n
}

// forgetEndedLocked drops the oldest ended jobs beyond the newest
// MaxEnded-1, making room for one more. Callers hold m.mu.
func (m *Manager) forgetEndedLocked() {
	ended := len(m.jobs) - m.runningLocked()
	kept := m.jobs[:0]
	for _, j := range m.jobs {
		select {
		case <-j.done:
			if ended >= MaxEnded {
				ended--
				continue
			}
		default:
		}
		kept = append(kept, j)
	}
	clear(m.jobs[len(kept):])
	m.jobs = kept
}

// Get returns the job with the id.
func (m *Manager) Get(id string) (*Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range m.jobs {
		if j.id == id {
			return j, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNoJob, id)
}

// IDs lists the ids of every job, oldest first (for error texts).
func (m *Manager) IDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, len(m.jobs))
	for i, j := range m.jobs {
		out[i] = j.id
	}
	return out
}

// List is the status of every job, oldest first.
func (m *Manager) List() []Status {
	m.mu.Lock()
	list := append([]*Job(nil), m.jobs...)
	m.mu.Unlock()
	out := make([]Status, len(list))
	for i, j := range list {
		out[i] = j.Status()
	}
	return out
}

// Running lists the jobs that still run.
func (m *Manager) Running() []Status {
	var out []Status
	for _, s := range m.List() {
		if s.Running() {
			out = append(out, s)
		}
	}
	return out
}

// Read is a read of a job's output.
type Read struct {
	Chunk
	Status Status
}

// ReadOptions say which output a Read returns and how long it waits.
type ReadOptions struct {
	// Since is a byte offset; nil means where the last read ended.
	Since *int64
	// Tail, when > 0, returns the last Tail lines instead.
	Tail int
	// Wait, when > 0, waits that long for output after Since (or, with
	// Tail, for any new output) or for the end, whichever comes first.
	Wait time.Duration
	// Limit, when > 0, returns at most that many bytes: the first ones
	// after Since (the next read goes on from there), the last ones of a
	// Tail.
	Limit int
}

// Read returns the job's output as o asks, waiting as it says.
func (j *Job) Read(ctx context.Context, o ReadOptions) Read {
	j.mu.Lock()
	since := j.seen
	j.mu.Unlock()
	if o.Since != nil {
		since = *o.Since
	}
	if o.Tail > 0 {
		since = j.out.Total()
	}
	if o.Wait > 0 {
		t := time.NewTimer(o.Wait)
		defer t.Stop()
	wait:
		for {
			ch := j.out.Changed()
			if j.out.Total() > since {
				break
			}
			select {
			case <-ch:
			case <-j.done:
				break wait
			case <-t.C:
				break wait
			case <-ctx.Done():
				break wait
			}
		}
	}
	// The status first: output written before the end is all in the ring
	// once done is closed, so a read that sees the end sees all of it.
	st := j.Status()
	var c Chunk
	if o.Tail > 0 {
		c = j.out.Tail(o.Tail)
		if o.Limit > 0 && len(c.Data) > o.Limit {
			cut := len(c.Data) - o.Limit
			c.Data, c.From = c.Data[cut:], c.From+int64(cut)
		}
	} else {
		c = j.out.Since(since)
		if o.Limit > 0 && len(c.Data) > o.Limit {
			c.Data = c.Data[:o.Limit]
			c.Next = c.From + int64(o.Limit)
		}
	}
	j.mu.Lock()
	j.seen = max(j.seen, c.Next)
	if !st.Running() {
		j.told = true
	}
	j.mu.Unlock()
	return Read{Chunk: c, Status: st}
}

// MarkTold records that the model was told how the job ended (a bash
// result that saw the exit), so no note repeats it.
func (j *Job) MarkTold() {
	j.mu.Lock()
	j.told = true
	j.mu.Unlock()
}

// Input writes text to the job's stdin, then closes it when closeIn.
func (j *Job) Input(text string, closeIn bool) error {
	if !j.hasIn {
		return ErrNoStdin
	}
	j.stdinMu.Lock()
	defer j.stdinMu.Unlock()
	if j.stdin == nil {
		return ErrStdinClosed
	}
	if !j.Status().Running() {
		return ErrStdinClosed
	}
	if text != "" {
		if _, err := j.stdin.Write([]byte(text)); err != nil {
			return ErrStdinClosed
		}
	}
	if closeIn {
		_ = j.stdin.Close()
		j.stdin = nil
	}
	return nil
}

// Kill kills the job's whole process tree and waits (bounded by ctx) for
// it to end; a job that ended already is left as it is. It returns the
// job's status after.
func (m *Manager) Kill(ctx context.Context, id string) (Status, error) {
	j, err := m.Get(id)
	if err != nil {
		return Status{}, err
	}
	j.mu.Lock()
	if j.ended.IsZero() {
		j.killed = true
	}
	j.told = true
	j.mu.Unlock()
	j.cancel()
	select {
	case <-j.done:
	case <-ctx.Done():
		return j.Status(), ctx.Err()
	}
	return j.Status(), nil
}

// KillAll kills every running job and waits for them (bounded by ctx).
func (m *Manager) KillAll(ctx context.Context) error {
	var errs []error
	for _, s := range m.Running() {
		if _, err := m.Kill(ctx, s.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Notes returns one line for each job that ended by itself since the last
// call and whose end the model was not told of otherwise, once each.
func (m *Manager) Notes() []string {
	m.mu.Lock()
	ids := m.untold
	m.untold = nil
	m.mu.Unlock()
	var out []string
	for _, id := range ids {
		j, err := m.Get(id)
		if err != nil {
			continue
		}
		j.mu.Lock()
		told := j.told
		j.told = true
		j.mu.Unlock()
		if told {
			continue
		}
		st := j.Status()
		out = append(out, fmt.Sprintf("[job] %s (%s) %s after %s; read its output with job_output", st.ID, clipLine(st.Command, 60), st.Ending(), st.Uptime(time.Now())))
	}
	return out
}

// Close kills every job and waits for their goroutines (at most a bounded
// while: the sandbox's own close kills what is left). No job starts after.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	list := append([]*Job(nil), m.jobs...)
	m.mu.Unlock()
	for _, j := range list {
		j.mu.Lock()
		if j.ended.IsZero() {
			j.killed = true
		}
		j.mu.Unlock()
		j.cancel()
	}
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(m.closeWait):
		return fmt.Errorf("close jobs: %d job(s) did not confirm the kill within %s", len(m.Running()), m.closeWait)
	}
}
