package docker

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// pidfds reaches a local engine's container processes through pidfds: a
// pidfd names one process, whatever its pid becomes, so a pid the engine
// listed is checked (its cgroup names the container) on the process the
// pidfd holds, and signalled through it.
type pidfds struct{}

func (pidfds) open(containerID string, pids []int) (victims, error) {
	var vs pidfdVictims
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			vs.close()
			return nil, fmt.Errorf("process %d: %w", pid, err)
		}
		vs = append(vs, pidfdVictim{pid: pid, fd: fd})
		cg, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if err != nil || !strings.Contains(string(cg), containerID) || exited(fd) {
			// Another pid namespace than the engine's (shiro in a
			// container), or not the container's process.
			vs.close()
			return nil, fmt.Errorf("process %d is not the container's here", pid)
		}
	}
	return vs, nil
}

type pidfdVictim struct {
	pid, fd int
}

type pidfdVictims []pidfdVictim

func (vs pidfdVictims) kill() error {
	var errs []error
	for _, v := range vs {
		if err := unix.PidfdSendSignal(v.fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("process %d: %w", v.pid, err))
		}
	}
	return errors.Join(errs...)
}

func (vs pidfdVictims) wait(d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		left := 0
		for _, v := range vs {
			if !exited(v.fd) {
				left++
			}
		}
		if left == 0 || time.Now().After(deadline) {
			return left
		}
		fds := make([]unix.PollFd, 0, len(vs))
		for _, v := range vs {
			fds = append(fds, unix.PollFd{Fd: int32(v.fd), Events: unix.POLLIN})
		}
		_, _ = unix.Poll(fds, int(min(time.Until(deadline), 50*time.Millisecond)/time.Millisecond)+1)
	}
}

func (vs pidfdVictims) close() {
	for _, v := range vs {
		_ = unix.Close(v.fd)
	}
}

// exited reports whether the process a pidfd names has exited (a pidfd
// polls readable then).
func exited(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}
