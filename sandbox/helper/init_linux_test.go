package helper

import (
	"bufio"
	"context"
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

	"golang.org/x/sys/unix"
)

// Init reaps any child of its process, so the tests run it in a child
// process: the test binary re-executed with initTestEnv set.
const initTestEnv = "SHIRO_HELPER_TEST_INIT"

const (
	initTestIdle     = time.Second
	initSessionsFile = "SHIRO_HELPER_TEST_SESSIONS" // env: the file that holds the session count
	initStrayFile    = "SHIRO_HELPER_TEST_STRAY"    // env: the file the stray loop appends to
)

// initTestChild runs Init in this process and returns the exit code.
//
//	strays:  leave a stray loop behind (reparented to us: it left its
//	         session and lost its parent), print its pid, then run Init
//	         with the session count read from a file, until it is idle.
//	sigterm: run Init with no idle timeout; the test sends SIGTERM.
func initTestChild(mode string) int {
	opts := InitOptions{PollInterval: 20 * time.Millisecond, Log: os.Stdout}
	switch mode {
	case "strays":
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fmt.Println("subreaper:", err)
			return 2
		}
		loop := fmt.Sprintf("while sleep 0.05; do echo x >> '%s'; done", os.Getenv(initStrayFile))
		script := "setsid sh -c \"$1\" >/dev/null 2>&1 & echo $!"
		out, err := exec.Command("sh", "-c", script, "sh", loop).Output()
		if err != nil {
			fmt.Println("stray:", err)
			return 2
		}
		fmt.Printf("stray %s", out)
		opts.IdleTimeout = initTestIdle
		opts.Sessions = func() (int, error) {
			data, err := os.ReadFile(os.Getenv(initSessionsFile))
			if err != nil {
				return 0, err
			}
			return strconv.Atoi(strings.TrimSpace(string(data)))
		}
	case "sigterm":
	default:
		return 2
	}
	if err := Init(context.Background(), opts); err != nil {
		fmt.Println("init:", err)
		return 1
	}
	return 0
}

// startInit starts the init child and returns its output lines.
func startInit(t *testing.T, mode string, env ...string) (*exec.Cmd, <-chan string, <-chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), initTestEnv+"="+mode), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	exited := make(chan error, 1)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody is waiting for that many lines
			}
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited
	})
	return cmd, lines, exited
}

// nextLine returns the next line starting with prefix.
func nextLine(t *testing.T, lines <-chan string, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("init exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %q from init within 10s", prefix)
		}
	}
}

func TestInitKillsStraysOnceNoSessionIsOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sessions, stray := filepath.Join(dir, "sessions"), filepath.Join(dir, "stray")
	setSessions := func(n int) {
		if err := os.WriteFile(sessions, []byte(strconv.Itoa(n)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setSessions(1)
	_, lines, exited := startInit(t, "strays", initSessionsFile+"="+sessions, initStrayFile+"="+stray)
	pid, err := strconv.Atoi(strings.TrimPrefix(nextLine(t, lines, "stray "), "stray "))
	if err != nil {
		t.Fatal(err)
	}
	nextLine(t, lines, "shiro init: running")

	// An open session keeps the stray and init alive past the idle timeout.
	grown := waitGrowth(t, stray, 0)
	window := time.After(initTestIdle + initTestIdle/2)
	for waiting := true; waiting; {
		select {
		case err := <-exited:
			t.Fatalf("init exited (%v) while a session was open", err)
		case <-window:
			waiting = false
		}
	}
	if _, ok := procStat(pid); !ok {
		t.Fatalf("the stray %d died while a session was open", pid)
	}
	waitGrowth(t, stray, grown)

	// The last session closes: the stray is killed (and reaped), then
	// init exits once the idle timeout has passed.
	setSessions(0)
	closed := time.Now()
	nextLine(t, lines, "shiro init: no session open: killed")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			info, _ := procStat(pid)
			t.Fatalf("stray %d still in /proc (state %c) 10s after the last session closed", pid, info.state)
		}
		time.Sleep(5 * time.Millisecond) // polling /proc with a deadline
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("init: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("init did not exit when idle")
	}
	if idle := time.Since(closed); idle < initTestIdle-200*time.Millisecond {
		t.Errorf("init exited %v after the last session closed, want about %v", idle, initTestIdle)
	}
	size := fileSize(stray)
	time.Sleep(200 * time.Millisecond) // four periods of the loop: no writer left
	if n := fileSize(stray); n != size {
		t.Errorf("the stray's file still grows after init exited (%d -> %d)", size, n)
	}
}

// waitGrowth waits until file is larger than size and returns its size.
func waitGrowth(t *testing.T, file string, size int64) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n := fileSize(file); n > size {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not grow past %d bytes within 10s", file, size)
		}
		time.Sleep(10 * time.Millisecond) // polling a file with a deadline
	}
}

func fileSize(file string) int64 {
	fi, err := os.Stat(file)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func TestInitReturnsOnSIGTERM(t *testing.T) {
	t.Parallel()
	cmd, lines, exited := startInit(t, "sigterm")
	nextLine(t, lines, "shiro init: running")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("init after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("init did not return within 10s of SIGTERM")
	}
}

// The end of a session init has seen wakes it at once, not at its next
// poll: after an unclean end (shiro killed), what the session left is
// killed as soon as no session is left.
func TestSessionWatchSeesASessionEnd(t *testing.T) {
	t.Parallel()
	w, err := newSessionWatch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.stop()
	a, b := exec.Command("sleep", "100"), exec.Command("sleep", "100")
	for _, c := range []*exec.Cmd{a, b} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Process.Kill()
	}
	w.track([]int{a.Process.Pid, b.Process.Pid})
	select {
	case <-w.ended:
		t.Fatal("ended before any session did")
	case <-time.After(50 * time.Millisecond):
	}
	_ = a.Process.Kill()
	_ = a.Wait()
	select {
	case <-w.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the end of a watched session was not seen")
	}
	w.track([]int{b.Process.Pid}) // a is no session any more
	w.mu.Lock()
	n := len(w.fds)
	w.mu.Unlock()
	if n != 1 {
		t.Errorf("watching %d sessions, want 1", n)
	}
}
