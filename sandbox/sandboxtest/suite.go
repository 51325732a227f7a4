package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// Bounds of the behaviour checks: generous, these are not benchmarks
// (make bench measures the latencies); they tell "returns" from "hangs on a
// process that sleeps for minutes".
const (
	promptly  = 10 * time.Second // a killed or finished command returns within
	settle    = 10 * time.Second // processes appear or vanish within
	startWait = 20 * time.Second
)

// Option changes what the suite assumes of a sandbox.
type Option func(*options)

type options struct{ notShared bool }

// WorkspaceNotShared is for sandboxes whose workspace is not the host's
// directory (a Kubernetes pod's claim): the suite reads what commands
// wrote there through the sandbox instead of on the host.
func WorkspaceNotShared() Option { return func(o *options) { o.notShared = true } }

// Run runs the conformance suite against sandboxes made by newSandbox, which
// returns a fresh sandbox for one subtest and registers its Close with
// t.Cleanup. Close must be safe to call twice; Info().Workspace must be a
// directory the sandbox's commands can write. Subtests run in parallel.
func Run(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox, opts ...Option) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox)
	}{
		{"stdout and stderr are kept apart", testStreams},
		{"exit codes and signals", testExitCodes},
		{"argv runs without a shell", testArgv},
		{"missing binary is exec.ErrNotFound", testNotFound},
		{"dir", testDir},
		{"env adds to the base environment", testEnv},
		{"marker is set and unique per command", testMarker},
		{"timeout kills the tree", testTimeout},
		{"cancel kills the tree and escaped children", testCancel},
		{"cancelled context runs nothing", testCancelledBefore},
		{"background child holding the pipes does not block", testPipeHolder},
		{"stdin is piped", testStdin},
		{"concurrent runs", testConcurrent},
		{"close kills background processes", testClose},
		{"cancel kills processes that left the group, session and environment", func(t *testing.T, ns func(t *testing.T) sandbox.Sandbox) {
			testEscapesCancel(t, ns, o)
		}},
		{"close kills processes that left the group, session and environment", func(t *testing.T, ns func(t *testing.T) sandbox.Sandbox) {
			testEscapesClose(t, ns, o)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newSandbox)
		})
	}
}

// output runs cmd in sb and returns its stdout and stderr.
func output(t *testing.T, sb sandbox.Sandbox, cmd sandbox.Command) (stdout, stderr string, res sandbox.Result, err error) {
	t.Helper()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	res, err = sb.Run(t.Context(), cmd)
	return out.String(), errb.String(), res, err
}

// mustOutput is output that fails the test on an error or a non-zero exit.
func mustOutput(t *testing.T, sb sandbox.Sandbox, cmd sandbox.Command) string {
	t.Helper()
	out, errb, res, err := output(t, sb, cmd)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run %q%q: exit %d, %v; stderr %q", cmd.Shell, cmd.Args, res.ExitCode, err, errb)
	}
	return out
}

func testStreams(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	out, errb, res, err := output(t, sb, sandbox.Command{Shell: "echo out; echo err >&2; echo out2"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out != "out\nout2\n" || errb != "err\n" {
		t.Errorf("stdout %q, stderr %q; want %q, %q", out, errb, "out\nout2\n", "err\n")
	}
	if res.Shell != "bash" && res.Shell != "sh" {
		t.Errorf("Result.Shell = %q, want bash or sh", res.Shell)
	}
	if res.ExitCode != 0 || res.Signal != "" || res.TimedOut || res.Interrupted {
		t.Errorf("Result = %+v, want a plain success", res)
	}
	if res.Duration <= 0 {
		t.Errorf("Result.Duration = %v, want > 0", res.Duration)
	}
}

func testExitCodes(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	tests := []struct {
		name, shell string
		code        int
		signal      string
	}{
		{"success", "true", 0, ""},
		{"exit 3", "exit 3", 3, ""},
		{"SIGTERM is 143", "kill -TERM $$", 143, "SIGTERM"},
		{"SIGKILL is 137", "kill -KILL $$", 137, "SIGKILL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, res, err := output(t, sb, sandbox.Command{Shell: tt.shell})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != tt.code || res.Signal != tt.signal {
				t.Errorf("exit %d signal %q, want %d %q", res.ExitCode, res.Signal, tt.code, tt.signal)
			}
		})
	}
}

