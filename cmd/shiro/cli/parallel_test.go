package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/shiroagent/shiro/sandbox"
)

func TestPlanParallel(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 3, 4, 5, 0, time.Local)
	for _, tc := range []struct {
		name   string
		n      int
		base   string
		models []string
		want   []plannedAgent
		err    string
	}{
		{name: "names come from --worktree", n: 3, base: "fix",
			want: []plannedAgent{{"fix-1", "shiro/fix-1", ""}, {"fix-2", "shiro/fix-2", ""}, {"fix-3", "shiro/fix-3", ""}}},
		{name: "without --worktree the name is the date and time", n: 2,
			want: []plannedAgent{{"parallel-20261207-030405-1", "shiro/parallel-20261207-030405-1", ""}, {"parallel-20261207-030405-2", "shiro/parallel-20261207-030405-2", ""}}},
		{name: "the models are used in turn", n: 3, base: "m", models: []string{"a", "b"},
			want: []plannedAgent{{"m-1", "shiro/m-1", "a"}, {"m-2", "shiro/m-2", "b"}, {"m-3", "shiro/m-3", "a"}}},
		{name: "one model for every agent", n: 2, base: "m", models: []string{"a"},
			want: []plannedAgent{{"m-1", "shiro/m-1", "a"}, {"m-2", "shiro/m-2", "a"}}},
		{name: "one agent is refused", n: 1, err: "at least 2 agents"},
		{name: "zero is refused", n: 0, err: "at least 2 agents"},
		{name: "more than the cap is refused", n: maxParallel + 1, err: "at most 16 agents"},
		{name: "more models than agents are refused", n: 2, models: []string{"a", "b", "c"}, err: "--model is given 3 times for 2 agents"},
		{name: "a name git cannot take is refused", n: 2, base: "bad/name", err: "cannot name a worktree agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := planParallel(tc.n, tc.base, tc.models, now)
			if tc.err != "" {
				var ue *usageError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ue) {
					t.Fatalf("err %v, want a usage error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestCheckParallelArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts RunOptions
		err  string
	}{
		{name: "headless is fine", opts: RunOptions{Print: true, Parallel: ParallelOptions{N: 2, Check: "make test"}}},
		{name: "the chat UI does not take it", opts: RunOptions{Parallel: ParallelOptions{N: 2}}, err: "--parallel needs -p"},
		{name: "--check alone", opts: RunOptions{Print: true, Parallel: ParallelOptions{Check: "make test"}}, err: "--check needs --parallel"},
		{name: "-c", opts: RunOptions{Print: true, Continue: true, Parallel: ParallelOptions{N: 2}}, err: "does not go with -c or -r"},
		{name: "-r", opts: RunOptions{Print: true, Resume: "abc", Parallel: ParallelOptions{N: 2}}, err: "does not go with -c or -r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkParallelArgs(&tc.opts)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ue *usageError
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ue) {
				t.Fatalf("err %v, want a usage error with %q", err, tc.err)
			}
		})
	}
}

func TestCheckCapacity(t *testing.T) {
	t.Parallel()
	const gib = 1 << 30
	for _, tc := range []struct {
		name          string
		n             int
		limit, engine int64
		err           string
	}{
		{name: "fits", n: 3, limit: 4 * gib, engine: 24 * gib},
		{name: "fills it exactly", n: 6, limit: 4 * gib, engine: 24 * gib},
		{name: "one too many", n: 7, limit: 4 * gib, engine: 24 * gib,
			err: "--parallel 7 needs 7 × 4.0 GiB of sandbox memory (28.0 GiB) and the Docker engine has 24.0 GiB: run at most 6 agents at this limit, or lower it with --memory"},
		{name: "not even two", n: 2, limit: 16 * gib, engine: 24 * gib, err: "lower the limit with --memory"},
		{name: "an engine that does not tell", n: 16, limit: 4 * gib, engine: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := checkCapacity(tc.n, tc.limit, tc.engine)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
		})
	}
}

