package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// modelRouter is one fake model endpoint in front of one scripted server
// per model id: the agents of a --parallel run talk to it at once, and
// each gets its own model's script whatever the order of their requests.
type modelRouter struct {
	URL     string
	servers map[string]*fakemodel.Server
}

func newModelRouter(t *testing.T, scripts map[string][]fakemodel.Reply) *modelRouter {
	t.Helper()
	r := &modelRouter{servers: map[string]*fakemodel.Server{}}
	var first *fakemodel.Server
	for model, replies := range scripts {
		r.servers[model] = fakemodel.New(t, replies...)
		first = r.servers[model]
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var m struct{ Model string }
		_ = json.Unmarshal(body, &m)
		srv := r.servers[m.Model]
		if srv == nil {
			if req.Method != http.MethodGet {
				http.Error(w, "no script for model "+m.Model, http.StatusBadRequest)
				return
			}
			srv = first // model listings
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		srv.ServeHTTP(w, req)
	}))
	t.Cleanup(front.Close)
	r.URL = front.URL
	return r
}

// parallelWorld is a repository the user owns, shiro's state for it, and
// the fake model of its agents.
type parallelWorld struct {
	h         *hostile
	ws        string
	shiroHome string
	env       []string
}

func newParallelWorld(t *testing.T, name string, router *modelRouter) *parallelWorld {
	h := newHostile(t)
	ws := h.workspace(name)
	h.repo(ws)
	home := h.dir("shiro-home-"+name, 0o700)
	env := append([]string{"SHIRO_HOME=" + home, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "SHIRO_API_KEY=", "SHIRO_MODEL=", "SHIRO_OPENAI_API="}, providers[0].env(router.URL)...)
	p := &parallelWorld{h: h, ws: ws, shiroHome: home, env: env}
	// The agents' sandboxes are their worktrees' containers.
	t.Cleanup(func() {
		for _, wt := range p.worktrees() {
			testenv.RemoveContainers(t, h.api, wt)
		}
	})
	return p
}

// worktrees are the agents' worktrees under shiro's data directory.
func (p *parallelWorld) worktrees() []string {
	dirs, _ := filepath.Glob(filepath.Join(p.shiroHome, "worktrees", "*", "*"))
	return dirs
}

// branches are the repository's shiro/ branches.
func (p *parallelWorld) branches() []string {
	return strings.Fields(p.h.git(p.ws, "for-each-ref", "--format=%(refname:short)", "refs/heads/shiro/"))
}

// rows are the summary table's lines after its header.
func rows(t *testing.T, stdout string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "AGENT ") {
			continue
		}
		// The table's rows; the lines after it name agents' logs.
		var out []string
		for _, row := range lines[i+1:] {
			if f := strings.Fields(row); len(f) < 2 || !strings.HasPrefix(f[1], "shiro/") {
				break
			}
			out = append(out, row)
		}
		return out
	}
	t.Fatalf("no summary table in stdout:\n%s", stdout)
	return nil
}

