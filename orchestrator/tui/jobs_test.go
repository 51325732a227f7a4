package tui

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/tools/jobs"
)

// jobsSession is the fake session with background jobs.
type jobsSession struct {
	*fakeSession
	mu     sync.Mutex
	list   []jobs.Status
	killed []string
}

func (s *jobsSession) Jobs() []jobs.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]jobs.Status(nil), s.list...)
}

func (s *jobsSession) KillJob(_ context.Context, id string) (jobs.Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killed = append(s.killed, id)
	return jobs.Status{ID: id, State: jobs.StateKilled}, nil
}

func (s *jobsSession) KillJobs(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killed = append(s.killed, "all")
	return nil
}

func TestJobsCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 120)
	start := time.Now().Add(-90 * time.Second)
	js := &jobsSession{fakeSession: f.sess, list: []jobs.Status{
		{ID: "job-1", Command: "npm run dev", State: jobs.StateRunning, Started: start, LastLine: "ready on :5173"},
		{ID: "job-2", Command: "make test", State: jobs.StateExited, Code: 2, Started: start, Ended: start.Add(10 * time.Second)},
	}}
	f.m.rt.sess = js

	f.m.runCommand("/jobs")
	out := f.printed()
	for _, want := range []string{"/jobs: 2 job(s)", "job-1", "running", "1m30s", "npm run dev", "| ready on :5173", "job-2", "exited with code 2", "10s", "make test"} {
		if !strings.Contains(out, want) {
			t.Errorf("/jobs lacks %q:\n%s", want, out)
		}
	}
	if f.m.form == nil || !strings.Contains(f.view(), "Kill job-1 (npm run dev)") || strings.Contains(f.view(), "Kill job-2") {
		t.Fatalf("/jobs offers no kill of the running job only:\n%s", f.view())
	}
	runCmds(f.m.Update(key(tea.KeyEnter)))
	f.m.rt.jobs.wait()
	js.mu.Lock()
	killed := append([]string(nil), js.killed...)
	js.mu.Unlock()
	if len(killed) != 1 || killed[0] != "job-1" {
		t.Fatalf("killed %q, want job-1", killed)
	}
}

func TestUndoWhileJobsRunAsksToStopThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 120)
	js := &jobsSession{fakeSession: f.sess}
	f.m.rt.sess = js
	err := &orchestrator.JobsRunningError{Jobs: []jobs.Status{{ID: "job-1", Command: "npm run dev", State: jobs.StateRunning}}}
	f.send(undoPlanMsg{n: 1, err: err})
	if f.m.form == nil || !strings.Contains(f.view(), "Background jobs are running: job-1 (npm run dev)") || !strings.Contains(f.view(), "Stop them, then undo") {
		t.Fatalf("no question:\n%s", f.view())
	}
	runCmds(f.m.Update(key(tea.KeyEnter)))
	f.m.rt.jobs.wait()
	js.mu.Lock()
	defer js.mu.Unlock()
	if len(js.killed) != 1 || js.killed[0] != "all" {
		t.Fatalf("killed %q, want every job", js.killed)
	}
}

// runCmds runs what an Update returned, a batch's commands at once, and
// waits for them (their messages are dropped: the tests look at the
// session).
func runCmds(_ tea.Model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	msg := cmd()
	batch, ok := msg.(tea.BatchMsg)
	if !ok {
		return
	}
	var wg sync.WaitGroup
	for _, c := range batch {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c()
		}()
	}
	wg.Wait()
}
