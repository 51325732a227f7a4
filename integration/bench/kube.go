package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/kube"
)

// kubeBench measures the Kubernetes backend's command channel (one long
// pods/exec carrying the helper protocol) against a bare pods/exec round
// trip to the same pod, in the same run. It needs the test cluster:
// scripts/bench.sh (make bench) brings it up and sets
// SHIRO_TEST_KUBECONFIG.
func kubeBench(ctx context.Context, r *report) error {
	kc := os.Getenv("SHIRO_TEST_KUBECONFIG")
	if kc == "" {
		return errors.New("SHIRO_TEST_KUBECONFIG is not set: make bench (scripts/bench.sh) brings the test cluster up")
	}
	bin := os.Getenv("SHIRO_BIN")
	if bin == "" {
		return errors.New("SHIRO_BIN must name a static shiro binary (make bench sets it)")
	}
	state, err := os.MkdirTemp("", "shiro-bench-kube-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	ws, err := os.MkdirTemp("", "shiro-bench-kube-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	c, err := kube.Connect(ctx, kube.ConnectOptions{Kubeconfig: kc, StateDir: state})
	if err != nil {
		return err
	}
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 1001, 1001
	}
	start := time.Now()
	sb, err := c.Open(ctx, kube.Options{Spec: sandbox.Spec{Workspace: ws, HelperBinary: bin + "-helper", UID: uid, GID: gid, Settings: sandbox.Settings{Memory: 512 << 20, CPUs: 1, Network: sandbox.NetworkNone}}})
	if err != nil {
		return err
	}
	cold := time.Since(start)
	defer func() {
		sb.Close()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		_ = c.Remove(cctx, sb.Pod())
		_, _ = c.RemoveClaims(cctx, ws)
	}()
	run := func() error {
		res, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("true exited %d", res.ExitCode)
		}
		return err
	}
	pod := sb.Pod()
	bare := func() error {
		code, err := c.Exec(ctx, pod, []string{"true"})
		if err == nil && code != 0 {
			err = fmt.Errorf("true exited %d", code)
		}
		return err
	}
	r.section("kubernetes (issue 18)")
	r.add("a new pod and its first session (claim, helper delivery, setup)", ms(cold), "", true)
	return channelAgainstBare(r, "pods/exec", 0, run, bare)
}
