package integration

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

// Processes left behind by an exec that is not a session (as in `shiro
// sandbox shell`) survive while a session is open, and the open session
// keeps the container running past its idle timeout; once the last session
// closes, every process but PID 1 is killed, and the container stops after
// the idle timeout although nothing of the strays asked for it.
func TestLastSessionCloseKillsEverythingAndIdleCountsSessions(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	img := testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	ctx := t.Context()
	eng, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	const idle = 3 * time.Second
	sb, err := eng.Open(context.WithoutCancel(ctx), docker.Reference(img), docker.Options{Spec: sandbox.Spec{Settings: sandbox.Settings{Idle: idle}, Workspace: ws, HelperBinary: testenv.Helper(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	if res, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("first command: %+v, %v", res, err)
	}
	id := sb.ContainerID()

	// The strays: every escape, started by an exec that then ends, so they
	// are reparented to PID 1.
	esc := sandboxtest.NewEscapes(ws)
	t.Cleanup(esc.Remove)
	rawExec(t, api, id, esc.Script("exit 0"))
	loops := func(ps [][]string) int {
		n := 0
		for _, p := range ps {
			if esc.IsLoop(p[1]) {
				n++
			}
		}
		return n
	}
	if ps := waitTop(t, api, id, func(ps [][]string) bool { return loops(ps) == len(esc.Files) }); loops(ps) != len(esc.Files) {
		t.Fatalf("want %d stray loops running, found %q", len(esc.Files), ps)
	}

	// The open session keeps the container, and the strays, past the idle
	// timeout.
	sizes := esc.Sizes()
	time.Sleep(2 * idle) // a window longer than the idle timeout
	if !containerRunning(t, api, id) {
		t.Fatal("the container stopped while a session was open")
	}
	for i, n := range esc.Sizes() {
		if n <= sizes[i] {
			t.Errorf("stray %d stopped writing while a session was open", i)
		}
	}

	// The last session closes: only PID 1 is left, nothing writes.
	if err := sb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ps := waitTop(t, api, id, func(ps [][]string) bool { return len(ps) == 1 })
	if len(ps) != 1 || !strings.Contains(ps[0][1], "helper init") {
		t.Fatalf("after the last session closed, want only PID 1 (helper init), found %q", ps)
	}
	sizes = esc.Sizes()
	time.Sleep(time.Second) // five periods of the loops
	esc.AssertStill(t, sizes)

	// And the container stops itself after the idle timeout.
	deadline := time.Now().Add(60 * time.Second)
	for containerRunning(t, api, id) {
		if time.Now().After(deadline) {
			t.Fatal("the container did not stop within 60s of its last session")
		}
		time.Sleep(250 * time.Millisecond) // polling the engine with a deadline
	}
}

// rawExec runs script with sh in the container as its user, outside any
// session, and waits for it.
func rawExec(t *testing.T, api *client.Client, id, script string) {
	t.Helper()
	ctx := t.Context()
	in, err := api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := api.ExecCreate(ctx, id, client.ExecCreateOptions{
		User: in.Container.Config.User, Cmd: []string{"sh", "-c", script}, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	att, err := api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(att.Reader)
	att.Close()
	res, err := api.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec exited %d: %s", res.ExitCode, out)
	}
}

// waitTop polls the container's processes ([pid, args], seen from the
// host: docker top, host pids) until cond holds or 20s pass, and returns the last list.
func waitTop(t *testing.T, api *client.Client, id string, cond func([][]string) bool) [][]string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := api.ContainerTop(t.Context(), id, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,args"}})
		if err != nil {
			t.Fatal(err)
		}
		var ps [][]string
		for _, p := range res.Processes {
			if len(p) >= 2 {
				ps = append(ps, []string{p[0], strings.Join(p[1:], " ")})
			}
		}
		if cond(ps) || time.Now().After(deadline) {
			return ps
		}
		time.Sleep(100 * time.Millisecond) // polling the engine with a deadline
	}
}

func containerRunning(t *testing.T, api *client.Client, id string) bool {
	t.Helper()
	in, err := api.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return in.Container.State != nil && in.Container.State.Running
}
