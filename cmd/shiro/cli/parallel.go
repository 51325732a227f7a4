package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/orchestrator/worktree"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools"
)

// ParallelOptions are the flags of `shiro --parallel N -p "task"`.
type ParallelOptions struct {
	// N is the number of agents.
	N int
	// Check is a command run in each agent's sandbox after its agent ends
	// ("make test").
	Check string
}

// maxParallel is the most agents one --parallel starts.
const maxParallel = 16

// checkTimeout bounds a --check command (the bash tool's longest).
const checkTimeout = tools.BashMaxTimeout

// parallelFlags are the flags runParallel takes for itself; the others
// are passed to every agent as the user gave them.
var parallelFlags = []string{"parallel", "check", "model", "worktree", "print", "json", "continue", "resume"}

func bindParallel(fl *pflag.FlagSet, p *ParallelOptions) {
	fl.IntVar(&p.N, "parallel", 0, "with -p: run `N` agents on the task at once, each in its own worktree (--worktree NAME makes NAME-1…NAME-N), and print a summary table")
	fl.StringVar(&p.Check, "check", "", "with --parallel: a `command` to run in each agent's sandbox after it ends, e.g. \"make test\" (its result is in the table)")
}

// plannedAgent is one agent of a --parallel run before it starts.
type plannedAgent struct {
	Name, Branch string
	// Model is the agent's --model ("" when none is given: the
	// configuration's).
	Model string
}

// planParallel names the n agents (base-1…base-n; base from now when
// empty) and gives them the models in turn. It refuses what cannot run.
func planParallel(n int, base string, models []string, now time.Time) ([]plannedAgent, error) {
	switch {
	case n < 2:
		return nil, usagef("--parallel %d: give at least 2 agents (one agent in its own worktree is --worktree NAME)", n)
	case n > maxParallel:
		return nil, usagef("--parallel %d: at most %d agents run at once", n, maxParallel)
	case len(models) > n:
		return nil, usagef("--model is given %d times for %d agents: give it at most once per agent", len(models), n)
	}
	if base == "" {
		base = "parallel-" + now.Format("20060102-150405")
	}
	out := make([]plannedAgent, n)
	for i := range out {
		name := base + "-" + strconv.Itoa(i+1)
		if err := worktree.CheckName(name); err != nil {
			return nil, usagef("--worktree %s: %v", base, err)
		}
		out[i] = plannedAgent{Name: name, Branch: worktree.Branch(name)}
		if len(models) > 0 {
			out[i].Model = models[i%len(models)]
		}
	}
	return out, nil
}

// checkParallelArgs refuses the flags --parallel and --check cannot go with.
func checkParallelArgs(opts *RunOptions) error {
	switch {
	case opts.Parallel.N == 0:
		return usagef("--check needs --parallel N (it runs in each agent's sandbox when the agent ends)")
	case !opts.Print:
		return usagef("--parallel needs -p: the agents run headless (the chat UI runs one agent)")
	case opts.Continue || opts.Resume != "":
		return usagef("--parallel starts new agents: it does not go with -c or -r (continue one agent with -c --worktree NAME)")
	}
	return nil
}

// engineMemory is what a backend's Manager tells of its engine's memory
// (the docker backend's does; an engine that schedules elsewhere does not).
type engineMemory interface {
	EngineMemory(context.Context) (int64, error)
}

// checkCapacity refuses n sandboxes of limit bytes each on an engine
// with engine bytes: the engine would kill them rather than hold them.
func checkCapacity(n int, limit, engine int64) error {
	if engine <= 0 || limit <= 0 || int64(n)*limit <= engine {
		return nil
	}
	most := engine / limit
	hint := fmt.Sprintf("run at most %d agents at this limit, or lower it with --memory", most)
	if most < 2 {
		hint = "lower the limit with --memory"
	}
	return fmt.Errorf("--parallel %d needs %d × %s of sandbox memory (%s) and the Docker engine has %s: %s",
		n, n, gib(limit), gib(int64(n)*limit), gib(engine), hint)
}

