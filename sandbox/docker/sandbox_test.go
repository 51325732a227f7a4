package docker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

// openSandbox opens a session on ws's container with the test binary as the
// helper.
func openSandbox(t *testing.T, ws string, mutate ...func(*docker.Options)) *docker.Sandbox {
	t.Helper()
	eng, err := docker.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	img := docker.Reference(testenv.RequireImage(t, eng.API()))
	opts := docker.Options{Spec: sandbox.Spec{Workspace: ws, HelperBinary: testenv.Helper(t)}}
	for _, m := range mutate {
		m(&opts)
	}
	sb, err := eng.Open(context.WithoutCancel(t.Context()), img, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

func TestConformance(t *testing.T) {
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return openSandbox(t, ws) })
}

func TestRecreatedAfterRemovalWithinASession(t *testing.T) {
	api := testenv.RequireDocker(t)
	ws := testenv.Workspace(t, api)
	sb := openSandbox(t, ws)
	ctx := t.Context()
	if _, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	first := sb.ContainerID()
	if _, err := api.ContainerRemove(ctx, first, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	// The channel notices the removal; the next call builds a new container.
	var out strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for {
		out.Reset()
		res, err := sb.Run(ctx, sandbox.Command{Shell: "echo back", Stdout: &out})
		if err == nil && res.ExitCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no working call after removal: %v", err)
		}
	}
	if strings.TrimSpace(out.String()) != "back" {
		t.Errorf("output %q", out.String())
	}
	if sb.ContainerID() == first {
		t.Error("the container id did not change")
	}
}

func TestSessionCloseKillsItsProcesses(t *testing.T) {
	api := testenv.RequireDocker(t)
	ws := testenv.Workspace(t, api)
	sb := openSandbox(t, ws)
	ctx := t.Context()
	if _, err := sb.Run(ctx, sandbox.Command{Shell: "(setsid sleep 407 &) ; nohup sleep 408 >/dev/null 2>&1 &"}); err != nil {
		t.Fatal(err)
	}
	id := sb.ContainerID()
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := api.ContainerTop(ctx, id, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,args"}})
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, p := range res.Processes {
			if strings.Contains(strings.Join(p, " "), "sleep 40") {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sleeps outlived the session", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
