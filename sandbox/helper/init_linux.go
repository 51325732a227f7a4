package helper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"
)

// Init is the container's PID 1. It reaps every zombie reparented to it.
// While no session is open (see InitOptions.Sessions) it kills every other
// process: its children, then theirs as they are reparented to it, until it
// has none. It returns nil once no session has been open for
// opts.IdleTimeout, or promptly on SIGTERM or SIGINT, and ctx's error when
// ctx ends it. When not PID 1 it makes itself a child subreaper, so that the
// same holds for its descendants; it reaps and kills any child of its
// process, so do not run it in a process that has other children.
func Init(ctx context.Context, opts InitOptions) error {
	poll := opts.pollInterval()
	sessions := opts.Sessions
	if sessions == nil {
		sessions = countSessions
	}
	self := os.Getpid()
	if self != 1 {
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
	lastSession := time.Now() // the last time a session was seen open
	reap()
	logf("running (pid %d, idle timeout %v)", self, opts.IdleTimeout)
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
			n, err := sessions()
			if err != nil {
				logf("count sessions: %v", err) // not idle: we cannot tell
				lastSession = now
				continue
			}
			if n > 0 {
				lastSession = now
				continue
			}
			if killed := killChildren(self); killed > 0 {
				logf("no session open: killed %d processes", killed)
			}
			if opts.IdleTimeout > 0 && now.Sub(lastSession) >= opts.IdleTimeout {
				logf("no session for %v: exiting", opts.IdleTimeout)
				return nil
			}
		}
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		pid, _, err := wait4(-1, unix.WNOHANG)
		if err != nil || pid <= 0 {
			return
		}
	}
}

// killChildren kills every child of self, reaps it, and goes on with the
// children reparented to self meanwhile, until self has none. It returns
// how many it killed. Only its caller's goroutine reaps, so a pid it read
// stays reserved until it reaps it.
func killChildren(self int) int {
	killed := 0
	for range 1000 { // a bound against a process that forks as fast as we kill
		kids, err := childrenOf(self)
		if err != nil {
			return killed
		}
		live := 0
		for _, k := range kids {
			if !k.zombie() {
				_ = unix.Kill(k.pid, unix.SIGKILL)
				live++
			}
		}
		killed += live
		flags := 0
		if live == 0 {
			flags = unix.WNOHANG
		}
		pid, _, err := wait4(-1, flags)
		switch {
		case errors.Is(err, unix.ECHILD):
			return killed
		case err != nil:
			return killed
		case pid == 0 && len(kids) == 0:
			// A child /proc did not show yet (being reparented): look again.
			time.Sleep(time.Millisecond)
		}
		reap()
	}
	return killed
}

// countSessions counts the open sessions of the container: the live
// processes whose parent is outside its pid namespace (ppid 0), as every
// `docker exec` is, PID 1 and the caller excepted. No process inside can
// make one: an orphan is reparented to a subreaper or to PID 1, never to 0.
func countSessions() (int, error) {
	procs, err := processes()
	if err != nil {
		return 0, err
	}
	self := os.Getpid()
	n := 0
	for _, p := range procs {
		if p.ppid == 0 && p.pid != 1 && p.pid != self && !p.zombie() && p.flags&pfKthread == 0 {
			n++
		}
	}
	return n, nil
}
