package helper

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// warmPid waits for r's warm shell and returns its bash's pid.
func warmPid(t *testing.T, r *Runner) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.warm.mu.Lock()
		s := r.warm.shell
		r.warm.mu.Unlock()
		if s != nil {
			return s.p.pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no warm shell was started after a shell command")
	return 0
}

// warmRunner returns a Runner that ran one shell command, and the pid of
// the warm shell that command left.
func warmRunner(t *testing.T) (*Runner, int) {
	t.Helper()
	r := newTestRunner(t)
	if _, res := runShell(t, r, sandbox.Command{Shell: "true"}); res.ExitCode != 0 {
		t.Fatalf("first command: %+v", res)
	}
	return r, warmPid(t, r)
}

func runShell(t *testing.T, r *Runner, cmd sandbox.Command) (string, sandbox.Result) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout = &out
	res, err := r.Run(t.Context(), cmd)
	if err != nil {
		t.Fatalf("run %q: %v", cmd.Shell, err)
	}
	return out.String(), res
}

func TestWarmShellRunsTheNextShellCommand(t *testing.T) {
	t.Parallel()
	r, pid := warmRunner(t)
	for i := range 3 {
		if i > 0 {
			pid = warmPid(t, r)
		}
		out, res := runShell(t, r, sandbox.Command{
			Shell: `printf '%s|%s|%s|%s|' "$BASH_EXECUTION_STRING" "$$" "$X" "$PWD"; [ -e /proc/$$/fd/3 ] && printf open || printf closed; exit 7`,
			Env:   []string{"X=it's a $VALUE `x`"},
		})
		f := strings.Split(out, "|")
		if len(f) != 5 {
			t.Fatalf("command %d printed %q", i, out)
		}
		if f[0] != warmLoader || f[1] != strconv.Itoa(pid) {
			t.Errorf("command %d ran in %q (pid %s), want the warm shell %d", i, f[0], f[1], pid)
		}
		if f[2] != "it's a $VALUE `x`" {
			t.Errorf("command %d: X = %q", i, f[2])
		}
		if f[3] != r.dir {
			t.Errorf("command %d: PWD = %q, want %q", i, f[3], r.dir)
		}
		if f[4] != "closed" {
			t.Errorf("command %d: the script's descriptor 3 is %s, want it closed", i, f[4])
		}
		if res.ExitCode != 7 || res.Shell != "bash" {
			t.Errorf("command %d: %+v, want exit 7 from bash", i, res)
		}
	}
}

func TestWarmShellKeepsTheTimeoutAndTheKill(t *testing.T) {
	t.Parallel()
	r, _ := warmRunner(t)
	start := time.Now()
	_, res := runShell(t, r, sandbox.Command{Shell: "sleep 60 & sleep 60", Timeout: 300 * time.Millisecond})
	if !res.TimedOut {
		t.Errorf("a warm shell's command ran past its timeout: %+v after %v", res, time.Since(start))
	}

	warmPid(t, r)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err := r.Run(ctx, sandbox.Command{Shell: "sleep 60"})
	if !res.Interrupted || err == nil {
		t.Errorf("a cancelled warm shell's command: %+v, %v; want interrupted", res, err)
	}
}

func TestWarmShellGoneFallsBackToItsOwnBash(t *testing.T) {
	t.Parallel()
	r, pid := warmRunner(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for alive(pid) {
		time.Sleep(time.Millisecond)
	}
	out, res := runShell(t, r, sandbox.Command{Shell: `printf %s "$BASH_EXECUTION_STRING"`})
	if res.ExitCode != 0 || out != `printf %s "$BASH_EXECUTION_STRING"` {
		t.Errorf("after its warm shell was killed a command printed %q (%+v), want it run by its own bash", out, res)
	}
}

func TestWarmShellTakesNoLargeScriptOrStdin(t *testing.T) {
	t.Parallel()
	r, pid := warmRunner(t)
	big := "x=" + strings.Repeat("a", warmScriptMax) + `; printf '%s %s' "${#x}" "$$"`
	out, res := runShell(t, r, sandbox.Command{Shell: big})
	if res.ExitCode != 0 || !strings.HasPrefix(out, strconv.Itoa(warmScriptMax)+" ") {
		t.Fatalf("a large script printed %q (%+v)", out, res)
	}
	if strings.HasSuffix(out, " "+strconv.Itoa(pid)) {
		t.Errorf("a script over %d bytes ran in the warm shell", warmScriptMax)
	}
	var out2 bytes.Buffer
	res, err := r.Run(t.Context(), sandbox.Command{Shell: `cat; printf %s "$$"`, Stdin: strings.NewReader("in "), Stdout: &out2})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(out2.String(), "in ") || strings.HasSuffix(out2.String(), " "+strconv.Itoa(pid)) {
		t.Errorf("a command with stdin printed %q (%+v, %v), want its input, from its own bash", out2.String(), res, err)
	}
}

func TestKillSessionEndsTheWarmShell(t *testing.T) {
	t.Parallel()
	r, pid := warmRunner(t)
	if err := r.KillSession(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("the warm shell %d outlived KillSession", pid)
	}
	// The session goes on: the next shell command runs, and warms another.
	if _, res := runShell(t, r, sandbox.Command{Shell: "true"}); res.ExitCode != 0 {
		t.Fatalf("after KillSession: %+v", res)
	}
	if next := warmPid(t, r); next == pid {
		t.Errorf("the same warm shell after KillSession")
	}
}

func TestWarmScript(t *testing.T) {
	t.Parallel()
	got, ok := warmScript(sandbox.Command{Shell: "echo hi", Env: []string{"A=x'y", sandbox.MarkerEnv + "=forged"}})
	if want := `exec 3<&-; export A='x'\''y'; echo hi`; !ok || got != want {
		t.Errorf("warmScript = %q, %v; want %q", got, ok, want)
	}
	for _, env := range []string{"1A=x", "A-B=x", "=x", "A.B=y"} {
		if _, ok := warmScript(sandbox.Command{Shell: "true", Env: []string{env}}); ok {
			t.Errorf("warmScript took the variable %q, which bash cannot export", env)
		}
	}
	if _, ok := warmScript(sandbox.Command{Shell: "echo a\x00b"}); ok {
		t.Errorf("warmScript took a script with a NUL byte")
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err == nil {
		// A zombie is not alive: its reaper has not reaped it yet.
		b, rerr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return rerr == nil && !bytes.Contains(b, []byte(") Z "))
	}
	return !errors.Is(err, syscall.ESRCH)
}