func testArgv(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	out, _, res, err := output(t, sb, sandbox.Command{Args: []string{"printf", "%s|%s", "a  b", "$HOME;`x`"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: exit %d, %v", res.ExitCode, err)
	}
	if want := "a  b|$HOME;`x`"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if res.Shell != "" {
		t.Errorf("Result.Shell = %q for argv, want empty", res.Shell)
	}
}

func testNotFound(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	for _, name := range []string{"shiro-no-such-binary", "/nonexistent/shiro-no-such-binary"} {
		_, _, _, err := output(t, sb, sandbox.Command{Args: []string{name}})
		if !errors.Is(err, exec.ErrNotFound) {
			t.Errorf("Run %s: error %v, want exec.ErrNotFound", name, err)
		}
	}
}

func testDir(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	ws := sb.Info().Workspace
	sub := "suite-dir-" + token()
	mustOutput(t, sb, sandbox.Command{Args: []string{"mkdir", "-p", sub}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
		defer cancel()
		_, _ = sb.Run(ctx, sandbox.Command{Args: []string{"rmdir", filepath.Join(ws, sub)}})
	})
	tests := []struct {
		name, dir, want string
	}{
		{"empty is the workspace", "", ws},
		{"relative is under the workspace", sub, filepath.Join(ws, sub)},
		{"absolute", filepath.Join(ws, sub), filepath.Join(ws, sub)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, cmd := range []sandbox.Command{{Shell: "pwd", Dir: tt.dir}, {Args: []string{"pwd"}, Dir: tt.dir}} {
				if got := strings.TrimSpace(mustOutput(t, sb, cmd)); got != tt.want {
					t.Errorf("pwd (shell %q) in %q = %q, want %q", cmd.Shell, tt.dir, got, tt.want)
				}
			}
		})
	}
	t.Run("missing fails with fs.ErrNotExist", func(t *testing.T) {
		_, _, _, err := output(t, sb, sandbox.Command{Shell: "true", Dir: sub + "-missing"})
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Run: error %v, want fs.ErrNotExist", err)
		}
	})
}

func testEnv(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"added", []string{"SHIRO_SUITE_A=a b  c"}, "a b  c|"},
		{"later entries win", []string{"SHIRO_SUITE_A=1", "SHIRO_SUITE_A=2", "SHIRO_SUITE_B=b"}, "2|b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mustOutput(t, sb, sandbox.Command{Shell: `printf '%s|%s' "$SHIRO_SUITE_A" "$SHIRO_SUITE_B"`, Env: tt.env})
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if got := mustOutput(t, sb, sandbox.Command{Args: []string{"sh", "-c", `printf %s "$PATH"`}}); got == "" {
		t.Error("PATH is empty: the base environment is missing")
	}
}

func testMarker(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	read := `printf %s "$` + sandbox.MarkerEnv + `"`
	a := mustOutput(t, sb, sandbox.Command{Shell: read})
	b := mustOutput(t, sb, sandbox.Command{Args: []string{"sh", "-c", read}})
	c := mustOutput(t, sb, sandbox.Command{Shell: read, Env: []string{sandbox.MarkerEnv + "=forged"}})
	if a == "" || a == b || c == "forged" || c == a || c == b {
		t.Errorf("markers %q, %q, %q (the last with a forged one in Env): want three distinct, none empty or forged", a, b, c)
	}
}

func testTimeout(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	tok := token()
	shell := fmt.Sprintf("sleep %s & (setsid sleep %s &); sleep %s",
		sleepArg(310, tok), sleepArg(311, tok), sleepArg(312, tok))
	start := time.Now()
	_, _, res, err := output(t, sb, sandbox.Command{Shell: shell, Timeout: time.Second})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > time.Second+promptly {
		t.Errorf("Run took %v with a 1s timeout", took)
	}
	if !res.TimedOut || res.Signal != "SIGKILL" || res.ExitCode != 137 || res.Interrupted {
		t.Errorf("Result = %+v, want TimedOut, SIGKILL, 137", res)
	}
	assertGone(t, sb, "."+tok)
}