func TestPrintSummary(t *testing.T) {
	t.Parallel()
	cost := 0.0123
	results := []agentResult{
		{Name: "fix-1", Branch: "shiro/fix-1", Model: "a", Started: true, Turns: 2, Cost: &cost, Files: 1, Check: &checkResult{Command: "make test", Ran: true}},
		{Name: "fix-2", Branch: "shiro/fix-2", Log: "/logs/fix-2.log", Started: true, Exit: 1, Turns: 1, Files: 0, Check: &checkResult{Command: "make test", Ran: true, Exit: 2}},
		{Name: "fix-3", Branch: "shiro/fix-3", Log: "/logs/fix-3.log", Started: true, Exit: 130, Files: -1, Check: &checkResult{Command: "make test"}},
		{Name: "fix-4", Branch: "shiro/fix-4", Files: -1, Err: "start its shiro: no such file", Check: &checkResult{Command: "make test"}},
	}
	var out bytes.Buffer
	if err := printSummary(&out, results, false); err != nil {
		t.Fatal(err)
	}
	want := `AGENT  BRANCH       MODEL  TURNS  COST     FILES  EXIT         CHECK
fix-1  shiro/fix-1  a      2      $0.0123  1      0            ok
fix-2  shiro/fix-2  -      1      -        0      1            exit 2
fix-3  shiro/fix-3  -      0      -        -      130          not run
fix-4  shiro/fix-4  -      0      -        -      not started  not run
fix-2: its output is in /logs/fix-2.log
fix-3: its output is in /logs/fix-3.log
fix-4: start its shiro: no such file
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	if err := printSummary(&out, results[:1], true); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Agents []map[string]any `json:"agents"`
		OK     bool             `json:"ok"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("not one JSON object: %v\n%s", err, out.String())
	}
	a := got.Agents[0]
	if !got.OK || a["agent"] != "fix-1" || a["branch"] != "shiro/fix-1" || a["turns"] != 2.0 || a["costUsd"] != cost || a["filesChanged"] != 1.0 || a["exitCode"] != 0.0 {
		t.Errorf("JSON summary: %s", out.String())
	}
	if c, _ := a["check"].(map[string]any); c["command"] != "make test" || c["ran"] != true || c["exitCode"] != 0.0 {
		t.Errorf("JSON check: %v", a["check"])
	}
}

func TestSummaryIsOKOnlyWhenEveryAgentAndCheckIs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    agentResult
		ok   bool
	}{
		{"ended well, no check", agentResult{Started: true}, true},
		{"ended well, check passed", agentResult{Started: true, Check: &checkResult{Ran: true}}, true},
		{"check failed", agentResult{Started: true, Check: &checkResult{Ran: true, Exit: 1}}, false},
		{"check did not run", agentResult{Started: true, Check: &checkResult{}}, false},
		{"agent failed", agentResult{Started: true, Exit: 1}, false},
		{"agent never started", agentResult{}, false},
		{"its record could not be read", agentResult{Started: true, Err: "x"}, false},
	} {
		if got := tc.r.ok(); got != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.name, got, tc.ok)
		}
	}
}