// gib writes a memory size in GiB, as --memory's 4g means it.
func gib(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// capacity asks the sandboxes' engine for its memory and checks that n
// sandboxes fit in it. An engine that cannot tell is not checked.
func capacity(ctx context.Context, n int, s sandbox.Settings) error {
	if s.NoSandbox {
		return nil
	}
	b, err := sandbox.Lookup(cmp.Or(s.Backend, sandbox.DefaultBackend))
	if err != nil {
		return err
	}
	m, err := b.Manage(ctx, s)
	if err != nil {
		return fmt.Errorf("reach the engine to check its memory: %w", err)
	}
	defer m.Close()
	em, ok := m.(engineMemory)
	if !ok {
		return nil
	}
	total, err := em.EngineMemory(ctx)
	if err != nil {
		return fmt.Errorf("ask the engine for its memory: %w", err)
	}
	return checkCapacity(n, cmp.Or(s.Memory, int64(sandbox.DefaultMemory)), total)
}

// agentResult is one agent of a --parallel run, for the summary.
type agentResult struct {
	Name   string `json:"agent"`
	Branch string `json:"branch"`
	Model  string `json:"model,omitempty"`
	// Log is the file that holds the agent's output.
	Log string `json:"log"`
	// Started is set once the agent's process started; Exit is its exit
	// code then (128+n after signal n).
	Started bool `json:"started"`
	Exit    int  `json:"exitCode"`
	// Turns counts the model's answers in the agent's session; Cost is
	// what they cost, when the model is priced.
	Turns int      `json:"turns"`
	Cost  *float64 `json:"costUsd,omitempty"`
	// Files counts the files changed from the agent's base commit (its
	// commits and what it left uncommitted); -1 when unknown.
	Files int `json:"filesChanged"`
	// Check is the --check command's outcome (nil without --check).
	Check *checkResult `json:"check,omitempty"`
	// Err says what went wrong around the agent (not inside its run).
	Err string `json:"error,omitempty"`
}

// checkResult is how the --check command ended in one agent's sandbox.
type checkResult struct {
	Command string `json:"command"`
	// Ran is false when the check did not run (the agent did not start,
	// or the run was interrupted); Exit is its exit code when it ran.
	Ran  bool   `json:"ran"`
	Exit int    `json:"exitCode"`
	Err  string `json:"error,omitempty"`
}

func (a agentResult) ok() bool {
	return a.Started && a.Exit == 0 && a.Err == "" && (a.Check == nil || (a.Check.Ran && a.Check.Exit == 0 && a.Check.Err == ""))
}

// exitText is the table's EXIT cell.
func (a agentResult) exitText() string {
	if !a.Started {
		return "not started"
	}
	return strconv.Itoa(a.Exit)
}

// checkText is the table's CHECK cell.
func (c *checkResult) text() string {
	switch {
	case c == nil:
		return "-"
	case c.Err != "":
		return "error"
	case !c.Ran:
		return "not run"
	case c.Exit == 0:
		return "ok"
	}
	return "exit " + strconv.Itoa(c.Exit)
}

// printSummary writes the summary table, or (asJSON) one JSON object.
func printSummary(w io.Writer, results []agentResult, asJSON bool) error {
	ok := true
	for _, r := range results {
		ok = ok && r.ok()
	}
	if asJSON {
		return json.NewEncoder(termsafe.JSON(w)).Encode(struct {
			Agents []agentResult `json:"agents"`
			OK     bool          `json:"ok"`
		}{results, ok})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tBRANCH\tMODEL\tTURNS\tCOST\tFILES\tEXIT\tCHECK")
	for _, r := range results {
		cost, files := "-", "-"
		if r.Cost != nil {
			cost = fmt.Sprintf("$%.4f", *r.Cost)
		}
		if r.Files >= 0 {
			files = strconv.Itoa(r.Files)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Name, r.Branch, cmp.Or(r.Model, "-"), r.Turns, cost, files, r.exitText(), r.Check.text())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.Err != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Name, r.Err)
		}
		if r.Check != nil && r.Check.Err != "" {
			fmt.Fprintf(w, "%s: --check: %s\n", r.Name, r.Check.Err)
		}
		if !r.ok() && r.Started {
			fmt.Fprintf(w, "%s: its output is in %s\n", r.Name, r.Log)
		}
	}
	return nil
}

// childArgs are the arguments of agent a's shiro: -p in its worktree
// with its model and the user's other flags as given. The task reaches it
// on stdin (as a piped prompt does): an argument has a size limit, and
// would show the task in every process listing.
func childArgs(fl *pflag.FlagSet, a plannedAgent) []string {
	args := []string{"-p", "--worktree", a.Name}
	if a.Model != "" {
		args = append(args, "--model", a.Model)
	}
	fl.Visit(func(fg *pflag.Flag) {
		if slices.Contains(parallelFlags, fg.Name) {
			return
		}
		if sv, ok := fg.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+fg.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+fg.Name+"="+fg.Value.String())
	})
	return args
}

