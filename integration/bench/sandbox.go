package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
)

// sandboxBench measures the command channel against a bare exec, the
// interrupt latency and the start of `shiro tool bash`.
func sandboxBench(ctx context.Context, r *report) error {
	ws, err := os.MkdirTemp("", "shiro-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	eng, sb, done, err := openSandbox(ctx, ws)
	if err != nil {
		return err
	}
	defer done()
	bin := os.Getenv("SHIRO_BIN")

	// Per-call overhead on the open channel: argv `true`, no shell.
	run := func() error {
		_, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}})
		return err
	}
	// A bare exec round trip through the Engine API: create, start
	// attached, read to the end, inspect the exit code.
	api := eng.API()
	id := sb.ContainerID()
	r.section("sandbox (issue 2)")
	if err := channelAgainstBare(r, "docker exec", 5*time.Millisecond, run, func() error { return bareExec(ctx, api, id) }); err != nil {
		return err
	}

	// Interrupt: a command with escaped children, cancelled once it printed.
	for _, c := range []struct{ name, shell string }{
		{"interrupt to return, median of 20", escapees},
		{"interrupt to return, escapes without the marker (issue 11), median of 20", unmarkedEscapees},
	} {
		var interrupts []time.Duration
		for range 20 {
			d, err := interruptOnce(ctx, sb, c.shell)
			if err != nil {
				return err
			}
			interrupts = append(interrupts, d)
		}
		im := median(interrupts)
		r.add(c.name, ms(im), "<= 100 ms", im <= 100*time.Millisecond)
	}
	left, err := sleepsLeft(ctx, api, id)
	if err != nil {
		return err
	}
	r.add("processes the 40 interrupts left behind", fmt.Sprint(left), "0", left == 0)

	// Start of the CLI: cold (no container) and warm (container running).
	cliWS, err := os.MkdirTemp("", "shiro-bench-cli-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cliWS)
	defer removeContainers(api, cliWS)
	var cold []time.Duration
	for range 3 {
		removeContainers(api, cliWS)
		d, err := timeCLI(bin, cliWS)
		if err != nil {
			return err
		}
		cold = append(cold, d)
	}
	warm, err := timeN(20, func() error { _, err := timeCLI(bin, cliWS); return err })
	if err != nil {
		return err
	}
	r.add("shiro tool bash true, cold (creates the container), median of 3", ms(median(cold)), "", true)
	wm := median(warm)
	r.add("shiro tool bash true, warm, median of 20", ms(wm), "<= 500 ms", wm <= 500*time.Millisecond)
	return nil
}

// openSandbox opens a sandbox for ws on the built-in image with the
// helper $SHIRO_BIN; done closes it and removes its container.
func openSandbox(ctx context.Context, ws string, mutate ...func(*docker.Options)) (*docker.Engine, *docker.Sandbox, func(), error) {
	bin := os.Getenv("SHIRO_BIN")
	if bin == "" {
		return nil, nil, nil, errors.New("SHIRO_BIN must name a static shiro binary (make bench sets it)")
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	opts := docker.Options{Spec: sandbox.Spec{Workspace: ws, HelperBinary: bin + "-helper"}}
	for _, m := range mutate {
		m(&opts)
	}
	sb, err := eng.Open(ctx, docker.Reference(images.Tag()), opts)
	if err != nil {
		removeContainers(eng.API(), ws)
		eng.Close()
		return nil, nil, nil, err
	}
	return eng, sb, func() {
		sb.Close()
		removeContainers(eng.API(), ws)
		eng.Close()
	}, nil
}

// channelAgainstBare measures a command on a session's channel (run: 10
// warm-up runs, then the median of 200) against the same command through
// an exec of its own (bare, through exec: the median of 50), and reports
// both and their ratio, which must be 10 or more. channelTarget bounds
// the channel's median; zero sets none.
func channelAgainstBare(r *report, exec string, channelTarget time.Duration, run, bare func() error) error {
	for range 10 { // warm up
		if err := run(); err != nil {
			return err
		}
	}
	channel, err := timeN(200, run)
	var bareRuns []time.Duration
	if err == nil {
		bareRuns, err = timeN(50, bare)
	}
	if err != nil {
		return err
	}
	cm, bm := median(channel), median(bareRuns)
	target, ok := "", true
	if channelTarget > 0 {
		target, ok = fmt.Sprintf("<= %d ms", channelTarget.Milliseconds()), cm <= channelTarget
	}
	r.add("channel: per-call overhead, median of 200", ms(cm), target, ok)
	r.add("bare "+exec+" round trip, median of 50", ms(bm), "", true)
	ratio := float64(bm) / float64(cm)
	r.add("bare "+exec+" / channel", fmt.Sprintf("%.1fx", ratio), ">= 10x", ratio >= 10)
	return nil
}

// timeN runs fn n times and returns each duration.
func timeN(n int, fn func() error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := fn(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func bareExec(ctx context.Context, api *client.Client, id string) error {
	ex, err := api.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: []string{"true"}, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return err
	}
	att, err := api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, att.Reader)
	att.Close()
	in, err := api.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return err
	}
	if in.ExitCode != 0 {
		return fmt.Errorf("bare exec exited %d", in.ExitCode)
	}
	return nil
}

