package helper

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

// serveTestChild runs an owned Serve (as `helper serve` does) on stdin and
// stdout, with this binary as its reaper.
func serveTestChild(session string) int {
	err := Serve(context.Background(), os.Stdin, os.Stdout, ServeOptions{
		SessionID: session, Dir: os.TempDir(), Reaper: SelfReaper(), OwnProcess: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// startOwnedServe starts serveTestChild and returns a Client on it.
func startOwnedServe(t *testing.T, session string) (*Client, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "serve", "--session", session)
	cmd.Env = sandboxtest.HostEnv(t)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := NewClient(stdout, stdin)
	t.Cleanup(func() {
		_ = c.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return c, cmd
}

// pidsWith lists the processes whose command line holds s.
func pidsWith(s string) []int {
	pids, _ := listPids()
	var out []int
	for _, pid := range pids {
		if pid != os.Getpid() && strings.Contains(strings.Join(cmdline(pid), " "), s) {
			out = append(out, pid)
		}
	}
	return out
}

// waitNone waits until no process's command line holds s.
func waitNone(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := pidsWith(s)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes with %q still alive after 10s: %v", s, pids)
		}
		time.Sleep(5 * time.Millisecond) // polling /proc with a deadline
	}
}

// waitSome waits until a process's command line holds s.
func waitSome(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(pidsWith(s)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no process with %q within 20s", s)
		}
		time.Sleep(5 * time.Millisecond) // polling /proc with a deadline
	}
}

func token() string { return strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 10) }

// ppidOut runs a command that prints its parent (the reaper) and returns it.
// ppidOut runs shell with sh as an argv command (so never in a warm shell,
// which has its own reaper) and returns the pid it printed.
func ppidOut(t *testing.T, r *Runner, shell string) int {
	t.Helper()
	var out strings.Builder
	res, err := r.Run(t.Context(), sandbox.Command{Args: []string{"sh", "-c", shell}, Stdout: &out})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run %q: %+v, %v", shell, res, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("Run %q printed %q", shell, out.String())
	}
	return pid
}

func TestReaperIsReusedOnceItsCommandIsDone(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t)
	first := ppidOut(t, r, "echo $PPID")
	if argv := cmdline(first); len(argv) < 2 || argv[1] != reapMainArg {
		t.Fatalf("the command's parent %d is %q, want a reaper", first, argv)
	}
	for range 3 {
		if got := ppidOut(t, r, "echo $PPID"); got != first {
			t.Errorf("a command ran under %d, want the idle reaper %d again", got, first)
		}
	}
	// A command that leaves a process running keeps its reaper: the next
	// one runs under another.
	tok := token()
	held := ppidOut(t, r, "sleep 370."+tok+" >/dev/null 2>&1 & echo $PPID")
	if got := ppidOut(t, r, "echo $PPID"); got == held {
		t.Errorf("a command ran under %d, which still holds a background process", got)
	}
}

func TestKillOfAnEndedCommandSparesTheNextOnItsReaper(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t)
	a, err := r.Start(t.Context(), sandbox.Command{Shell: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Wait(); err != nil || res.ExitCode != 0 {
		t.Fatalf("a: %+v, %v", res, err)
	}
	tok := token()
	// c runs on a's reaper, which is idle again; a's kill must not reach it.
	c, err := r.Start(t.Context(), sandbox.Command{Shell: "exec sleep 372." + tok})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Kill()
		_, _ = c.Wait()
	}()
	if c.reaper != a.reaper {
		t.Fatalf("c did not reuse a's reaper")
	}
	waitSome(t, "372."+tok)
	if err := a.Kill(); err != nil {
		t.Fatalf("kill a: %v", err)
	}
	// The reaper answers requests in order: a start behind a's kill is
	// refused as long as it still runs c.
	var files []*os.File
	for range reapFiles {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	if err := c.reaper.send(reapMsg{Op: reapStart, ID: 1 << 60, Path: "/bin/true", Args: []string{"true"}}, files); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-c.reaper.startc:
		if m.Op != reapFailed || !strings.Contains(m.Error, "busy") {
			t.Errorf("the reaper answered %+v: killing the ended command a reached c", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer from the reaper within 10s")
	}
	select {
	case <-c.exited:
		t.Error("killing the ended command a killed c, which runs on the same reaper")
	default:
	}
}

func TestReaperKilledByItsCommand(t *testing.T) {
	t.Parallel()
	r := newTestRunner(t)
	tok := token()
	res, err := r.Run(t.Context(), sandbox.Command{Shell: "kill -9 $PPID; exec sleep 373." + tok})
	if !errors.Is(err, errReaperDied) {
		t.Errorf("Run = %+v, %v; want errReaperDied", res, err)
	}
	// What carries the marker is killed: here, the main process.
	waitNone(t, "373."+tok)
	// The Runner goes on with a new reaper.
	if got := ppidOut(t, r, "echo $PPID"); len(cmdline(got)) < 2 || cmdline(got)[1] != reapMainArg {
		t.Errorf("the next command runs under %d (%q), want a reaper", got, cmdline(got))
	}
}

func TestOwnedServeKillsTheOrphansOfAKilledReaper(t *testing.T) {
	t.Parallel()
	c, _ := startOwnedServe(t, NewSessionID())
	tok, up := token(), filepath.Join(t.TempDir(), "up")
	// The escapee leaves the group, the session and the marker; then the
	// command kills its reaper, so the escapee lands on serve.
	shell := "setsid env -u " + sandbox.MarkerEnv + " sh -c 'touch " + up + "; exec sleep 374." + tok + "' >/dev/null 2>&1 &\n" +
		"while [ ! -e " + up + " ]; do sleep 0.01; done; kill -9 $PPID; exec sleep 375." + tok
	res, err := c.Run(t.Context(), sandbox.Command{Shell: shell})
	if err == nil || !strings.Contains(err.Error(), errReaperDied.Error()) {
		t.Errorf("Run = %+v, %v; want the reaper's death reported", res, err)
	}
	waitNone(t, tok)
}

func TestKillSessionFromOutside(t *testing.T) {
	t.Parallel()
	session := NewSessionID()
	c, serve := startOwnedServe(t, session)
	tok, up := token(), filepath.Join(t.TempDir(), "up")
	// The command stops its reaper too: the kill must continue it.
	shell := "setsid env -u " + sandbox.MarkerEnv + " sh -c 'touch " + up + "; exec sleep 376." + tok + "' >/dev/null 2>&1 &\n" +
		"while [ ! -e " + up + " ]; do sleep 0.01; done; kill -STOP $PPID; echo started; exec sleep 377." + tok
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(t.Context(), sandbox.Command{Shell: shell, Stdout: w})
		w.Close()
		done <- err
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("read %q, %v; want started", line, err)
	}
	go io.Copy(io.Discard, out) //nolint:errcheck // drains until Run ends

	if err := KillSession(session); err != nil {
		t.Fatalf("KillSession: %v", err)
	}
	waitNone(t, tok)
	if err := <-done; !errors.Is(err, ErrChannelClosed) {
		t.Errorf("Run after the session was killed = %v, want ErrChannelClosed", err)
	}
	if err := serve.Wait(); err == nil {
		t.Error("serve exited 0, want killed")
	} else if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("serve ended with %v, want SIGKILL", err)
	}
}

