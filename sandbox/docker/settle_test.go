package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox/gitshadow"
)

// fakeFreezer plays the engine for settle: one container with an init and
// other processes, recording the calls in order.
type fakeFreezer struct {
	running, paused bool
	pid             int   // init's
	procs           []int // every process, init included
	pauseErr        error
	calls           []string
}

func (f *fakeFreezer) ContainerPause(context.Context, string, client.ContainerPauseOptions) (client.ContainerPauseResult, error) {
	f.calls = append(f.calls, "pause")
	if f.pauseErr != nil {
		return client.ContainerPauseResult{}, f.pauseErr
	}
	f.paused = true
	return client.ContainerPauseResult{}, nil
}

func (f *fakeFreezer) ContainerUnpause(context.Context, string, client.ContainerUnpauseOptions) (client.ContainerUnpauseResult, error) {
	f.calls = append(f.calls, "unpause")
	f.paused = false
	return client.ContainerUnpauseResult{}, nil
}

func (f *fakeFreezer) ContainerTop(context.Context, string, client.ContainerTopOptions) (client.ContainerTopResult, error) {
	f.calls = append(f.calls, "top")
	var rows [][]string
	for _, p := range f.procs {
		rows = append(rows, []string{"1000", fmt.Sprint(p), "1", "sh"})
	}
	return client.ContainerTopResult{Titles: []string{"UID", "PID", "PPID", "CMD"}, Processes: rows}, nil
}

func (f *fakeFreezer) ContainerKill(context.Context, string, client.ContainerKillOptions) (client.ContainerKillResult, error) {
	f.calls = append(f.calls, "kill-container")
	f.running, f.paused = false, false
	return client.ContainerKillResult{}, nil
}

func (f *fakeFreezer) ContainerInspect(context.Context, string, client.ContainerInspectOptions) (client.ContainerInspectResult, error) {
	return client.ContainerInspectResult{Container: container.InspectResponse{ID: "c0ffee",
		State: &container.State{Running: f.running, Paused: f.paused, Pid: f.pid}}}, nil
}

func (f *fakeFreezer) ContainerWait(context.Context, string, client.ContainerWaitOptions) client.ContainerWaitResult {
	res := make(chan container.WaitResponse, 1)
	res <- container.WaitResponse{}
	return client.ContainerWaitResult{Result: res, Error: make(chan error)}
}

// fakeProcs plays this machine's view of the container's processes.
type fakeProcs struct {
	f       *fakeFreezer
	openErr error
	// survive is how many killed processes are still there after the thaw.
	survive int
	opened  []int
}

func (p *fakeProcs) open(_ string, pids []int) (victims, error) {
	p.f.calls = append(p.f.calls, "open")
	if p.openErr != nil {
		return nil, p.openErr
	}
	p.opened = pids
	return fakeVictims{p}, nil
}

type fakeVictims struct{ p *fakeProcs }

func (v fakeVictims) kill() error {
	if !v.p.f.paused {
		return errors.New("killed while not frozen")
	}
	v.p.f.calls = append(v.p.f.calls, "kill")
	return nil
}

func (v fakeVictims) wait(time.Duration) int {
	v.p.f.calls = append(v.p.f.calls, "wait")
	return v.p.survive
}

func (v fakeVictims) close() {}

func TestSettleFreezesKillsThenScans(t *testing.T) {
	t.Parallel()
	scanOn := func(f *fakeFreezer) func() ([]gitshadow.Finding, error) {
		return func() ([]gitshadow.Finding, error) {
			state := "thawed"
			if f.paused {
				state = "frozen"
			} else if !f.running {
				state = "stopped"
			}
			f.calls = append(f.calls, "scan while "+state)
			return []gitshadow.Finding{{Path: "late/.git/HEAD"}}, nil
		}
	}
	cases := []struct {
		name        string
		setup       func(f *fakeFreezer, p *fakeProcs)
		want        []string
		running     bool
		how         string
		wantOpened  []int
		errContains string
	}{
		{
			name:       "frozen, every process but init killed, scanned, thawed",
			want:       []string{"pause", "top", "open", "kill", "scan while frozen", "unpause", "wait"},
			running:    true,
			how:        "frozen",
			wantOpened: []int{20, 30},
		},
		{
			name:  "an engine that cannot pause: killed, then scanned",
			setup: func(f *fakeFreezer, _ *fakeProcs) { f.pauseErr = errors.New("pause not supported") },
			want:  []string{"pause", "kill-container", "scan while stopped"},
			how:   "the engine cannot pause it: pause not supported",
		},
		{
			name:  "processes not reachable from here: killed, then scanned",
			setup: func(_ *fakeFreezer, p *fakeProcs) { p.openErr = errors.New("another pid namespace") },
			want:  []string{"pause", "top", "open", "kill-container", "scan while stopped"},
			how:   "its processes cannot be reached from here: another pid namespace",
		},
		{
			name:  "a process that outlived the kill: the container goes",
			setup: func(_ *fakeFreezer, p *fakeProcs) { p.survive = 1 },
			want:  []string{"pause", "top", "open", "kill", "scan while frozen", "unpause", "wait", "kill-container", "scan while stopped"},
			how:   "killed",
		},
		{
			name:  "a container left paused by an end that did not finish",
			setup: func(f *fakeFreezer, _ *fakeProcs) { f.paused = true },
			want:  []string{"kill-container", "scan while stopped"},
			how:   "it was left paused",
		},
		{
			name:  "a stopped container: only the scan",
			setup: func(f *fakeFreezer, _ *fakeProcs) { f.running = false },
			want:  []string{"scan while stopped"},
			how:   "stopped",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeFreezer{running: true, pid: 10, procs: []int{10, 20, 30}}
			p := &fakeProcs{f: f}
			if tc.setup != nil {
				tc.setup(f, p)
			}
			res, err := settle(t.Context(), f, p, "c0ffee", scanOn(f))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.calls, tc.want) {
				t.Errorf("calls:\n got %q\nwant %q", f.calls, tc.want)
			}
			if res.running != tc.running || !strings.HasPrefix(res.how, tc.how) || len(res.found) != 1 {
				t.Errorf("result: %+v", res)
			}
			if tc.wantOpened != nil && !slices.Equal(p.opened, tc.wantOpened) {
				t.Errorf("opened %v, want %v (init is not killed)", p.opened, tc.wantOpened)
			}
		})
	}
}
