package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shiroagent/shiro/agent/provider/anthropic"
	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/docker"
)

// shapeBench measures what issue 16 changed: the cold start with the small
// helper against shiro itself as the helper, and the sandbox's share of a
// bash call through the agent against a bare `bash -c true`.
func shapeBench(ctx context.Context, r *report) error {
	bin := os.Getenv("SHIRO_BIN")
	small := bin + "-helper"
	fi, err := os.Stat(small)
	if err != nil {
		return fmt.Errorf("the small helper (make build puts it beside shiro): %w", err)
	}
	big, err := os.Stat(bin)
	if err != nil {
		return err
	}
	r.section("code shape (issue 16)")
	r.add("helper copied into a new container", fmt.Sprintf("%.1f MiB (shiro itself: %.1f MiB)", mib(fi.Size()), mib(big.Size())), "<= 10 MiB", fi.Size() <= 10<<20)

	// Cold start: the first `shiro tool bash true` of a workspace creates
	// the container and copies the helper in. Alternate the two helpers so
	// that load on the machine hits both alike.
	eng, err := docker.Connect(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	ws, err := os.MkdirTemp("", "shiro-bench-cold-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	defer removeContainers(eng.API(), ws)
	var coldSmall, coldBig []time.Duration
	for range 3 {
		for _, c := range []struct {
			helper string
			into   *[]time.Duration
		}{{small, &coldSmall}, {bin, &coldBig}} {
			removeContainers(eng.API(), ws)
			d, err := timeCLI(bin, ws, docker.HelperEnv+"="+c.helper)
			if err != nil {
				return err
			}
			*c.into = append(*c.into, d)
		}
	}
	removeContainers(eng.API(), ws)
	r.add("cold start with shiro as the helper (before), median of 3", ms(median(coldBig)), "", true)
	r.add("cold start with shiro-helper (after), median of 3", ms(median(coldSmall)), "", true)

	return bashShare(ctx, r, small)
}

// bashShare runs 100 agent steps that each call bash `true` in the sandbox
// and 100 that each call a host-only tool, through the fake model server,
// and compares the difference per call with `bash -c true` timed inside the
// same container.
func bashShare(ctx context.Context, r *report, helperBin string) error {
	const steps = 100
	ws, err := os.MkdirTemp("", "shiro-bench-share-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644); err != nil {
		return err
	}
	prev, had := os.LookupEnv(docker.HelperEnv)
	os.Setenv(docker.HelperEnv, helperBin)
	defer func() {
		if had {
			os.Setenv(docker.HelperEnv, prev)
		} else {
			os.Unsetenv(docker.HelperEnv)
		}
	}()
	eng, err := docker.Connect(ctx)
	if err != nil {
		return err
	}
	defer eng.Close()
	defer removeContainers(eng.API(), ws)

	sc := orchestrator.SandboxConfig{Workspace: ws}
	var sessionInfo sandbox.Info
	perStep := func(name, input string) (time.Duration, *orchestrator.Session, error) {
		replies := make([]fakemodel.Reply, 0, steps+1)
		for i := range steps {
			replies = append(replies, fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: name, Input: input}}})
		}
		replies = append(replies, fakemodel.Reply{Text: "done"})
		srv := fakemodel.Start(replies...)
		defer srv.Close()
		model, err := anthropic.New(anthropic.Config{APIKey: "bench", BaseURL: srv.URL + "/v1", Model: "fake"})
		if err != nil {
			return 0, nil, err
		}
		errs := 0
		sess, err := orchestrator.NewSession(orchestrator.SessionOptions{
			Workspace: ws, Model: model, Yolo: true, NoInstructions: true, NoMCP: true,
			Sandbox:  sc,
			MaxSteps: steps + 10, PruneThreshold: 1 << 30,
			Events: countErrors(&errs),
		})
		if err != nil {
			return 0, nil, err
		}
		// Open the sandbox before the clock runs.
		if sessionInfo, err = sess.StartSandbox(ctx); err != nil {
			sess.Close()
			return 0, nil, err
		}
		start := time.Now()
		err = sess.Send(ctx, "go")
		wall := time.Since(start)
		if err == nil && errs > 0 {
			err = fmt.Errorf("%d errors calling %s", errs, name)
		}
		if err != nil {
			sess.Close()
			return 0, nil, err
		}
		return (wall - srv.Busy()) / (steps + 1), sess, nil
	}
	host, hs, err := perStep("read_file", `{"path":"a.txt"}`)
	if err != nil {
		return err
	}
	hs.Close()
	bash, bs, err := perStep("bash", `{"command":"true"}`)
	if err != nil {
		return err
	}
	defer bs.Close()
	// The baseline runs where the agent's bash ran: a sandbox opened as the
	// session opens its own (ask mode, with its proxy, so commands get the
	// same environment) is a second session on the same container.
	sb, err := orchestrator.OpenSandbox(ctx, sc)
	if err != nil {
		return err
	}
	defer sb.Close()
	if got := sb.Info().Container; got != sessionInfo.Container {
		return fmt.Errorf("the baseline would run in %s, the agent's bash ran in %s", got, sessionInfo.Container)
	}
	plain, err := inContainerPerRun(ctx, sb, "bash -c true")
	if err != nil {
		return err
	}
	login, err := inContainerPerRun(ctx, sb, "bash -lc true")
	if err != nil {
		return err
	}
	// The agent's calls come one a step: between two, the container waits
	// about as long as a host-only step takes.
	paced, err := pacedPerRun(ctx, sb, "bash -c true", host)
	if err != nil {
		return err
	}
	share := bash - host
	ratio := float64(share) / float64(plain)
	r.add("agent step calling bash true, per step", ms(bash), "", true)
	r.add("agent step calling read_file (host only), per step", ms(host), "", true)
	r.add("bash -c true inside the container (the same one), per run", ms(plain), "", true)
	r.add("bash -c true inside the container, each run after a pause of a host-only step, per run", ms(paced), "", true)
	r.add("bash -lc true inside the container (each call's cost before), per run", ms(login), "", true)
	r.add("sandbox's share of a bash call / bash -c true", fmt.Sprintf("%.2fx (%s)", ratio, ms(share)), "<= 1.3x", ratio <= 1.3)
	r.add("sandbox's share of a bash call / bash -c true after such a pause", fmt.Sprintf("%.2fx (%s over it)", float64(share)/float64(paced), ms(share-paced)), "", true)
	return nil
}