func TestSessionRole(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		argv []string
		want string
	}{
		{"serve", []string{"/.shiro/bin/shiro", "helper", "serve", "--session", "s1"}, roleServe},
		{"serve with =", []string{"shiro", "helper", "serve", "--session=s1"}, roleServe},
		{"reaper", []string{"shiro", "helper", "reap", "--session", "s1", "--oom-score-adj", "1000"}, roleReap},
		{"test reaper", []string{"x.test", reapMainArg, "--session", "s1"}, roleReap},
		{"another session", []string{"shiro", "helper", "serve", "--session", "s2"}, ""},
		{"the kill itself", []string{"shiro", "helper", "kill", "--session", "s1"}, ""},
		{"a word after the flags", []string{"sh", "-c", "x", "--session", "s1", "serve"}, ""},
		{"zombie", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := sessionRole(tt.argv, "s1"); got != tt.want {
				t.Errorf("sessionRole(%q) = %q, want %q", tt.argv, got, tt.want)
			}
		})
	}
}

func TestParseReapArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		want    ReapOptions
		wantErr bool
	}{
		{"what a Runner writes", ReapOptions{SessionID: "s", OOMScoreAdj: 1000}.args(), ReapOptions{SessionID: "s", OOMScoreAdj: 1000}, false},
		{"session only", []string{"--session", "s"}, ReapOptions{SessionID: "s"}, false},
		{"missing value", []string{"--session"}, ReapOptions{}, true},
		{"bad number", []string{"--oom-score-adj", "x"}, ReapOptions{}, true},
		{"unknown flag", []string{"--what", "x"}, ReapOptions{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseReapArgs(tt.args)
			if (err != nil) != tt.wantErr || err == nil && got != tt.want {
				t.Errorf("parseReapArgs(%q) = %+v, %v; want %+v, error %v", tt.args, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	// After the state and ppid: pgrp session tty_nr tpgid flags, then up to
	// starttime (field 22).
	const tail = " 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 1000 100"
	tests := []struct {
		name string
		data string
		want procInfo
		ok   bool
	}{
		{"plain", "42 (sleep) S 7" + tail, procInfo{pid: 42, ppid: 7, state: 'S', flags: 4194560, start: 123456}, true},
		{"comm with parentheses and spaces", "42 (a) S 9 (b) Z 3" + tail, procInfo{pid: 42, ppid: 3, state: 'Z', flags: 4194560, start: 123456}, true},
		{"truncated", "42 (sleep) S 7 42 1", procInfo{}, false},
		{"no comm", "42 sleep S 7" + tail, procInfo{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseStat(42, []byte(tt.data))
			if ok != tt.ok || ok && got != tt.want {
				t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tt.data, got, ok, tt.want, tt.ok)
			}
		})
	}
	kthreadd, ok := parseStat(2, []byte("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0"))
	if !ok || kthreadd.ppid != 0 || kthreadd.flags&pfKthread == 0 {
		t.Errorf("kthreadd = %+v, %v; want ppid 0 and PF_KTHREAD", kthreadd, ok)
	}
}

func TestDescendantsOf(t *testing.T) {
	t.Parallel()
	procs := []procInfo{
		{pid: 1, ppid: 0}, {pid: 10, ppid: 1}, // the root and its parent's other child
		{pid: 11, ppid: 10}, {pid: 12, ppid: 10}, {pid: 13, ppid: 11}, {pid: 14, ppid: 13},
		{pid: 20, ppid: 1}, {pid: 21, ppid: 20}, // another tree
	}
	var got []int
	for _, p := range descendantsOf(procs, 10) {
		got = append(got, p.pid)
	}
	if want := []int{11, 12, 13, 14}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("descendantsOf(10) = %v, want %v (parents first)", got, want)
	}
}
