package helper

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

const supported = true

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitExited blocks until process pid has exited, without reaping it
// (WNOWAIT), so its pid stays reserved until the caller reaps it.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

func killGroup(pgid int) error {
	if err := unix.Kill(-pgid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill group %d: %w", pgid, err)
	}
	return nil
}

// killMatching sends SIGKILL to every other process whose environment
// matches and returns how many it signalled.
func killMatching(match func(environ []byte) bool) (int, error) {
	pids, err := listPids()
	if err != nil {
		return 0, err
	}
	self := os.Getpid()
	n := 0
	for _, pid := range pids {
		if pid == self {
			continue
		}
		// A zombie's environ is empty; a vanished or foreign process errors.
		environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil || !match(environ) {
			continue
		}
		if err := unix.Kill(pid, unix.SIGKILL); err == nil {
			n++
		}
	}
	return n, nil
}

// listPids lists the processes in /proc.
func listPids() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	pids := make([]int, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// exitStatus returns the exit code, or 128+signal and the signal's name.
func exitStatus(ps *os.ProcessState) (int, string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}

// readAvailable reads what f (a non-blocking pipe) holds without waiting:
// 0 at EOF, -1 when it is empty or on an error.
func readAvailable(f *os.File, buf []byte) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	err = rc.Read(func(fd uintptr) bool {
		for {
			var rerr error
			n, rerr = unix.Read(int(fd), buf)
			if rerr != unix.EINTR {
				if rerr != nil {
					n = -1
				}
				return true // never wait for readiness
			}
		}
	})
	if err != nil {
		return -1
	}
	return n
}