// runParallel is `shiro --parallel N -p "task"`: N headless agents, each
// its own shiro process in its own worktree and sandbox, then the
// summary. See docs/decisions/0038-parallel-agents.md.
func runParallel(cmd *cobra.Command, f *Factory, opts *RunOptions) error {
	if err := checkParallelArgs(opts); err != nil {
		return err
	}
	fl := cmd.Flags()
	agents, err := planParallel(opts.Parallel.N, opts.Worktree, opts.Model.Models, time.Now())
	if err != nil {
		return err
	}
	prompt, err := headlessPrompt(f, opts.Prompt)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	w, err := f.openWorkspace()
	if err != nil {
		return err
	}
	checkout := w.Path()
	cfg, paths, err := f.loadConfig(w, opts.Sandbox, opts.Model)
	w.Close()
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	layout, err := repoLayout(paths.DataDir, checkout)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	for _, a := range agents {
		if layout.Running(a.Name) {
			return &ExitError{Code: 1, Err: fmt.Errorf("the worktree agent %s is running in another shiro: choose another --worktree NAME", a.Name)}
		}
	}
	if err := capacity(ctx, len(agents), cfg.Sandbox); err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find shiro's own binary to start the agents: %w", err)
	}
	if err := os.MkdirAll(layout.State, 0o700); err != nil {
		return err
	}
	fmt.Fprintf(f.ErrOut, "shiro: %d agents on %s to %s; each one's output goes to %s\n",
		len(agents), agents[0].Branch, agents[len(agents)-1].Branch, filepath.Join(layout.State, "NAME.log"))

	pr := &parallelRun{f: f, opts: opts, bin: bin, checkout: checkout, layout: layout, paths: paths, prompt: prompt}
	results := make([]agentResult, len(agents))
	stopForward := pr.forwardSignals(ctx)
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() { results[i] = pr.agent(ctx, a, childArgs(fl, a)) })
	}
	wg.Wait()
	stopForward()
	if err := printSummary(f.Out, results, opts.JSON); err != nil {
		return err
	}
	for _, r := range results {
		if !r.ok() {
			return errSilent(1)
		}
	}
	return nil
}

// repoLayout is where the agents of the repository holding checkout
// live (their worktrees' records and logs are in its State).
func repoLayout(dataDir, checkout string) (worktree.Layout, error) {
	repo, err := worktree.FindRepository(checkout)
	if err != nil {
		return worktree.Layout{}, fmt.Errorf("--parallel runs each agent in a worktree: %w", err)
	}
	// Only the layout's State is used here, which the configured folder
	// of the worktrees does not move.
	return worktree.LayoutFor(dataDir, "", repo.CommonDir), nil
}

// parallelRun is one --parallel run's agents: their processes, and
// what the signal forwarder reaches.
type parallelRun struct {
	f             *Factory
	opts          *RunOptions
	bin, checkout string
	prompt        string
	layout        worktree.Layout
	paths         config.Paths
	// mu guards procs, the agents' processes, and stopped, set once the
	// signal was forwarded (no agent starts after it).
	mu      sync.Mutex
	procs   []*os.Process
	stopped bool
}

// forwardSignals sends the signal that cancels ctx to every agent's
// process (each agent's own handling then stops its sandbox's commands),
// and keeps agents from starting after it. The returned function stops
// the forwarder.
func (pr *parallelRun) forwardSignals(ctx context.Context) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		var sig os.Signal = os.Interrupt
		var sc signalCause
		if errors.As(context.Cause(ctx), &sc) {
			sig = sc.sig
		}
		pr.mu.Lock()
		defer pr.mu.Unlock()
		pr.stopped = true
		for _, p := range pr.procs {
			_ = p.Signal(sig)
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// agent runs one agent's shiro to its end, then counts what it did and
// runs the check in its sandbox.
func (pr *parallelRun) agent(ctx context.Context, a plannedAgent, args []string) agentResult {
	res := agentResult{Name: a.Name, Branch: a.Branch, Model: a.Model, Files: -1, Log: filepath.Join(pr.layout.State, a.Name+".log")}
	if pr.opts.Parallel.Check != "" {
		res.Check = &checkResult{Command: pr.opts.Parallel.Check}
	}
	log, err := os.OpenFile(res.Log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		res.Err = fmt.Sprintf("open its log: %v", err)
		return res
	}
	defer log.Close()
	started := time.Now()
	res.Started, res.Exit, err = pr.runChild(args, log)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	if !res.Started {
		return res
	}
	// What the agent did is counted even after an interrupt.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	pr.collect(cctx, &res, started)
	cancel()
	if res.Check != nil && ctx.Err() == nil && res.Err == "" {
		pr.check(ctx, &res, log)
	}
	return res
}

// runChild starts the agent's shiro (unless the run was stopped) and
// waits for it; its stdout and stderr go to log, its stdin is the task.
func (pr *parallelRun) runChild(args []string, log *os.File) (started bool, code int, err error) {
	c := exec.Command(pr.bin, args...)
	c.Dir = pr.checkout
	c.Stdin = strings.NewReader(pr.prompt)
	c.Stdout, c.Stderr = log, log
	c.SysProcAttr = childAttrs()
	// A parent-death signal is sent when the thread that started the
	// child ends: the thread stays this goroutine's until the child is
	// waited for.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pr.mu.Lock()
	if pr.stopped {
		pr.mu.Unlock()
		return false, 0, nil
	}
	if err := c.Start(); err != nil {
		pr.mu.Unlock()
		return false, 0, fmt.Errorf("start its shiro: %w", err)
	}
	pr.procs = append(pr.procs, c.Process)
	pr.mu.Unlock()
	err = c.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return true, 128 + int(ws.Signal()), nil
		}
		return true, ee.ExitCode(), nil
	}
	return true, -1, fmt.Errorf("wait for its shiro: %w", err)
}