func testCancel(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	tok := token()
	shell := fmt.Sprintf("sleep %s & (setsid sleep %s &); nohup sleep %s >/dev/null 2>&1 & echo started; sleep %s",
		sleepArg(300, tok), sleepArg(301, tok), sleepArg(302, tok), sleepArg(303, tok))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := NewBuffer("started")
	type ran struct {
		res sandbox.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := sb.Run(ctx, sandbox.Command{Shell: shell, Stdout: out})
		done <- ran{res, err}
	}()
	select {
	case <-out.Seen():
	case r := <-done:
		t.Fatalf("Run ended before cancel: %+v, %v, stdout %q", r.res, r.err, out.String())
	case <-time.After(startWait):
		t.Fatalf("no %q on stdout within %v", "started", startWait)
	}
	procs, ok := WaitProcesses(t, sb, "."+tok, settle, func(p []Proc) bool { return countSleeps(p) == 4 })
	if !ok {
		t.Errorf("want the 4 sleeps running before cancel, found %q", procs)
	}

	cancel()
	start := time.Now()
	var r ran
	select {
	case r = <-done:
	case <-time.After(startWait):
		t.Fatalf("Run did not return within %v of cancel", startWait)
	}
	if took := time.Since(start); took > promptly {
		t.Errorf("Run returned %v after cancel, want under %v", took, promptly)
	}
	if !errors.Is(r.err, context.Canceled) || !r.res.Interrupted {
		t.Errorf("Run = %+v, %v; want Interrupted and context.Canceled", r.res, r.err)
	}
	if !strings.Contains(out.String(), "started") {
		t.Errorf("stdout %q lost the output before cancel", out.String())
	}
	assertGone(t, sb, "."+tok)
}

func testCancelledBefore(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out strings.Builder
	_, err := sb.Run(ctx, sandbox.Command{Shell: "echo ran", Stdout: &out})
	if !errors.Is(err, context.Canceled) || out.Len() > 0 {
		t.Errorf("Run with a cancelled context: %v, stdout %q; want context.Canceled and nothing run", err, out.String())
	}
}

func testPipeHolder(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	tok := token()
	out := NewBuffer("done")
	res, err := sb.Run(t.Context(), sandbox.Command{Shell: fmt.Sprintf("(sleep %s &); echo done", sleepArg(330, tok)), Stdout: out})
	returned := time.Now()
	select {
	case <-out.Seen():
		if took := returned.Sub(out.SeenAt()); took > promptly {
			t.Errorf("Run returned %v after the shell's last output, want under %v", took, promptly)
		}
	default:
	}
	if err != nil || res.ExitCode != 0 || out.String() != "done\n" {
		t.Errorf("Run = %q, %+v, %v; want %q, exit 0", out.String(), res, err, "done\n")
	}
}

func testStdin(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	tests := []struct {
		name  string
		cmd   sandbox.Command
		stdin string
		want  string
	}{
		{"argv cat", sandbox.Command{Args: []string{"cat"}}, "hello\nworld\n", "hello\nworld\n"},
		{"shell reads lines", sandbox.Command{Shell: "while read -r l; do echo \"<$l>\"; done"}, "a\nb\n", "<a>\n<b>\n"},
		{"1 MiB", sandbox.Command{Args: []string{"wc", "-c"}}, big, strconv.Itoa(len(big))},
		{"empty stdin is EOF", sandbox.Command{Args: []string{"wc", "-c"}}, "", "0"},
		{"ignored stdin does not block", sandbox.Command{Shell: "echo ignored"}, big, "ignored"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := tt.cmd
			cmd.Stdin = strings.NewReader(tt.stdin)
			got := mustOutput(t, sb, cmd)
			if strings.TrimSpace(got) != strings.TrimSpace(tt.want) {
				t.Errorf("stdout %.80q, want %.80q", got, tt.want)
			}
		})
	}
}

func testConcurrent(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	const n = 16
	outs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var out strings.Builder
			res, err := sb.Run(t.Context(), sandbox.Command{
				Shell:  `printf %s "$N"; echo "$N" >&2; exit $((N % 7))`,
				Env:    []string{"N=" + strconv.Itoa(i)},
				Stdout: &out,
			})
			if err == nil && res.ExitCode != i%7 {
				err = fmt.Errorf("exit %d, want %d", res.ExitCode, i%7)
			}
			outs[i], errs[i] = out.String(), err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || outs[i] != strconv.Itoa(i) {
			t.Errorf("run %d: %q, %v", i, outs[i], errs[i])
		}
	}
}

func testClose(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox) {
	sb := newSandbox(t)
	checker := newSandbox(t)
	tok := token()
	mustOutput(t, sb, sandbox.Command{Shell: fmt.Sprintf(
		"sleep %s >/dev/null 2>&1 & (setsid sleep %s >/dev/null 2>&1 &)", sleepArg(340, tok), sleepArg(341, tok))})
	if procs, ok := WaitProcesses(t, checker, "."+tok, settle, func(p []Proc) bool { return countSleeps(p) == 2 }); !ok {
		t.Fatalf("want 2 background sleeps after the command, found %q", procs)
	}
	if err := sb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertGone(t, checker, "."+tok)
	if _, err := sb.Run(t.Context(), sandbox.Command{Shell: "true"}); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Run after Close: %v, want sandbox.ErrClosed", err)
	}
}

