package helper

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Reap is a reaper (`shiro helper reap`): it serves the Runner at the other
// end of conn (see the protocol in reap.go) until conn reaches EOF or a
// SIGTERM, SIGINT or SIGHUP arrives, then kills everything below it and
// returns. It makes the calling process a child subreaper and reaps every
// child of it, so it must own its process.
func Reap(conn *os.File, opts ReapOptions) error {
	// One goroutine does the work and another reads requests: one P keeps
	// the hand-off between them on one thread, with no wake-up of another.
	runtime.GOMAXPROCS(1)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become a subreaper: %w", err)
	}
	// Not dumpable: a command (same user) can neither ptrace the reaper nor
	// open its descriptors through /proc.
	notDumpable()
	c, err := net.FileConn(conn) // a close-on-exec duplicate: commands never get it
	_ = conn.Close()
	if err != nil {
		return fmt.Errorf("reaper socket: %w", err)
	}
	// Nor anything else the reaper inherited: a command gets its three
	// streams only.
	_ = unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	uc, ok := c.(*net.UnixConn)
	if !ok {
		_ = c.Close()
		return fmt.Errorf("reaper socket: %T is not a unix socket", c)
	}
	defer uc.Close()

	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, unix.SIGCHLD)
	defer signal.Stop(sigchld)
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	defer signal.Stop(term)

	reqs := make(chan reapRequest)
	stop := make(chan struct{})
	defer close(stop)
	go readReapRequests(uc, reqs, stop)

	r := &reapState{conn: uc, self: os.Getpid(), oomScoreAdj: opts.OOMScoreAdj}
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				r.killAll()
				return nil
			}
			r.handle(req)
		case <-sigchld:
			r.reapReady()
		case <-term:
			r.killAll()
			return nil
		}
	}
}

// reapRequest is a request with the descriptors it carried.
type reapRequest struct {
	reapMsg
	files []*os.File
}

// readReapRequests decodes requests (newline-terminated JSON) and the
// descriptors sent with them until conn fails, then closes out.
func readReapRequests(conn *net.UnixConn, out chan<- reapRequest, stop <-chan struct{}) {
	defer close(out)
	var pending []byte
	var fds []*os.File
	defer func() {
		for _, f := range fds {
			_ = f.Close()
		}
	}()
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(8*4))
	for {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		fds = append(fds, parseRights(oob[:oobn])...)
		pending = append(pending, buf[:n]...)
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				break
			}
			var req reapRequest
			jerr := json.Unmarshal(pending[:i], &req.reapMsg)
			pending = pending[i+1:]
			if jerr != nil {
				continue
			}
			if req.Op == reapStart {
				// A start's descriptors arrive with its first byte, so
				// they are here by the time its line is complete.
				k := min(reapFiles, len(fds))
				req.files, fds = fds[:k:k], fds[k:]
			}
			select {
			case out <- req:
			case <-stop:
				for _, f := range req.files {
					_ = f.Close()
				}
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// reapState is the reaper's one goroutine that starts, reaps and kills: as
// nothing else reaps, a pid it reads from /proc stays reserved until it
// reaps it, so it never signals a reused pid.
type reapState struct {
	conn        *net.UnixConn
	self        int
	oomScoreAdj int // written to each command's oom_score_adj when not 0

	id   uint64 // the current command, 0 when none
	main int    // its main process until reaped, else 0
}

func (r *reapState) send(m reapMsg) {
	data, err := json.Marshal(m)
	if err != nil {
		return
	}
	_, _ = r.conn.Write(append(data, '\n')) // the Runner gone: EOF ends us
}

func (r *reapState) handle(req reapRequest) {
	switch req.Op {
	case reapStart:
		r.start(req)
	case reapKill:
		if req.ID != 0 && req.ID == r.id {
			r.killAll()
		}
	}
	for _, f := range req.files {
		_ = f.Close()
	}
}

func (r *reapState) start(req reapRequest) {
	fail := func(err error) {
		m := reapMsg{Op: reapFailed, ID: req.ID, Error: err.Error()}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			m.Errno = int(errno)
		}
		r.send(m)
	}
	if r.id != 0 {
		fail(fmt.Errorf("reaper busy with command %d", r.id))
		return
	}
	if len(req.files) != reapFiles {
		fail(fmt.Errorf("start: got %d descriptors, want %d", len(req.files), reapFiles))
		return
	}
	p, err := os.StartProcess(req.Path, req.Args, &os.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: req.files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		fail(err)
		return
	}
	r.id, r.main = req.ID, p.Pid
	_ = p.Release() // reaped by wait4 below
	if r.oomScoreAdj != 0 {
		// The command has exec'd by now: its /proc files are the user's
		// (unless it runs a program the user cannot read, which then keeps
		// the reaper's score). The reaper cannot raise its own score and
		// pass it on: it is not dumpable from its exec on.
		_ = setOOMScoreAdj(r.main, r.oomScoreAdj)
	}
	r.send(reapMsg{Op: reapStarted, ID: req.ID, Pid: r.main})
}

// reapReady reaps every child that exited and reports the command's end.
func (r *reapState) reapReady() {
	for {
		pid, ws, err := wait4(-1, unix.WNOHANG)
		if err != nil { // ECHILD: nothing below us any more
			r.reaped(0, 0, true)
			return
		}
		if pid == 0 {
			return
		}
		r.reaped(pid, ws, false)
	}
}

// reaped records that pid ended with ws (pid 0: none), and whether the
// subtree is now empty.
func (r *reapState) reaped(pid int, ws unix.WaitStatus, empty bool) {
	if pid != 0 && pid == r.main {
		r.main = 0
		// Reap what already ended, so that the exit report can say whether
		// the command left anything running (usually not: the Runner then
		// reuses the reaper at once).
		for !empty {
			p, _, err := wait4(-1, unix.WNOHANG)
			if err != nil {
				empty = true
			} else if p == 0 {
				break
			}
		}
		r.send(reapMsg{Op: reapExit, ID: r.id, Status: uint32(ws), Idle: empty})
		if empty {
			r.id = 0
		}
		return
	}
	if empty && r.id != 0 && r.main == 0 {
		r.send(reapMsg{Op: reapIdle, ID: r.id})
		r.id = 0
	}
}

// killAll kills everything below the reaper and reaps it: SIGKILL to the
// main process's group while the main process is unreaped, to every child,
// and to every deeper descendant that is still the process /proc showed
// (killSame); then it reaps, and goes on with the processes reparented to
// it meanwhile, until it has no child.
func (r *reapState) killAll() {
	for {
		if r.main != 0 {
			_ = unix.Kill(-r.main, unix.SIGKILL)
		}
		procs, _ := processes()
		kids := 0
		for _, p := range descendantsOf(procs, r.self) {
			if p.ppid == r.self {
				// A child: its pid stays ours until we reap it.
				_ = unix.Kill(p.pid, unix.SIGKILL)
				kids++
			} else if !p.zombie() {
				killSame(p)
			}
		}
		flags := 0
		if kids == 0 {
			flags = unix.WNOHANG
		}
		pid, ws, err := wait4(-1, flags)
		switch {
		case err != nil: // ECHILD
			r.reaped(0, 0, true)
			return
		case pid == 0:
			// A child /proc did not show yet (being reparented): look again.
			time.Sleep(time.Millisecond)
		default:
			r.reaped(pid, ws, false)
		}
	}
}

// wait4 waits for any kind of child (__WALL: also those made by clone
// without SIGCHLD), retrying on EINTR.
func wait4(pid, flags int) (int, unix.WaitStatus, error) {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, flags|unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return got, ws, err
	}
}
