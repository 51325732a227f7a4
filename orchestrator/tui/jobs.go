package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/tools/jobs"
)

// jobber is what /jobs and an undo while jobs run need of the session.
type jobber interface {
	Jobs() []jobs.Status
	KillJob(ctx context.Context, id string) (jobs.Status, error)
	KillJobs(ctx context.Context) error
}

// jobsStoppedMsg says the jobs an undo waited for are stopped: the undo
// of n turns is planned again.
type jobsStoppedMsg struct {
	n   int
	err error
}

// jobRow is one line of /jobs: id, state, uptime, command, last line.
func jobRow(s jobs.Status, now time.Time) string {
	state := string(s.State)
	if !s.Running() {
		state = s.Ending()
	}
	row := fmt.Sprintf("%-7s %-22s %6s  %s", s.ID, oneLine(state, 22), s.Uptime(now), oneLine(s.Command, 50))
	if s.LastLine != "" {
		row += "  | " + oneLine(s.LastLine, 60)
	}
	return clean(row)
}

// oneLine is s on one line, cut at n runes.
func oneLine(s string, n int) string { return clip(strings.Join(strings.Fields(s), " "), n) }

// cmdJobs is /jobs: the session's background jobs, then a choice to kill
// a running one.
func (m *Model) cmdJobs(string) tea.Cmd {
	j, ok := m.rt.sess.(jobber)
	if !ok {
		m.printInfo("this session runs no background jobs")
		return nil
	}
	list := j.Jobs()
	if len(list) == 0 {
		m.printInfo("no background jobs in this session (the model starts one with bash run_in_background)")
		return nil
	}
	now := time.Now()
	m.printInfo(fmt.Sprintf("/jobs: %d job(s)", len(list)))
	var running []jobs.Status
	for _, s := range list {
		style := m.st.dim
		if s.Running() {
			style = m.st.accent
			running = append(running, s)
		}
		m.printLine(style.Render("  " + jobRow(s, now)))
	}
	if len(running) == 0 {
		return nil
	}
	labels := make([]string, 0, len(running)+2)
	for _, s := range running {
		labels = append(labels, "Kill "+s.ID+" ("+oneLine(s.Command, 40)+")")
	}
	if len(running) > 1 {
		labels = append(labels, "Kill all")
	}
	labels = append(labels, "Close")
	pick := newPicker(labels...)
	return m.openForm(&formModal{
		title: "Kill a background job?",
		note:  "a kill ends the job's whole process tree, as ctrl-c does",
		pick:  pick,
		done: func(m *Model) tea.Cmd {
			switch {
			case pick.sel < len(running):
				id := running[pick.sel].ID
				return m.busyJob(func(ctx context.Context) tea.Msg {
					st, err := j.KillJob(ctx, id)
					if err != nil {
						return noticeMsg{text: "kill " + id + " failed: " + err.Error()}
					}
					return noticeMsg{text: fmt.Sprintf("%s %s", st.ID, st.Ending())}
				})
			case len(running) > 1 && pick.sel == len(running):
				return m.busyJob(func(ctx context.Context) tea.Msg {
					if err := j.KillJobs(ctx); err != nil {
						return noticeMsg{text: "kill failed: " + err.Error()}
					}
					return noticeMsg{text: fmt.Sprintf("%d job(s) killed", len(running))}
				})
			}
			return nil
		},
		cancel: func(*Model) tea.Cmd { return nil },
	})
}

// askStopJobs is the question of an undo while jobs run: stop them, then
// undo, or leave it.
func (m *Model) askStopJobs(n int, err *orchestrator.JobsRunningError) tea.Cmd {
	j, ok := m.rt.sess.(jobber)
	if !ok {
		m.printError(err.Error())
		return nil
	}
	ids := make([]string, len(err.Jobs))
	for i, s := range err.Jobs {
		ids[i] = s.ID + " (" + oneLine(s.Command, 40) + ")"
	}
	pick := newPicker("Stop them, then undo", "Cancel")
	return m.openForm(&formModal{
		title: "Background jobs are running: " + clean(strings.Join(ids, ", ")),
		note:  "what they write would race the undo; stopping kills each job's whole process tree",
		pick:  pick,
		done: func(m *Model) tea.Cmd {
			if pick.sel != 0 {
				m.printInfo("undo cancelled")
				return nil
			}
			return m.busyJob(func(ctx context.Context) tea.Msg {
				return jobsStoppedMsg{n: n, err: j.KillJobs(ctx)}
			})
		},
		cancel: func(m *Model) tea.Cmd { m.printInfo("undo cancelled"); return nil },
	})
}

// jobsStopped plans the undo again once the jobs are stopped.
func (m *Model) jobsStopped(msg jobsStoppedMsg) tea.Cmd {
	if msg.err != nil {
		m.printError("stopping the jobs failed, nothing was undone: " + msg.err.Error())
		return nil
	}
	m.printInfo("background jobs stopped")
	return m.cmdUndo(fmt.Sprint(msg.n))
}

// undoBlockedByJobs is the question to ask when an undo plan failed
// because jobs run; nil when it failed otherwise.
func (m *Model) undoBlockedByJobs(msg undoPlanMsg) tea.Cmd {
	var jr *orchestrator.JobsRunningError
	if !errors.As(msg.err, &jr) {
		return nil
	}
	return m.askStopJobs(max(msg.n, 1), jr)
}

// jobEvent shows a job's end (its start is the bash call's own line).
func (a *App) jobEvent(e orchestrator.JobEvent) {
	if e.Kind == jobs.EventStarted {
		return
	}
	a.post(noticeMsg{text: fmt.Sprintf("job %s %s after %s: %s", e.ID, e.Ending(), e.Uptime(e.Ended), oneLine(e.Command, 60))})
}