// assertGone fails unless no process matching pattern is left.
func assertGone(t *testing.T, sb sandbox.Sandbox, pattern string) {
	t.Helper()
	if procs, ok := WaitProcesses(t, sb, pattern, settle, func(p []Proc) bool { return len(p) == 0 }); !ok {
		t.Errorf("processes left: %q", procs)
	}
}

// countSleeps counts the sleep processes in a Processes list.
func countSleeps(procs []Proc) int {
	n := 0
	for _, p := range procs {
		if strings.HasPrefix(p.Cmdline, "sleep ") {
			n++
		}
	}
	return n
}

// An escape is a way for a command's process to leave what a kill used to
// find it by: its process group, its session, its marker (environment) or
// its parent. Each starts a loop that appends to its own file.
type escape struct {
	name  string
	start string // a shell line; %s is the quoted loop
	// check reports what the loop's process should show, given the
	// sandbox's shell, or "" when it does.
	check func(p Proc, shell string) string
}

var escapes = []escape{
	{"setsid env -u", "setsid env -u " + sandbox.MarkerEnv + " sh -c %s >/dev/null 2>&1 &", func(p Proc, _ string) string {
		return firstFailure(p.Sid != p.Pid, "not a session leader", p.Marked, "marker still set")
	}},
	{"double-forked nohup", "(nohup sh -c %s >/dev/null 2>&1 &)", nil},
	{"setsid -f", "setsid -f sh -c %s >/dev/null 2>&1", func(p Proc, _ string) string {
		return firstFailure(p.Sid != p.Pid, "not a session leader")
	}},
	{"own process group", "(set -m; sh -c %s >/dev/null 2>&1 &) 2>/dev/null", func(p Proc, shell string) string {
		// sh (dash) ignores set -m without a terminal; bash does not.
		return firstFailure(shell == "bash" && p.Pgid != p.Pid, "not a group leader")
	}},
	{"env -i", "env -i /bin/sh -c %s >/dev/null 2>&1 &", func(p Proc, _ string) string {
		return firstFailure(p.Marked, "marker still set")
	}},
}

func firstFailure(pairs ...any) string {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i].(bool) {
			return pairs[i+1].(string)
		}
	}
	return ""
}

// Escapes is a set of loops, one per way a process can leave what a kill
// used to find it by (escape names them), each appending to its own file.
type Escapes struct {
	// Token is in every command line of the loops (and their sleeps).
	Token string
	// Files are the loops' files, one per escape, in the workspace.
	Files []string
	// Via, when set, is the sandbox Sizes reads the files through (for a
	// workspace that is not the host's); otherwise they are read on the
	// host.
	Via sandbox.Sandbox
}

// NewEscapes returns a set of loops that write in ws.
func NewEscapes(ws string) *Escapes {
	r := &Escapes{Token: token()}
	for i := range escapes {
		r.Files = append(r.Files, filepath.Join(ws, fmt.Sprintf("escape-%s-%d", r.Token, i)))
	}
	return r
}

// Script is a shell script that starts every loop, then runs then.
func (r *Escapes) Script(then string) string {
	var b strings.Builder
	for i, e := range escapes {
		loop := fmt.Sprintf("while sleep 0.2%s; do date >> %s; done", r.Token, shellQuote(r.Files[i]))
		fmt.Fprintf(&b, e.start+"\n", shellQuote(loop))
	}
	b.WriteString(then)
	return b.String()
}

// IsLoop says whether cmdline is one of the loops (not a sleep of one, nor
// a process that is still to exec one).
func (r *Escapes) IsLoop(cmdline string) bool {
	return (strings.HasPrefix(cmdline, "sh -c while") || strings.HasPrefix(cmdline, "/bin/sh -c while")) &&
		strings.Contains(cmdline, "escape-"+r.Token+"-")
}

// loops finds each loop in procs (a zero Proc where it is missing). A loop
// forks for each sleep and date, and the child has the loop's command line
// until it execs, in the loop's session and group: the loop is the match
// whose parent is not one.
func (r *Escapes) loops(procs []Proc) []Proc {
	found := make([]Proc, len(escapes))
	for i, f := range r.Files {
		var matches []Proc
		for _, p := range procs {
			if r.IsLoop(p.Cmdline) && strings.Contains(p.Cmdline, filepath.Base(f)+"'") {
				matches = append(matches, p)
			}
		}
		for _, p := range matches {
			if !slices.ContainsFunc(matches, func(q Proc) bool { return q.Pid == p.Ppid }) {
				found[i] = p
			}
		}
	}
	return found
}