// Commands that leave children behind and print "started" before they wait.
const (
	escapees = "sleep 300 & (setsid sleep 301 &); nohup sleep 302 >/dev/null 2>&1 & echo started; sleep 303"
	// These leave the marker, the session and the group as well.
	unmarkedEscapees = "setsid env -u SHIRO_CMD sleep 304 >/dev/null 2>&1 & env -i /bin/sleep 305 >/dev/null 2>&1 & " +
		"setsid -f sleep 306 >/dev/null 2>&1; (set -m; sleep 307 >/dev/null 2>&1 &); echo started; sleep 308"
)

// interruptOnce returns the time from cancel to Run returning.
func interruptOnce(ctx context.Context, sb sandbox.Sandbox, shell string) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan struct{})
	var once sync.Once
	w := writerFunc(func(p []byte) {
		if bytes.Contains(p, []byte("started")) {
			once.Do(func() { close(started) })
		}
	})
	done := make(chan time.Time, 1)
	go func() {
		_, _ = sb.Run(ctx, sandbox.Command{Shell: shell, Stdout: w})
		done <- time.Now()
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		cancel()
		<-done
		return 0, errors.New("the command did not start")
	}
	t0 := time.Now()
	cancel()
	return (<-done).Sub(t0), nil
}

// sleepsLeft counts the escapees' sleeps still running in the container a
// moment after the last interrupt (the kill does not wait for every
// process's death).
func sleepsLeft(ctx context.Context, api *client.Client, id string) (int, error) {
	var n int
	for range 50 {
		top, err := api.ContainerTop(ctx, id, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,args"}})
		if err != nil {
			return 0, err
		}
		n = 0
		for _, p := range top.Processes {
			if a := strings.Join(p, " "); strings.Contains(a, "sleep 30") {
				n++
			}
		}
		if n == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n, nil
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// timeCLI times `shiro tool bash true` in ws, with extra environment.
func timeCLI(bin, ws string, env ...string) (time.Duration, error) {
	cmd := exec.Command(bin, "tool", "bash", `{"command":"true"}`)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil || !strings.Contains(out.String(), "exit: 0") {
		return 0, fmt.Errorf("shiro tool bash: %v: %s", err, out.String())
	}
	return d, nil
}

func removeContainers(api *client.Client, ws string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", docker.LabelWorkspace+"="+ws)})
	if err != nil {
		return
	}
	for _, c := range res.Items {
		_, _ = api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}
	vols, err := api.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", docker.LabelWorkspace+"="+ws)})
	if err != nil {
		return
	}
	for _, v := range vols.Items {
		_, _ = api.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
	}
}
