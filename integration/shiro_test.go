package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/testenv"
)

// result is one finished run of the shiro binary.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// shiro runs the binary in ws with extra environment and arguments.
func shiro(t *testing.T, ws string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), args...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run shiro %v: %v", args, err)
	}
	return r
}

// bashJSON is the bash tool's input for a command (and a timeout in ms).
func bashJSON(command string, timeoutMs int) string {
	in := map[string]any{"command": command}
	if timeoutMs > 0 {
		in["timeout"] = timeoutMs
	}
	b, _ := json.Marshal(in)
	return string(b)
}

// onlyContainer returns the workspace's single container id.
func onlyContainer(t *testing.T, api *client.Client, ws string) string {
	t.Helper()
	ids := testenv.ContainerIDs(t, api, ws)
	if len(ids) != 1 {
		t.Fatalf("workspace has %d containers, want 1", len(ids))
	}
	return ids[0]
}

// top lists the command lines of the processes in a container.
func top(t *testing.T, api *client.Client, id string) []string {
	t.Helper()
	res, err := api.ContainerTop(t.Context(), id, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,args"}})
	if err != nil {
		t.Fatalf("docker top: %v", err)
	}
	var out []string
	for _, p := range res.Processes {
		out = append(out, strings.Join(p, " "))
	}
	return out
}

func noneMatch(t *testing.T, procs []string, needles ...string) {
	t.Helper()
	for _, p := range procs {
		for _, n := range needles {
			if strings.Contains(p, n) {
				t.Errorf("process still running: %s", p)
			}
		}
	}
}

// startShiro starts the binary and returns a channel that yields each
// stderr line, and a wait func.
type running struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	lines  chan string
	done   chan struct{}
	err    error
	wg     sync.WaitGroup
}

func startShiro(t *testing.T, ws string, args ...string) *running {
	t.Helper()
	r := &running{lines: make(chan string, 100), done: make(chan struct{})}
	r.cmd = exec.Command(testenv.Binary(t), args...)
	r.cmd.Dir = ws
	r.cmd.Stdout = &r.stdout
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(r.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		r.wg.Wait()
		_ = r.cmd.Wait()
	})
	return r
}

// waitLine waits for a stderr line containing s.
func (r *running) waitLine(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("shiro ended before printing %q", s)
			}
			if strings.Contains(l, s) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q within %s", s, within)
		}
	}
}

// signalAndWait sends sig and waits for the exit, returning the exit code
// and how long the exit took after the signal.
func (r *running) signalAndWait(t *testing.T, sig syscall.Signal) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	for range r.lines { // drain
	}
	r.wg.Wait()
	err := r.cmd.Wait()
	took := time.Since(start)
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), took
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, took
}
