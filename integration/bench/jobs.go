package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/jobs"
)

// jobsBench: the channel's per-call overhead while a background job
// streams output as fast as it can over the same channel (issue 29), and
// the job's throughput into its ring.
func jobsBench(ctx context.Context, r *report) error {
	ws, err := os.MkdirTemp("", "shiro-bench-jobs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	_, sb, done, err := openSandbox(ctx, ws)
	if err != nil {
		return err
	}
	defer done()
	quiet, err := perCall(ctx, sb)
	if err != nil {
		return err
	}
	m := jobs.NewManager(sb, nil)
	defer m.Close()
	j, err := m.Start(ctx, jobs.Spec{Command: `while :; do head -c 65536 /dev/zero | tr '\0' x; echo; done`})
	if err != nil {
		return err
	}
	j.First(ctx, time.Second, 1<<20)
	before, start := j.Output().Total(), time.Now()
	run := func() error {
		_, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}})
		return err
	}
	for range 10 {
		if err := run(); err != nil {
			return err
		}
	}
	calls, err := timeN(200, run)
	if err != nil {
		return err
	}
	streamed := j.Output().Total() - before
	took := time.Since(start)
	if _, err := m.Kill(ctx, j.ID()); err != nil {
		return err
	}
	r.section("jobs (issue 29)")
	cm := median(calls)
	r.add("channel: per-call overhead, quiet, median of 200", ms(quiet), "", true)
	r.add("channel: per-call overhead while a job streams, median of 200", ms(cm), "<= 5 ms", cm <= 5*time.Millisecond)
	r.add("the job's output meanwhile", fmt.Sprintf("%.1f MiB/s", float64(streamed)/(1<<20)/took.Seconds()), "", streamed > 0)
	return nil
}