// collect reads the agent's session record (turns, cost) and counts the
// files its branch and worktree changed from its base commit.
func (pr *parallelRun) collect(ctx context.Context, res *agentResult, started time.Time) {
	rec, err := pr.layout.Load(res.Name)
	if err != nil {
		res.Err = fmt.Sprintf("read its worktree record: %v", err)
		return
	}
	st := &store.Store{Dir: pr.paths.SessionsDir()}
	if sess, err := st.Latest(rec.Path); err == nil && !sess.UpdatedAt.Before(started.Add(-time.Second)) {
		full, err := st.Load(sess.ID)
		if err == nil {
			sess = full
		}
		for _, m := range sess.Messages {
			if m.Role == llm.RoleAssistant {
				res.Turns++
			}
		}
		res.Cost = sess.CostUSD
	}
	n, err := changedFiles(ctx, rec.Path, rec.Base)
	if err != nil {
		res.Err = fmt.Sprintf("count its changed files: %v", err)
		return
	}
	res.Files = n
}

// changedFiles counts the files of the worktree at path that differ from
// base: committed on its branch or not, and the untracked ones git does
// not ignore. Host git runs through worktree.Git (no hooks, no fsmonitor)
// and only lists names (no diff driver, no text conversion).
func changedFiles(ctx context.Context, path, base string) (int, error) {
	diff, err := worktree.Git(ctx, path, "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", base, "--")
	if err != nil {
		return 0, err
	}
	untracked, err := worktree.Git(ctx, path, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, out := range []string{diff, untracked} {
		for name := range strings.SplitSeq(out, "\x00") {
			if name != "" {
				n++
			}
		}
	}
	return n, nil
}

// check runs the --check command in the agent's sandbox (the sandbox of
// its worktree, with the same settings), its output appended to the log.
func (pr *parallelRun) check(ctx context.Context, res *agentResult, log *os.File) {
	rec, err := pr.layout.Load(res.Name)
	if err != nil {
		res.Check.Err = err.Error()
		return
	}
	// The agent is running again while its check runs: no other shiro
	// takes it meanwhile (and `shiro agents` says so).
	release, err := pr.layout.Hold(res.Name)
	if err != nil {
		res.Check.Err = err.Error()
		return
	}
	defer release()
	fmt.Fprintf(log, "\n[check] %s\n", res.Check.Command)
	exit, err := pr.runCheck(ctx, rec.Path, res.Check.Command, log)
	if err != nil {
		if ctx.Err() == nil {
			res.Check.Err = err.Error()
		}
		return
	}
	res.Check.Ran, res.Check.Exit = true, exit
	fmt.Fprintf(log, "[check] exit %d\n", exit)
}

// runCheck runs command through the bash tool in the sandbox of the
// workspace ws, and returns its exit code.
func (pr *parallelRun) runCheck(ctx context.Context, ws, command string, log io.Writer) (int, error) {
	w, err := workspace.Open(ws)
	if err != nil {
		return 0, err
	}
	defer w.Close()
	quiet := *pr.f
	quiet.Out, quiet.ErrOut = log, log
	cfg, paths, err := quiet.loadConfig(w, pr.opts.Sandbox, nil)
	if err != nil {
		return 0, err
	}
	sc := quiet.sandboxConfig(cfg, paths, ws, pr.opts.Sandbox)
	runner, err := orchestrator.NewToolRunner(sc, paths.DataDir, w, func(_ string, chunk []byte) {
		log.Write(chunk) //nolint:errcheck // the log is best effort
	})
	if err != nil {
		return 0, err
	}
	defer runner.Close()
	input, _ := json.Marshal(map[string]any{"command": command, "timeout": checkTimeout})
	out, err := runner.Run(ctx, tools.Find(tools.Builtins(), "bash"), input)
	if err != nil {
		return 0, err
	}
	if out.Exit == nil {
		return 0, fmt.Errorf("the command did not run: %s", out.Text)
	}
	if out.Exit.Interrupted {
		return 0, context.Canceled
	}
	return out.Exit.Code, nil
}
