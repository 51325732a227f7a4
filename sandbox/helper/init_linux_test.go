package helper

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
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
	initTestIdle   = time.Second
	initTestOrphan = 500 * time.Millisecond
)

// initTestChild runs Init in this process and returns the exit code.
//
//	idle:    leave an orphaned sleep behind (reparented to us), print its
//	         pid, then run Init until it is idle.
//	sigterm: run Init with no idle timeout; the test sends SIGTERM.
func initTestChild(mode string) int {
	opts := InitOptions{PollInterval: 20 * time.Millisecond, Log: os.Stdout}
	switch mode {
	case "idle":
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fmt.Println("subreaper:", err)
			return 2
		}
		out, err := exec.Command("sh", "-c", fmt.Sprintf("sleep %g >/dev/null 2>&1 & echo $!", initTestOrphan.Seconds())).Output()
		if err != nil {
			fmt.Println("orphan:", err)
			return 2
		}
		fmt.Printf("orphan %s", out)
		opts.IdleTimeout = initTestIdle
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
func startInit(t *testing.T, mode string) (*exec.Cmd, <-chan string, <-chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), initTestEnv+"="+mode)
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

func TestInitReapsAndExitsWhenIdle(t *testing.T) {
	t.Parallel()
	_, lines, exited := startInit(t, "idle")
	pid, err := strconv.Atoi(strings.TrimPrefix(nextLine(t, lines, "orphan "), "orphan "))
	if err != nil {
		t.Fatal(err)
	}
	nextLine(t, lines, "shiro init: running")

	// The orphan must vanish (be reaped, not linger as a zombie) while init
	// still runs: it is busy as long as the orphan lives.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		if os.IsNotExist(err) {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("init exited (%v) before reaping its orphan %d", err, pid)
		default:
		}
		if time.Now().After(deadline) {
			state, _, _ := procStat(pid)
			t.Fatalf("orphan %d still in /proc (state %c) after 10s", pid, state)
		}
		time.Sleep(5 * time.Millisecond) // polling /proc with a deadline
	}
	reaped := time.Now()

	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("init: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("init did not exit when idle")
	}
	if idle := time.Since(reaped); idle < initTestIdle-200*time.Millisecond {
		t.Errorf("init exited %v after its last child ended, want about %v", idle, initTestIdle)
	}
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
	case <-time.After(2 * time.Second):
		t.Error("init did not return within 2s of SIGTERM")
	}
}
