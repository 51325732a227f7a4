package jobs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/local"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newManager runs jobs on the host (sandbox/local) in a temporary
// workspace; the test's end closes both.
func newManager(t *testing.T) (*Manager, *events) {
	m, ev, _ := newManagerIn(t)
	return m, ev
}

func newManagerIn(t *testing.T) (*Manager, *events, string) {
	t.Helper()
	dir := t.TempDir()
	sb, err := local.New(dir, local.WithReaper(nil))
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	m := NewManager(sb, ev.add)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		sb.Close()
	})
	return m, ev, dir
}

type events struct {
	mu   sync.Mutex
	list []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
}

func (e *events) kinds() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.list {
		out = append(out, ev.ID+" "+ev.Kind)
	}
	return out
}

func waitDone(t *testing.T, j *Job) {
	t.Helper()
	select {
	case <-j.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not end", j.ID())
	}
}

func TestJobExits(t *testing.T) {
	t.Parallel()
	m, ev := newManager(t)
	j, err := m.Start(t.Context(), Spec{Command: "echo out; echo err >&2; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, j)
	st := j.Status()
	if st.State != StateExited || st.Code != 3 || st.Pid <= 0 {
		t.Fatalf("status %+v, want exited with code 3 and a pid", st)
	}
	r := j.Read(t.Context(), ReadOptions{})
	if got := string(r.Data); !strings.Contains(got, "out\n") || !strings.Contains(got, "err\n") {
		t.Fatalf("output %q", got)
	}
	if again := j.Read(t.Context(), ReadOptions{}); len(again.Data) != 0 || again.From != r.Next {
		t.Fatalf("a second read without since returned %q from %d", again.Data, again.From)
	}
	// The read saw the end: no note repeats it.
	if n := m.Notes(); len(n) != 0 {
		t.Fatalf("notes after the model read the end: %q", n)
	}
	if k := ev.kinds(); len(k) != 2 || k[0] != "job-1 started" || k[1] != "job-1 exited" {
		t.Fatalf("events %q", k)
	}
}

func TestNoteOnceForAnExitNobodyRead(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	j, err := m.Start(t.Context(), Spec{Command: "exit 7"})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, j)
	// The end is published before Notes can see it: wait for it.
	deadline := time.Now().Add(5 * time.Second)
	var notes []string
	for len(notes) == 0 && time.Now().Before(deadline) {
		notes = m.Notes()
		if len(notes) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "job-1") || !strings.Contains(notes[0], "exited with code 7") {
		t.Fatalf("notes %q", notes)
	}
	if again := m.Notes(); len(again) != 0 {
		t.Fatalf("the note came twice: %q", again)
	}
}

func TestWaitForOutput(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	j, err := m.Start(t.Context(), Spec{Command: "sleep 0.3; echo late; sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	r := j.Read(t.Context(), ReadOptions{Wait: 10 * time.Second})
	if string(r.Data) != "late\n" || !r.Status.Running() {
		t.Fatalf("read %q, status %s", r.Data, r.Status.State)
	}
	start := time.Now()
	r = j.Read(t.Context(), ReadOptions{Wait: 200 * time.Millisecond})
	if len(r.Data) != 0 || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("a wait with nothing new returned %q after %s", r.Data, time.Since(start))
	}
}

func TestKillReachesForkedAndSetsidChildren(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Fatal("setsid is needed (util-linux)")
	}
	m, ev, dir := newManagerIn(t)
	j, err := m.Start(t.Context(), Spec{Command: `(setsid sh -c 'echo $$ > pid1; exec sleep 300' &) ; sh -c 'sleep 300 & echo $! > pid2; wait' & echo ready; wait`})
	if err != nil {
		t.Fatal(err)
	}
	j.Read(t.Context(), ReadOptions{Wait: 10 * time.Second})
	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for len(pids) < 2 && time.Now().Before(deadline) {
		pids = append(readPids(filepath.Join(dir, "pid1")), readPids(filepath.Join(dir, "pid2"))...)
		time.Sleep(20 * time.Millisecond)
	}
	if len(pids) < 2 {
		t.Fatalf("the job's children did not start: %v", pids)
	}
	st, err := m.Kill(t.Context(), j.ID())
	if err != nil || st.State != StateKilled {
		t.Fatalf("kill: %+v, %v", st, err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d of the job outlived job_kill", pid)
		}
	}
	if k := ev.kinds(); k[len(k)-1] != "job-1 killed" {
		t.Fatalf("events %q", k)
	}
	if n := m.Notes(); len(n) != 0 {
		t.Fatalf("a killed job got a note: %q", n)
	}
}

func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// alive reports a process that exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func TestStdin(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t)
	t.Run("a job without stdin reads end-of-file", func(t *testing.T) {
		j, err := m.Start(t.Context(), Spec{Command: "read line; echo \"read: $? [$line]\""})
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, j)
		if r := j.Read(t.Context(), ReadOptions{}); string(r.Data) != "read: 1 []\n" {
			t.Fatalf("output %q", r.Data)
		}
		if err := j.Input("x\n", false); !errors.Is(err, ErrNoStdin) {
			t.Fatalf("Input to a job without stdin: %v", err)
		}
	})
	t.Run("input reaches the job and close ends its stdin", func(t *testing.T) {
		j, err := m.Start(t.Context(), Spec{Command: "while read l; do echo \"got $l\"; done; echo eof", Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Input("one\n", false); err != nil {
			t.Fatal(err)
		}
		if r := j.Read(t.Context(), ReadOptions{Wait: 10 * time.Second}); string(r.Data) != "got one\n" {
			t.Fatalf("output %q", r.Data)
		}
		if err := j.Input("two\n", true); err != nil {
			t.Fatal(err)
		}
		waitDone(t, j)
		if r := j.Read(t.Context(), ReadOptions{}); string(r.Data) != "got two\neof\n" {
			t.Fatalf("output %q", r.Data)
		}
		if err := j.Input("three\n", false); !errors.Is(err, ErrStdinClosed) {
			t.Fatalf("Input after close: %v", err)
		}
	})
}

func TestCloseKillsEveryJob(t *testing.T) {
	t.Parallel()
	sb, err := local.New(t.TempDir(), local.WithReaper(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	m := NewManager(sb, nil)
	var list []*Job
	for range 3 {
		j, err := m.Start(context.Background(), Spec{Command: "sleep 300"})
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, j)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, j := range list {
		if st := j.Status(); st.State != StateKilled {
			t.Fatalf("%s after Close: %s", j.ID(), st.State)
		}
	}
	if _, err := m.Start(context.Background(), Spec{Command: "true"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

func TestJobCallerNamesTheJob(t *testing.T) {
	t.Parallel()
	var got sandbox.Caller
	r := runnerFunc(func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		got, _ = sandbox.CallerFrom(ctx)
		return sandbox.Result{}, nil
	})
	m := NewManager(r, nil)
	ctx, cancel := context.WithCancel(sandbox.WithCaller(t.Context(), sandbox.Caller{ID: "call-9", Tool: "bash", Summary: "npm run dev"}))
	j, err := m.Start(ctx, Spec{Command: "npm run dev"})
	cancel() // the call's end does not end the job
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, j)
	if got.ID != "call-9" || got.Summary != "job-1: npm run dev" {
		t.Fatalf("caller %+v", got)
	}
	if st := j.Status(); st.State != StateExited {
		t.Fatalf("state %s: the call's cancellation reached the job", st.State)
	}
	m.Close()
}

type runnerFunc func(context.Context, sandbox.Command) (sandbox.Result, error)

func (f runnerFunc) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	return f(ctx, cmd)
}

// TestJobsAreBounded: at most MaxRunning jobs run at once (the next start
// is refused), and of the ended jobs only the newest MaxEnded are kept.
func TestJobsAreBounded(t *testing.T) {
	t.Parallel()
	r := runnerFunc(func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		if cmd.Shell == "block" {
			<-ctx.Done()
			return sandbox.Result{Interrupted: true}, ctx.Err()
		}
		return sandbox.Result{}, nil
	})
	m := NewManager(r, nil)
	defer m.Close()
	for range MaxEnded + 5 {
		j, err := m.Start(t.Context(), Spec{Command: "quick"})
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, j)
	}
	if n := len(m.List()); n != MaxEnded {
		t.Errorf("%d ended jobs kept, want %d", n, MaxEnded)
	}
	if _, err := m.Get("job-1"); !errors.Is(err, ErrNoJob) {
		t.Errorf("the oldest ended job is still kept: %v", err)
	}
	for range MaxRunning {
		if _, err := m.Start(t.Context(), Spec{Command: "block"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Start(t.Context(), Spec{Command: "block"}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("start beyond MaxRunning: %v", err)
	}
	if n := len(m.Running()); n != MaxRunning {
		t.Errorf("%d running, want %d", n, MaxRunning)
	}
	if n := len(m.List()); n > MaxRunning+MaxEnded {
		t.Errorf("%d jobs kept", n)
	}
}
