package tools

import (
	"strings"
	"testing"

	"github.com/shiroagent/shiro/tools/jobs"
)

// jobsEnv is bashEnv with the session's job manager.
func jobsEnv(t *testing.T) *Env {
	t.Helper()
	env := bashEnv(t)
	env.Jobs = jobs.NewManager(env.Sandbox, nil)
	t.Cleanup(func() { env.Jobs.Close() })
	return env
}

func TestJobTools(t *testing.T) {
	t.Parallel()
	t.Run("without a session a background command is refused", func(t *testing.T) {
		t.Parallel()
		env := bashEnv(t)
		hasResult(t, call(t, NewBash(), env, `{"command":"sleep 1","run_in_background":true}`), "Background commands are not available here", true)
		hasResult(t, call(t, NewJobOutput(), env, `{"id":"job-1"}`), "Background jobs are not available here", true)
	})
	t.Run("stdin without run_in_background is invalid", func(t *testing.T) {
		t.Parallel()
		hasResult(t, call(t, NewBash(), jobsEnv(t), `{"command":"cat","stdin":true}`), "Invalid input for bash: stdin is only for run_in_background commands", true)
	})
	t.Run("a job that ends within its first second says how", func(t *testing.T) {
		t.Parallel()
		res := call(t, NewBash(), jobsEnv(t), `{"command":"echo hi; exit 5","run_in_background":true}`)
		hasResult(t, res, "job-1 exited with code 5 after", false)
		if !strings.Contains(res.Text, "hi") {
			t.Errorf("no output: %q", res.Text)
		}
	})
	t.Run("a running job: id, pid, first output, then output, input and kill", func(t *testing.T) {
		t.Parallel()
		env := jobsEnv(t)
		res := call(t, NewBash(), env, `{"command":"echo ready; while read l; do echo \"got $l\"; done","run_in_background":true,"stdin":true}`)
		hasResult(t, res, "job-1 started in the background (pid ", false)
		if !strings.Contains(res.Text, "ready") || !strings.Contains(res.Text, "job_input") {
			t.Errorf("bash result %q", res.Text)
		}
		hasResult(t, call(t, NewJobInput(), env, `{"id":"job-1","text":"one\n"}`), "got one", false)
		out := call(t, NewJobOutput(), env, `{"id":"job-1","since":0}`)
		hasResult(t, out, "job-1: running", false)
		if !strings.Contains(out.Text, "ready\ngot one") {
			t.Errorf("job_output from 0: %q", out.Text)
		}
		hasResult(t, call(t, NewJobOutput(), env, `{"id":"job-1","since":0,"tail":1}`), "give since or tail, not both", true)
		hasResult(t, call(t, NewJobOutput(), env, `{"id":"job-9"}`), `no job "job-9" (jobs: job-1)`, true)
		hasResult(t, call(t, NewJobKill(), env, `{"id":"job-1"}`), "job-1 killed", false)
		hasResult(t, call(t, NewJobInput(), env, `{"id":"job-1","text":"x\n"}`), "job-1: its stdin is closed", true)
		hasResult(t, call(t, NewJobKill(), env, `{"id":"job-1"}`), "job-1 had already ended", false)
	})
	t.Run("job_input to a job without stdin says how to get one", func(t *testing.T) {
		t.Parallel()
		env := jobsEnv(t)
		call(t, NewBash(), env, `{"command":"sleep 30","run_in_background":true}`)
		hasResult(t, call(t, NewJobInput(), env, `{"id":"job-1","text":"x\n"}`), "job-1 was not started with stdin: true", true)
	})
}

// hasResult fails unless got contains want and is an error exactly when
// wantErr.
func hasResult(t *testing.T, got Result, want string, wantErr bool) {
	t.Helper()
	if !strings.Contains(got.Text, want) || got.IsError != wantErr {
		t.Errorf("result = %q (error %v)\nwant it to contain %q (error %v)", got.Text, got.IsError, want, wantErr)
	}
}
