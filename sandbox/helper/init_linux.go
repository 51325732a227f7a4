package helper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
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
	var watch *sessionWatch
	if sessions == nil {
		// The default count watches each session it saw, so that the end
		// of the last one is seen at once, not at the next poll.
		w, err := newSessionWatch()
		if err != nil {
			return fmt.Errorf("init: %w", err)
		}
		defer w.stop()
		watch = w
		sessions = func() (int, error) {
			pids, err := sessionPids()
			if err == nil {
				w.track(pids)
			}
			return len(pids), err
		}
	}
	var ended <-chan struct{}
	if watch != nil {
		ended = watch.ended
	}
	notDumpable()
	self := os.Getpid()
	if self != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("init: become subreaper: %w", err)
		}
	}
	sigs := make(chan os.Signal, 8)
	// SIGUSR1: a session started (serve says so), count again now.
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT, unix.SIGUSR1)
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
		var now time.Time
		select {
		case <-ctx.Done():
			return ctx.Err()
		case s := <-sigs:
			if s == unix.SIGCHLD {
				reap()
				continue
			}
			if s != unix.SIGUSR1 {
				logf("%v: exiting", s)
				return nil
			}
			now = time.Now()
		case <-ended:
			now = time.Now()
		case now = <-tick.C:
		}
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

// sessionPids lists the open sessions of the container: the live
// processes whose parent is outside its pid namespace (ppid 0), as every
// `docker exec` is, PID 1 and the caller excepted. No process inside can
// make one: an orphan is reparented to a subreaper or to PID 1, never to 0.
func sessionPids() ([]int, error) {
	procs, err := processes()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []int
	for _, p := range procs {
		if p.ppid == 0 && p.pid != 1 && p.pid != self && !p.zombie() && p.flags&pfKthread == 0 {
			out = append(out, p.pid)
		}
	}
	return out, nil
}

// sessionWatch tells Init as soon as a session it has seen ends: it holds
// a pidfd of each (a pidfd polls readable once its process exits), and one
// goroutine polls them and a pipe that makes it take up a changed set.
type sessionWatch struct {
	ended chan struct{} // a value when a watched session ended

	mu   sync.Mutex
	fds  map[int]int // session pid → pidfd
	quit bool
	wake [2]int // the pipe: read end polled, write end nudges
	done chan struct{}
}

func newSessionWatch() (*sessionWatch, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, fmt.Errorf("session watch: %w", err)
	}
	w := &sessionWatch{ended: make(chan struct{}, 1), fds: map[int]int{}, wake: p, done: make(chan struct{})}
	go w.poll()
	return w, nil
}

// track watches pids (the sessions open now) and forgets the others.
func (w *sessionWatch) track(pids []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := false
	now := map[int]bool{}
	for _, pid := range pids {
		now[pid] = true
		if _, ok := w.fds[pid]; ok {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already, or no pidfds here: the poll still counts
		}
		w.fds[pid] = fd
		changed = true
	}
	for pid, fd := range w.fds {
		if !now[pid] {
			_ = unix.Close(fd)
			delete(w.fds, pid)
			changed = true
		}
	}
	if changed {
		w.nudge()
	}
}

// nudge makes the poller take up the current set; callers hold w.mu.
func (w *sessionWatch) nudge() { _, _ = unix.Write(w.wake[1], []byte{0}) }

func (w *sessionWatch) poll() {
	defer close(w.done)
	buf := make([]byte, 64)
	for {
		w.mu.Lock()
		if w.quit {
			w.mu.Unlock()
			return
		}
		fds := []unix.PollFd{{Fd: int32(w.wake[0]), Events: unix.POLLIN}}
		pids := []int{0}
		for pid, fd := range w.fds {
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			pids = append(pids, pid)
		}
		w.mu.Unlock()
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if fds[0].Revents != 0 {
			for {
				if n, _ := unix.Read(w.wake[0], buf); n <= 0 {
					break
				}
			}
		}
		gone := false
		w.mu.Lock()
		for i, f := range fds[1:] {
			if f.Revents == 0 {
				continue
			}
			if fd, ok := w.fds[pids[i+1]]; ok && int32(fd) == f.Fd {
				_ = unix.Close(fd)
				delete(w.fds, pids[i+1])
				gone = true
			}
		}
		w.mu.Unlock()
		if gone {
			select {
			case w.ended <- struct{}{}:
			default:
			}
		}
	}
}

// stop ends the poller and closes every descriptor.
func (w *sessionWatch) stop() {
	w.mu.Lock()
	w.quit = true
	w.nudge()
	w.mu.Unlock()
	<-w.done
	for _, fd := range w.fds {
		_ = unix.Close(fd)
	}
	_ = unix.Close(w.wake[0])
	_ = unix.Close(w.wake[1])
}

// NotifyInit tells the container's init that a session started, so that
// it watches it from now on rather than from its next poll. It does
// nothing unless PID 1 is shiro's init.
func NotifyInit() {
	cmdline, err := os.ReadFile("/proc/1/cmdline")
	if err != nil || os.Getpid() == 1 {
		return
	}
	args := strings.Split(string(cmdline), "\x00")
	if len(args) < 3 || args[1] != "helper" || args[2] != "init" {
		return
	}
	_ = unix.Kill(1, unix.SIGUSR1)
}
