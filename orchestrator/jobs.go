package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shiroagent/shiro/tools/jobs"
)

// ErrJobsRunning is the error of an undo while background jobs run: what
// they write would race the files being put back. Stop them first
// (KillJobs), then undo.
var ErrJobsRunning = errors.New("background jobs are running")

// JobsRunningError names the jobs that stop an undo; it matches
// ErrJobsRunning.
type JobsRunningError struct{ Jobs []jobs.Status }

func (e *JobsRunningError) Error() string {
	ids := make([]string, len(e.Jobs))
	for i, j := range e.Jobs {
		ids[i] = j.ID + " (" + j.Command + ")"
	}
	return fmt.Sprintf("%v: %s; stop them before undoing (their writes would race the undo)", ErrJobsRunning, strings.Join(ids, ", "))
}

func (e *JobsRunningError) Unwrap() error { return ErrJobsRunning }

// newJobs is the session's job manager, publishing JobEvents.
func (s *Session) newJobs() *jobs.Manager {
	return jobs.NewManager(s.sandbox, func(e jobs.Event) { s.publish(JobEvent{e}) })
}

// Jobs lists the session's background jobs, oldest first.
func (s *Session) Jobs() []jobs.Status { return s.jobs.List() }

// JobOutput is the last lines of a job's output (/jobs).
func (s *Session) JobOutput(id string, lines int) (string, error) {
	j, err := s.jobs.Get(id)
	if err != nil {
		return "", err
	}
	return string(j.Output().Tail(lines).Data), nil
}

// KillJob kills a job's whole process tree (/jobs) and waits, at most
// 15 s, for it to end.
func (s *Session) KillJob(ctx context.Context, id string) (jobs.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return s.jobs.Kill(ctx, id)
}

// KillJobs kills every running job (before an undo) and waits, at most
// 15 s, for them to end.
func (s *Session) KillJobs(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return s.jobs.KillAll(ctx)
}

// jobsRunning is the error of an undo while jobs run, nil when none does.
func (s *Session) jobsRunning() error {
	if r := s.jobs.Running(); len(r) > 0 {
		return &JobsRunningError{Jobs: r}
	}
	return nil
}

// withJobNotes appends the notes of the jobs that ended since the model
// was last told (once each) to a tool result or a prompt.
func (s *Session) withJobNotes(text string) string {
	notes := s.jobs.Notes()
	if len(notes) == 0 {
		return text
	}
	return text + "\n\n" + strings.Join(notes, "\n")
}
