package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox/gitshadow"
)

// When the last session of a workspace's container closes, the git
// boundary's final scan decides what in the workspace is a repository git
// on the host may use. Nothing in the container may run while it decides,
// nor after: a process that outlived the session (or took over one of
// shiro's) could make a repository right after the scan. So the container
// is frozen from outside (the engine's pause, the cgroup freezer), every
// process in it but PID 1 is killed while it is frozen (from this machine,
// by pidfd: a frozen process cannot fork, exit or be reaped, so the list
// stays true), the scan runs, and the container is thawed for the next
// session with nothing but init in it. Where the engine cannot pause, or
// its processes cannot be reached from here, the container is killed
// instead, and the next session starts it again.

// freezeAPI is the part of the Engine API the end of a container's last
// session calls.
type freezeAPI interface {
	ContainerPause(ctx context.Context, id string, opts client.ContainerPauseOptions) (client.ContainerPauseResult, error)
	ContainerUnpause(ctx context.Context, id string, opts client.ContainerUnpauseOptions) (client.ContainerUnpauseResult, error)
	ContainerTop(ctx context.Context, id string, opts client.ContainerTopOptions) (client.ContainerTopResult, error)
	ContainerKill(ctx context.Context, id string, opts client.ContainerKillOptions) (client.ContainerKillResult, error)
	ContainerInspect(ctx context.Context, id string, opts client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerWait(ctx context.Context, id string, opts client.ContainerWaitOptions) client.ContainerWaitResult
}

// hostProcs reaches a container's processes from this machine: open
// returns a handle on each host pid that is a process of the container
// (whose cgroup names it), or an error when one cannot be had.
type hostProcs interface {
	open(containerID string, pids []int) (victims, error)
}

// victims are processes opened by hostProcs.
type victims interface {
	// kill sends each SIGKILL (a frozen process dies as it thaws).
	kill() error
	// wait waits up to d for all of them to be gone and returns how many
	// are not.
	wait(d time.Duration) int
	close()
}

// settled is how the end of the last session went.
type settled struct {
	// found is the final scan's findings.
	found []gitshadow.Finding
	// running: the container is running again, with only its init.
	running bool
	// how says what was done, for the notices: "frozen", or why the
	// container was killed instead.
	how string
}

// settleGone is how long the killed processes may take to go once the
// container is thawed before the container is killed instead.
const settleGone = 2 * time.Second

// settle freezes the container id, kills everything in it but PID 1,
// runs scan and thaws it (see above). The scan runs even when the
// container cannot be frozen: then after the container was killed.
func settle(ctx context.Context, api freezeAPI, procs hostProcs, id string, scan func() ([]gitshadow.Finding, error)) (settled, error) {
	frozen := false // to be thawed on the way out
	defer func() {
		if frozen {
			_, _ = api.ContainerUnpause(context.WithoutCancel(ctx), id, client.ContainerUnpauseOptions{})
		}
	}()
	killAll := func(why string) (settled, error) {
		frozen = false // a killed container needs no thaw
		if err := killContainer(ctx, api, id); err != nil {
			return settled{}, fmt.Errorf("kill the sandbox container %s (%s): %w", short(id), why, err)
		}
		found, err := scan()
		return settled{found: found, how: why}, err
	}
	info, err := api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return settled{}, fmt.Errorf("inspect the sandbox container %s: %w", short(id), err)
	}
	st := info.Container.State
	if st == nil || !st.Running {
		found, err := scan() // nothing runs
		return settled{found: found, how: "stopped"}, err
	}
	if st.Paused {
		return killAll("it was left paused")
	}
	if _, err := api.ContainerPause(ctx, id, client.ContainerPauseOptions{}); err != nil {
		return killAll("the engine cannot pause it: " + err.Error())
	}
	frozen = true
	top, err := api.ContainerTop(ctx, id, client.ContainerTopOptions{})
	if err != nil {
		return killAll("its processes could not be listed: " + err.Error())
	}
	pids, err := topPids(top)
	if err != nil {
		return killAll(err.Error())
	}
	var others []int
	for _, p := range pids {
		if p != st.Pid {
			others = append(others, p)
		}
	}
	vs, err := procs.open(info.Container.ID, others)
	if err != nil {
		return killAll("its processes cannot be reached from here: " + err.Error())
	}
	defer vs.close()
	if err := vs.kill(); err != nil {
		return killAll("its processes could not be killed from here: " + err.Error())
	}
	found, scanErr := scan()
	if _, err := api.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{}); err != nil {
		return killAll("it could not be thawed: " + err.Error())
	}
	frozen = false
	if left := vs.wait(settleGone); left > 0 {
		if _, err := killAll(fmt.Sprintf("%d of its processes outlived the kill", left)); err != nil {
			return settled{}, err
		}
		return settled{found: found, how: "killed"}, scanErr
	}
	return settled{found: found, running: true, how: "frozen"}, scanErr
}

// killWait bounds the wait for a killed container to stop.
const killWait = 10 * time.Second

// killContainer kills the container id and waits until it no longer runs.
func killContainer(ctx context.Context, api freezeAPI, id string) error {
	ctx, cancel := context.WithTimeout(ctx, killWait)
	defer cancel()
	wait := api.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	if _, err := api.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil && !notRunning(err) {
		return err
	}
	select {
	case <-wait.Result:
		return nil
	case err := <-wait.Error:
		if notRunning(err) {
			return nil
		}
		return fmt.Errorf("wait for it to stop: %w", err)
	}
}

// topPids reads the PID column of a top listing.
func topPids(top client.ContainerTopResult) ([]int, error) {
	col := -1
	for i, t := range top.Titles {
		if strings.EqualFold(strings.TrimSpace(t), "PID") {
			col = i
		}
	}
	if col < 0 {
		return nil, fmt.Errorf("its process list has no PID column (%q)", top.Titles)
	}
	var out []int
	for _, row := range top.Processes {
		if col >= len(row) {
			return nil, errors.New("its process list has a short row")
		}
		p, err := strconv.Atoi(strings.TrimSpace(row[col]))
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("its process list has the pid %q", row[col])
		}
		out = append(out, p)
	}
	return out, nil
}

// notRunning reports the engine's answer for a container that is not
// running (a kill of a container that stopped meanwhile).
func notRunning(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "is not running")
}