func TestChildArgsPassTheUsersOtherFlags(t *testing.T) {
	t.Parallel()
	fl := pflag.NewFlagSet("shiro", pflag.ContinueOnError)
	var p ParallelOptions
	bindParallel(fl, &p)
	var print, yolo, asJSON bool
	var models, env []string
	var worktreeName, memory string
	fl.BoolVarP(&print, "print", "p", false, "")
	fl.BoolVar(&yolo, "yolo", false, "")
	fl.BoolVar(&asJSON, "json", false, "")
	fl.StringArrayVar(&models, "model", nil, "")
	fl.StringArrayVar(&env, "env", nil, "")
	fl.StringVar(&worktreeName, "worktree", "", "")
	fl.StringVar(&memory, "memory", "", "")
	if err := fl.Parse([]string{"-p", "--parallel", "2", "--check", "make test", "--yolo", "--json", "--model", "a", "--model", "b",
		"--env", "A=1", "--env", "B=x y", "--worktree", "fix", "--memory", "2g"}); err != nil {
		t.Fatal(err)
	}
	got := childArgs(fl, plannedAgent{Name: "fix-2", Branch: "shiro/fix-2", Model: "b"})
	want := []string{"-p", "--worktree", "fix-2", "--model", "b", "--env=A=1", "--env=B=x y", "--memory=2g", "--yolo=true"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// memoryBackend is a backend whose engine has 10 GiB; only Name and
// Manage are called.
type memoryBackend struct{ sandbox.Backend }

type memoryManager struct{ sandbox.Manager }

func (memoryBackend) Name() string { return "memory-engine" }
func (memoryBackend) Manage(context.Context, sandbox.Settings) (sandbox.Manager, error) {
	return memoryManager{}, nil
}
func (memoryManager) EngineMemory(context.Context) (int64, error) { return 10 << 30, nil }
func (memoryManager) Close() error                                { return nil }

// silentBackend's manager cannot tell its engine's memory.
type silentBackend struct{ sandbox.Backend }

type silentManager struct{ sandbox.Manager }

func (silentBackend) Name() string { return "silent-engine" }
func (silentBackend) Manage(context.Context, sandbox.Settings) (sandbox.Manager, error) {
	return silentManager{}, nil
}
func (silentManager) Close() error { return nil }

var registerEngines sync.Once

func TestCapacityAsksTheChosenEngine(t *testing.T) {
	registerEngines.Do(func() {
		sandbox.Register(memoryBackend{})
		sandbox.Register(silentBackend{})
	})
	ctx := t.Context()
	if err := capacity(ctx, 2, sandbox.Settings{Backend: "memory-engine"}); err != nil {
		t.Errorf("2 × the default 4 GiB in 10 GiB: %v", err)
	}
	if err := capacity(ctx, 3, sandbox.Settings{Backend: "memory-engine"}); err == nil || !strings.Contains(err.Error(), "run at most 2 agents") {
		t.Errorf("3 × 4 GiB in 10 GiB: %v", err)
	}
	if err := capacity(ctx, 5, sandbox.Settings{Backend: "memory-engine", Memory: 2 << 30}); err != nil {
		t.Errorf("5 × 2 GiB in 10 GiB: %v", err)
	}
	if err := capacity(ctx, 16, sandbox.Settings{Backend: "silent-engine"}); err != nil {
		t.Errorf("an engine that cannot tell is not checked: %v", err)
	}
	if err := capacity(ctx, 16, sandbox.Settings{Backend: "memory-engine", NoSandbox: true}); err != nil {
		t.Errorf("--no-sandbox is not checked: %v", err)
	}
}

func TestRootRefusesParallelFlagsOutOfPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--parallel", "3", "task"}, "--parallel needs -p"},
		{[]string{"-p", "--check", "make test", "task"}, "--check needs --parallel"},
		{[]string{"-p", "--model", "a", "--model", "b", "task"}, "--model is given 2 times: only --parallel takes more than one"},
		{[]string{"-p", "--parallel", "2", "--model", "a", "--model", "b", "--model", "c", "task"}, "--model is given 3 times for 2 agents"},
	} {
		var out bytes.Buffer
		f := &Factory{In: strings.NewReader(""), Out: &out, ErrOut: &out, Version: "test",
			Getwd:     func() (string, error) { return t.TempDir(), nil },
			LookupEnv: func(string) (string, bool) { return "", false }}
		cmd := NewCmdRoot(f)
		cmd.SetArgs(tc.args)
		err := cmd.ExecuteContext(t.Context())
		var ue *usageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}
