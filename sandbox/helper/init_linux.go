package helper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Init is the container's PID 1: it reaps every zombie reparented to it and
// returns nil once the container has been idle (no process in Others) for
// opts.IdleTimeout, or promptly on SIGTERM or SIGINT. It returns ctx's error
// when ctx ends it. When not PID 1 it makes itself a child subreaper and
// watches its own descendants; it reaps any child of its process, so do not
// run it in a process that waits for its own children.
func Init(ctx context.Context, opts InitOptions) error {
	poll := opts.PollInterval
	if poll <= 0 {
		poll = DefaultPollInterval
	}
	others := opts.Others
	if others == nil {
		others = defaultOthers
	}
	if os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("init: become subreaper: %w", err)
		}
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT)
	defer signal.Stop(sigs)
	tick := time.NewTicker(poll)
	defer tick.Stop()

	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "shiro init: "+format+"\n", args...)
		}
	}
	busySince := time.Now() // last time another process was seen
	reap()
	logf("running (pid %d, idle timeout %v)", os.Getpid(), opts.IdleTimeout)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case s := <-sigs:
			if s == unix.SIGCHLD {
				reap()
				continue
			}
			logf("%v: exiting", s)
			return nil
		case now := <-tick.C:
			reap()
			pids, err := others()
			if err != nil {
				logf("list processes: %v", err) // not idle: we cannot tell
				busySince = now
				continue
			}
			if len(pids) > 0 {
				busySince = now
				continue
			}
			if opts.IdleTimeout > 0 && now.Sub(busySince) >= opts.IdleTimeout {
				logf("idle for %v: exiting", opts.IdleTimeout)
				return nil
			}
		}
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}

// defaultOthers lists the live processes that keep the container busy:
// every other one when we are PID 1, else our children.
func defaultOthers() ([]int, error) {
	pids, err := listPids()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []int
	for _, pid := range pids {
		if pid == self {
			continue
		}
		state, ppid, ok := procStat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		if self == 1 || ppid == self {
			out = append(out, pid)
		}
	}
	return out, nil
}

// procStat reads a process's state and parent from /proc/<pid>/stat.
func procStat(pid int) (state byte, ppid int, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(fields[1]))
	return fields[0][0], ppid, err == nil
}
