package orchestrator

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/jobs"
)

// A job's write after its turn ended is not the turn's: an undo of the
// turn keeps it (it is among the files changed since, kept without a
// second yes). An undo while a job runs is refused, naming the job, until
// the jobs are stopped. A job that ended by itself is told to the model
// with the next turn, once.
func TestJobsAcrossTurnsAndUndo(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	model := &mcpModel{replies: []llm.Message{
		mcpCalls([2]string{"bash", `{"command":"sleep 3; echo job > late.txt; exit 4","run_in_background":true}`}),
		mcpCalls([2]string{"bash", `{"command":"sleep 300","run_in_background":true}`}),
		mcpCalls([2]string{"bash", `{"command":"echo turn > turn.txt"}`}),
	}}
	rec := &recorder{}
	s, err := NewSession(SessionOptions{Workspace: ws, Model: model, Yolo: true, DataDir: t.TempDir(), SessionID: "s1",
		Sandbox: SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: ws}, Events: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send(t.Context(), "start the jobs"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && s.Jobs()[0].Running() {
		time.Sleep(50 * time.Millisecond)
	}
	if st := s.Jobs()[0]; st.State != jobs.StateExited || st.Code != 4 {
		t.Fatalf("job-1: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(ws, "late.txt")); err != nil {
		t.Fatal(err)
	}

	_, err = s.PlanUndo(t.Context(), 1)
	var running *JobsRunningError
	if !errors.As(err, &running) || !errors.Is(err, ErrJobsRunning) || len(running.Jobs) != 1 || running.Jobs[0].ID != "job-2" {
		t.Fatalf("PlanUndo while job-2 runs: %v", err)
	}
	if err := s.KillJobs(t.Context()); err != nil {
		t.Fatal(err)
	}
	plan, err := s.PlanUndo(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(plan.UserChanged, "late.txt") {
		t.Errorf("the job's write after the turn is not among the files changed since: %q", plan.UserChanged)
	}
	if _, _, _, err := s.Undo(t.Context(), plan, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "late.txt")); err != nil {
		t.Errorf("the undo of the turn reverted the job's later write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "turn.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the turn's own write survived its undo: %v", err)
	}

	if err := s.Send(t.Context(), "what happened?"); err != nil {
		t.Fatal(err)
	}
	reqs := model.requests()
	last := reqs[len(reqs)-1].Messages
	prompt := ""
	for _, p := range last[len(last)-1].Parts {
		prompt += p.Text
	}
	if !strings.HasPrefix(prompt, "what happened?") || !strings.Contains(prompt, "[job] job-1 (") || !strings.Contains(prompt, "exited with code 4") || strings.Contains(prompt, "job-2") {
		t.Errorf("the next turn's prompt: %q", prompt)
	}
	var kinds []string
	for _, e := range rec.all() {
		if j, ok := e.(JobEvent); ok {
			kinds = append(kinds, j.ID+" "+j.Kind)
		}
	}
	if !slices.Contains(kinds, "job-1 exited") || !slices.Contains(kinds, "job-2 killed") {
		t.Errorf("job events %q", kinds)
	}
}