// Sizes returns the size of each file (0 when missing; -1 each when Via
// cannot read them).
func (r *Escapes) Sizes() []int64 {
	out := make([]int64, len(r.Files))
	if r.Via != nil {
		r.sizesVia(out)
		return out
	}
	for i, f := range r.Files {
		if fi, err := os.Stat(f); err == nil {
			out[i] = fi.Size()
		}
	}
	return out
}

// sizesVia reads the sizes with a command in r.Via.
func (r *Escapes) sizesVia(out []int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	res, err := r.Via.Run(ctx, sandbox.Command{
		Args:   append([]string{"sh", "-c", `for f; do if [ -f "$f" ]; then wc -c <"$f"; else echo 0; fi; done`, "sh"}, r.Files...),
		Stdout: &b,
	})
	fields := strings.Fields(b.String())
	for i := range out {
		out[i] = -1
		if err == nil && res.ExitCode == 0 && len(fields) == len(out) {
			out[i], _ = strconv.ParseInt(fields[i], 10, 64)
		}
	}
}

// AssertStill fails t for each file whose size differs from before, taken
// with Sizes a while earlier.
func (r *Escapes) AssertStill(t testing.TB, before []int64) {
	t.Helper()
	for i, n := range r.Sizes() {
		if n < 0 || before[i] < 0 {
			t.Errorf("escape %q: its file could not be read through the sandbox", escapes[i].name)
			continue
		}
		if n != before[i] {
			t.Errorf("escape %q: its file still grows (%d -> %d bytes)", escapes[i].name, before[i], n)
		}
	}
}

// Remove removes the files.
func (r *Escapes) Remove() {
	if r.Via != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = r.Via.Run(ctx, sandbox.Command{Args: append([]string{"rm", "-f"}, r.Files...)})
		return
	}
	for _, f := range r.Files {
		_ = os.Remove(f)
	}
}

// waitEscapes waits until every loop of r runs (seen by checker) and has
// written its file, and checks that each really escaped.
func waitEscapes(t *testing.T, r *Escapes, checker sandbox.Sandbox, shell string) {
	t.Helper()
	procs, ok := WaitProcesses(t, checker, r.Token, startWait, func(procs []Proc) bool {
		sizes := r.Sizes()
		for i, p := range r.loops(procs) {
			if p.Pid == 0 || sizes[i] <= 0 {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("the escaped loops did not all run and write within %v; processes: %q", startWait, procs)
	}
	for i, p := range r.loops(procs) {
		if e := escapes[i]; e.check != nil {
			if msg := e.check(p, shell); msg != "" {
				t.Errorf("escape %q did not escape: %s (pid %d, pgid %d, sid %d, marked %v)", e.name, msg, p.Pid, p.Pgid, p.Sid, p.Marked)
			}
		}
	}
}

// assertEscapesStopped checks that no process of r is left (seen by
// checker, another session) and that no file grows any more (seen on the
// host, where the workspace is at the same path, or through r.Via).
func assertEscapesStopped(t *testing.T, r *Escapes, checker sandbox.Sandbox) {
	t.Helper()
	assertGone(t, checker, r.Token)
	sizes := r.Sizes()
	// The loops wrote every 0.2s: five periods without a write show none
	// is left anywhere, also where checker cannot see.
	time.Sleep(time.Second)
	r.AssertStill(t, sizes)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// sandboxShell returns the shell sb runs Command.Shell with.
func sandboxShell(t *testing.T, sb sandbox.Sandbox) string {
	t.Helper()
	_, _, res, err := output(t, sb, sandbox.Command{Shell: "true"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res.Shell
}

func testEscapesCancel(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox, o options) {
	sb := newSandbox(t)
	checker := newSandbox(t)
	shell := sandboxShell(t, sb)
	r := NewEscapes(sb.Info().Workspace)
	if o.notShared {
		r.Via = checker
	}
	t.Cleanup(r.Remove)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := sb.Run(ctx, sandbox.Command{Shell: r.Script("sleep 304." + r.Token)})
		done <- err
	}()
	waitEscapes(t, r, checker, shell)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(startWait):
		t.Fatalf("Run did not return within %v of cancel", startWait)
	}
	assertEscapesStopped(t, r, checker)
}

func testEscapesClose(t *testing.T, newSandbox func(t *testing.T) sandbox.Sandbox, o options) {
	sb := newSandbox(t)
	checker := newSandbox(t)
	shell := sandboxShell(t, sb)
	r := NewEscapes(sb.Info().Workspace)
	if o.notShared {
		r.Via = checker
	}
	t.Cleanup(r.Remove)
	mustOutput(t, sb, sandbox.Command{Shell: r.Script("echo started")})
	waitEscapes(t, r, checker, shell)
	if err := sb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertEscapesStopped(t, r, checker)
}
