package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/orchestrator/worktree"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
)

// worktreeBench measures what --worktree adds to a start in the
// 2,000-file repository: making the agent's worktree (git worktree add,
// the record), opening its sandbox and running the first command, against
// a plain cold start (a sandbox for a checkout that has none yet, and its
// first command); then a reused agent against a plain warm start; then a
// channel call in one agent's sandbox while 1, 2 and 4 agents' sandboxes
// are open.
func worktreeBench(ctx context.Context, r *report) error {
	base, err := os.MkdirTemp("", "shiro-bench-worktree-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	repo, data := filepath.Join(base, "checkout"), filepath.Join(base, "data")
	if err := gitRepoWithFiles(repo, 2000); err != nil {
		return err
	}
	eng, err := docker.Connect(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()

	first := func(sb sandbox.Sandbox, dir string) error {
		res, err := sb.Run(ctx, sandbox.Command{Args: []string{"true"}, Dir: dir})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("true: exit %d", res.ExitCode)
		}
		return err
	}
	var agents []string      // workspaces whose containers go at the end
	var made []time.Duration // worktree.Open alone, in each startAgent
	defer func() {
		for _, ws := range agents {
			removeContainers(eng.API(), ws)
		}
	}()
	startAgent := func(name string) (time.Duration, *docker.Sandbox, error) {
		start := time.Now()
		a, err := worktree.Open(ctx, worktree.OpenOptions{Dir: repo, Name: name, DataDir: data})
		if err != nil {
			return 0, nil, err
		}
		agents = append(agents, a.Path)
		made = append(made, time.Since(start))
		sb, err := openOn(ctx, eng, a.Path)
		if err != nil {
			return 0, nil, err
		}
		err = first(sb, a.Path)
		return time.Since(start), sb, err
	}
	startPlain := func(ws string) (time.Duration, *docker.Sandbox, error) {
		start := time.Now()
		sb, err := openOn(ctx, eng, ws)
		if err != nil {
			return 0, nil, err
		}
		agents = append(agents, ws)
		err = first(sb, ws)
		return time.Since(start), sb, err
	}

	const rounds = 5
	var cold, coldOpen, coldPlain, warm, warmPlain []time.Duration
	for i := range rounds { // alternate, so load on the machine hits both alike
		clone := filepath.Join(base, fmt.Sprintf("clone-%d", i))
		if out, err := exec.Command("git", "clone", "-q", repo, clone).CombinedOutput(); err != nil {
			return fmt.Errorf("git clone: %v\n%s", err, out)
		}
		d, sb, err := startAgent(fmt.Sprintf("bench-%d", i))
		if err != nil {
			return err
		}
		sb.Close()
		cold, coldOpen = append(cold, d), append(coldOpen, made[len(made)-1])
		d, sb, err = startPlain(clone)
		if err != nil {
			return err
		}
		sb.Close()
		coldPlain = append(coldPlain, d)

		d, sb, err = startAgent(fmt.Sprintf("bench-%d", i)) // reused: worktree and container exist
		if err != nil {
			return err
		}
		sb.Close()
		warm = append(warm, d)
		d, sb, err = startPlain(clone)
		if err != nil {
			return err
		}
		sb.Close()
		warmPlain = append(warmPlain, d)
	}
	r.section("worktree agents (issue 30)")
	ratio := float64(median(cold)) / float64(median(coldPlain))
	r.add(fmt.Sprintf("--worktree NEW to the first command, 2,000 files, median of %d", rounds), ms(median(cold)), "", true)
	r.add("  of which worktree.Open (git worktree add: writing the 2,000 files)", ms(median(coldOpen)), "", true)
	r.add("a plain cold start to the first command (a checkout without a container)", ms(median(coldPlain)), "", true)
	r.add("--worktree NEW against the plain cold start", fmt.Sprintf("%.2fx", ratio), "<= 1.5x", ratio <= 1.5)
	r.add("--worktree of an existing agent to the first command", ms(median(warm)), "", true)
	r.add("a plain warm start (its container exists)", ms(median(warmPlain)), "", true)

	// The per-call overhead with agents running: a channel call in the
	// first agent's sandbox while n agents' sandboxes are open (each
	// running a command loop of its own, as agents at work do).
	var perN []time.Duration
	for _, n := range []int{1, 2, 4} {
		var open []*docker.Sandbox
		for i := range n {
			_, sb, err := startAgent(fmt.Sprintf("bench-%d", i))
			if err != nil {
				return err
			}
			open = append(open, sb)
		}
		busy, cancel := context.WithCancel(ctx)
		done := make(chan struct{}, n)
		for _, sb := range open[1:] {
			go func() {
				defer func() { done <- struct{}{} }()
				for busy.Err() == nil {
					_, _ = sb.Run(busy, sandbox.Command{Shell: "echo change >> d0/f0.txt; git status --porcelain >/dev/null"})
				}
			}()
		}
		call := func() error { return first(open[0], "") }
		ds, err := timeN(100, call)
		cancel()
		for range open[1:] {
			<-done
		}
		for _, sb := range open {
			sb.Close()
		}
		if err != nil {
			return err
		}
		perN = append(perN, median(ds))
		r.add(fmt.Sprintf("channel call in an agent's sandbox, %d agent(s) running, median of 100", n), ms(median(ds)), "", true)
	}
	if perN[0] > 0 {
		r.add("4 agents running against 1", fmt.Sprintf("%.2fx", float64(perN[2])/float64(perN[0])), "", true)
	}
	return nil
}

// openOn opens a sandbox for ws on eng, on the built-in image with the
// helper $SHIRO_BIN; its container stays when it is closed.
func openOn(ctx context.Context, eng *docker.Engine, ws string) (*docker.Sandbox, error) {
	bin := os.Getenv("SHIRO_BIN")
	if bin == "" {
		return nil, errors.New("SHIRO_BIN must name a static shiro binary (make bench sets it)")
	}
	return eng.Open(ctx, docker.Reference(images.Tag()), docker.Options{Spec: sandbox.Spec{Workspace: ws, HelperBinary: bin + "-helper"}})
}