// TestParallelAgents: --parallel 3 with a model each runs three agents at
// once against one model endpoint, each in its own worktree on its own
// branch, runs --check in each sandbox after its agent, and prints the
// summary table; the user's checkout does not change.
func TestParallelAgents(t *testing.T) {
	t.Parallel()
	scripts := map[string][]fakemodel.Reply{}
	for _, m := range []string{"fake-a", "fake-b", "fake-c"} {
		scripts[m] = []fakemodel.Reply{
			reply(bashCall("call_"+m, "echo "+m+" > agent.txt && cat agent.txt")),
			{Text: m + " wrote agent.txt."},
		}
	}
	router := newModelRouter(t, scripts)
	p := newParallelWorld(t, "parallel", router)
	h := p.h
	headBefore := h.git(p.ws, "rev-parse", "HEAD")

	res := h.shiro(p.ws, p.env, "-p", "--yolo", "--parallel", "3", "--worktree", "par", "--memory", "1g",
		"--model", "fake-a", "--model", "fake-b", "--model", "fake-c",
		"--check", `test "$(cat agent.txt)" != ""`, "write agent.txt")
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	got := rows(t, res.stdout)
	if len(got) != 3 {
		t.Fatalf("%d rows, want 3:\n%s", len(got), res.stdout)
	}
	for i, m := range []string{"fake-a", "fake-b", "fake-c"} {
		f := strings.Fields(got[i])
		name := "par-" + string(rune('1'+i))
		// AGENT BRANCH MODEL TURNS COST FILES EXIT CHECK
		want := []string{name, "shiro/" + name, m, "2", "$0.0000", "1", "0", "ok"}
		if strings.Join(f, " ") != strings.Join(want, " ") {
			t.Errorf("row %d: %q, want %q", i, got[i], strings.Join(want, " "))
		}
	}
	if b := p.branches(); strings.Join(b, " ") != "shiro/par-1 shiro/par-2 shiro/par-3" {
		t.Errorf("branches %v", b)
	}
	wts := p.worktrees()
	if len(wts) != 3 {
		t.Fatalf("worktrees %v", wts)
	}
	for i, wt := range wts {
		m := []string{"fake-a", "fake-b", "fake-c"}[i]
		if b, err := os.ReadFile(filepath.Join(wt, "agent.txt")); err != nil || string(b) != m+"\n" {
			t.Errorf("%s/agent.txt: %q %v", wt, b, err)
		}
		// The check ran in the agent's own sandbox, which has the limits
		// the user gave.
		ids := testenv.ContainerIDs(t, h.api, wt)
		if len(ids) != 1 {
			t.Errorf("%s has %d containers, want its agent's one", wt, len(ids))
			continue
		}
		in, err := h.api.ContainerInspect(t.Context(), ids[0], client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if mem := in.Container.HostConfig.Memory; mem != 1<<30 {
			t.Errorf("%s: the sandbox's memory limit is %d, want --memory 1g", wt, mem)
		}
	}
	for m, srv := range router.servers {
		reqs := modelRequests(srv)
		if len(reqs) != 2 {
			t.Errorf("%s got %d requests, want 2", m, len(reqs))
			continue
		}
		if !strings.Contains(string(reqs[0].Body), "write agent.txt") {
			t.Errorf("%s: the task did not reach the model:\n%s", m, reqs[0].Body)
		}
	}
	if st := h.git(p.ws, "status", "--porcelain"); st != "" {
		t.Errorf("the user's checkout changed:\n%s", st)
	}
	if head := h.git(p.ws, "rev-parse", "HEAD"); head != headBefore || h.git(p.ws, "branch", "--show-current") != "main" {
		t.Errorf("the user's HEAD moved: %s", head)
	}
	if logs, _ := filepath.Glob(filepath.Join(p.shiroHome, "agents", "*", "par-*.log")); len(logs) != 3 {
		t.Errorf("agent logs: %v", logs)
	} else if b, _ := os.ReadFile(logs[0]); !strings.Contains(string(b), "fake-a wrote agent.txt.") || !strings.Contains(string(b), "[check] exit 0") {
		t.Errorf("%s:\n%s", logs[0], b)
	}

	t.Run("json", func(t *testing.T) {
		// A second run reuses the worktrees; --json makes the summary one
		// JSON object, and a failing check fails the run.
		for _, srv := range router.servers {
			srv.Push(reply(bashCall("call_again", "true")), fakemodel.Reply{Text: "again"})
		}
		res := h.shiro(p.ws, p.env, "-p", "--yolo", "--parallel", "3", "--worktree", "par", "--json",
			"--model", "fake-a", "--model", "fake-b", "--model", "fake-c", "--check", "exit 3", "again")
		if res.code != 1 {
			t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
		}
		var sum struct {
			Agents []struct {
				Agent string
				Check struct {
					Ran      bool
					ExitCode int
				}
			}
			OK bool
		}
		if err := json.Unmarshal([]byte(res.stdout), &sum); err != nil || len(sum.Agents) != 3 || sum.OK {
			t.Fatalf("summary %+v (%v):\n%s", sum, err, res.stdout)
		}
		for _, a := range sum.Agents {
			if !a.Check.Ran || a.Check.ExitCode != 3 {
				t.Errorf("%s: check %+v", a.Agent, a.Check)
			}
		}
	})
}

// TestParallelRefusesMoreAgentsThanTheEngineHolds: the memory limit
// times N against the engine's memory, before anything is made.
func TestParallelRefusesMoreAgentsThanTheEngineHolds(t *testing.T) {
	t.Parallel()
	router := newModelRouter(t, map[string][]fakemodel.Reply{"fake-a": nil})
	p := newParallelWorld(t, "parallel-memory", router)
	res := p.h.shiro(p.ws, p.env, "-p", "--parallel", "4", "--memory", "1000g", "--worktree", "big", "task")
	if res.code != 1 || !strings.Contains(res.stderr, "--parallel 4 needs 4 × 1000.0 GiB of sandbox memory (4000.0 GiB) and the Docker engine has") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if b := p.branches(); len(b) != 0 {
		t.Errorf("branches made: %v", b)
	}
	if wts := p.worktrees(); len(wts) != 0 {
		t.Errorf("worktrees made: %v", wts)
	}
	if n := len(modelRequests(router.servers["fake-a"])); n != 0 {
		t.Errorf("%d model requests", n)
	}

	// Outside a repository there is nothing to make worktrees of.
	plain := p.h.workspace("parallel-plain")
	res = p.h.shiro(plain, p.env, "-p", "--parallel", "2", "task")
	if res.code != 1 || !strings.Contains(res.stderr, "--parallel runs each agent in a worktree") {
		t.Errorf("outside a repository: exit %d\nstderr: %s", res.code, res.stderr)
	}
}

// TestParallelInterrupt: a SIGINT to shiro while each of three agents
// runs a long command in its sandbox stops the three commands and every
// agent's shiro; the summary says how they ended.
func TestParallelInterrupt(t *testing.T) {
	t.Parallel()
	scripts := map[string][]fakemodel.Reply{}
	for _, m := range []string{"fake-a", "fake-b", "fake-c"} {
		scripts[m] = []fakemodel.Reply{reply(fakemodel.ToolCall{ID: "call_sleep", Name: "bash", Input: `{"command":"sleep 587","timeout":600000}`})}
	}
	router := newModelRouter(t, scripts)
	p := newParallelWorld(t, "parallel-sigint", router)
	h := p.h

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := h.command(ctx, p.ws, p.env, h.bin, "-p", "--yolo", "--parallel", "3", "--worktree", "sigpar",
		"--model", "fake-a", "--model", "fake-b", "--model", "fake-c", "--check", "true", "sleep")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Wait until the three sandboxes each run the sleep.
	sleeping := func() int {
		n := 0
		for _, wt := range p.worktrees() {
			for _, id := range testenv.ContainerIDs(t, h.api, wt) {
				// A container still starting has no processes to list.
				res, err := h.api.ContainerTop(t.Context(), id, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,args"}})
				if err != nil {
					continue
				}
				for _, proc := range res.Processes {
					if strings.Contains(strings.Join(proc, " "), "sleep 587") {
						n++
					}
				}
			}
		}
		return n
	}
	deadline := time.Now().Add(3 * time.Minute)
	for sleeping() < 3 {
		select {
		case err := <-exited:
			t.Fatalf("shiro ended before the three sleeps ran: %v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("three sleeps never ran (%d)\nstderr: %s", sleeping(), errb.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("shiro did not end after SIGINT\nstderr: %s", errb.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d, want 130\nstderr: %s", code, errb.String())
	}
	if n := sleeping(); n != 0 {
		t.Errorf("%d sandboxes still run the sleep", n)
	}
	if procs := hostProcesses(t, "sigpar-"); len(procs) != 0 {
		t.Errorf("agents' processes left: %v", procs)
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	got := rows(t, out.String())
	if len(got) != 3 {
		t.Fatalf("summary:\n%s\nstderr: %s", out.String(), errb.String())
	}
	for _, r := range got {
		// EXIT is the agent's 128+SIGINT; the check did not run.
		if f := strings.Fields(r); len(f) != 9 || f[6] != "130" || !strings.HasSuffix(r, "not run") {
			t.Errorf("row %q", r)
		}
	}
}