// pacedPerRun times 100 runs of shell inside the container, each after a
// pause, by bash's own clock around each run only: on a machine whose CPUs
// go idle in the pause, a run after it costs more than one in a tight loop,
// and the agent's calls come with such pauses between them.
func pacedPerRun(ctx context.Context, sb sandbox.Sandbox, shell string, pause time.Duration) (time.Duration, error) {
	const runs = 100
	script := fmt.Sprintf(`exec 3<> <(:); t=0
for ((i=0; i<%d; i++)); do
  read -t %.6f -u 3 _
  s=$EPOCHREALTIME; %s; e=$EPOCHREALTIME
  t=$((t + ${e/./} - ${s/./}))
done
echo $((t * 1000))`, runs, pause.Seconds(), shell)
	var out bytes.Buffer
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"bash", "-c", script}, Stdout: &out})
	if err != nil {
		return 0, err
	}
	if res.ExitCode != 0 {
		return 0, fmt.Errorf("%s, paced: exit %d", shell, res.ExitCode)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s, paced: %q: %w", shell, out.String(), err)
	}
	return time.Duration(ns / runs), nil
}

// inContainerPerRun times 100 runs of shell inside the container, by the
// container's own clock, so no channel or exec is counted.
func inContainerPerRun(ctx context.Context, sb sandbox.Sandbox, shell string) (time.Duration, error) {
	const runs = 100
	script := fmt.Sprintf("s=$(date +%%s%%N); i=0; while [ $i -lt %d ]; do %s; i=$((i+1)); done; e=$(date +%%s%%N); echo $((e-s))", runs, shell)
	var out bytes.Buffer
	res, err := sb.Run(ctx, sandbox.Command{Args: []string{"sh", "-c", script}, Stdout: &out})
	if err != nil {
		return 0, err
	}
	if res.ExitCode != 0 {
		return 0, fmt.Errorf("%s: exit %d", shell, res.ExitCode)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: %w", shell, out.String(), err)
	}
	return time.Duration(ns / runs), nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
