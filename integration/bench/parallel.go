package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
)

// parallelCalls is how many timed calls each agent makes a round.
const parallelCalls = 100

// parallelBench: the channel's per-call overhead with 1, 2 and 4 agents
// running at once (issue 30). Each agent is what --parallel gives one:
// its own workspace, its own container and its own channel; all of them
// call `true` back to back, the busiest an agent's sandbox gets, so the
// figure is the worst case on this machine's cores.
func parallelBench(ctx context.Context, r *report) error {
	const most = 4
	sbs := make([]*docker.Sandbox, 0, most)
	for range most {
		ws, err := os.MkdirTemp("", "shiro-bench-parallel-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(ws)
		_, sb, done, err := openSandbox(ctx, ws)
		if err != nil {
			return err
		}
		defer done()
		sbs = append(sbs, sb)
	}
	r.section("parallel agents (issue 30)")
	var one time.Duration
	for _, n := range []int{1, 2, most} {
		m, err := concurrentCalls(ctx, sbs[:n])
		if err != nil {
			return err
		}
		if n == 1 {
			one = m
		}
		who := "1 agent calling"
		if n > 1 {
			who = fmt.Sprintf("%d agents calling at once", n)
		}
		r.add(fmt.Sprintf("channel: per-call overhead, %s, median of %d", who, n*parallelCalls),
			fmt.Sprintf("%s (%.1f× one agent's)", ms(m), float64(m)/float64(one)), "", true)
	}
	return nil
}

// concurrentCalls runs `true` in every sandbox at once, parallelCalls
// times each after a warm-up, and returns the median of all the calls.
func concurrentCalls(ctx context.Context, sbs []*docker.Sandbox) (time.Duration, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		all  []time.Duration
		errs = make([]error, len(sbs))
	)
	// Every agent warms up, then all start their timed calls together.
	var warm sync.WaitGroup
	warm.Add(len(sbs))
	start := make(chan struct{})
	for i, sb := range sbs {
		wg.Go(func() {
			run := func() error {
				_, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}})
				return err
			}
			for range 10 {
				if errs[i] = run(); errs[i] != nil {
					break
				}
			}
			warm.Done()
			if errs[i] != nil {
				return
			}
			<-start
			ds, err := timeN(parallelCalls, run)
			if errs[i] = err; err != nil {
				return
			}
			mu.Lock()
			all = append(all, ds...)
			mu.Unlock()
		})
	}
	warm.Wait()
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return median(all), nil
}
