package helper

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxIdleReapers is how many idle reapers a Runner keeps; more are stopped
// when their command ends.
const maxIdleReapers = 2

// reaperStopWait is how long stopping a reaper may take before it is
// killed (it is stopped by a command, or stuck on an unkillable process).
const reaperStopWait = 5 * time.Second

// reaperPool starts and reuses a Runner's reapers.
type reaperPool struct {
	argv []string // the reaper's command line, path first

	mu   sync.Mutex
	idle []*reaper
	all  map[int]*reaper // by pid, until reaped
	wg   sync.WaitGroup  // the reapers' reading goroutines
}

func newReaperPool(argv []string) *reaperPool {
	return &reaperPool{argv: argv, all: make(map[int]*reaper)}
}

// get returns an idle reaper, starting one when none is idle (a command
// runs alongside another, or after one that left a process running).
func (pl *reaperPool) get() (*reaper, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if n := len(pl.idle); n > 0 {
		r := pl.idle[n-1]
		pl.idle = pl.idle[:n-1]
		return r, nil
	}
	return pl.spawnLocked()
}

// warm starts an idle reaper unless one is idle.
func (pl *reaperPool) warm() error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if len(pl.idle) > 0 {
		return nil
	}
	r, err := pl.spawnLocked()
	if err != nil {
		return err
	}
	pl.idle = append(pl.idle, r)
	return nil
}

// spawnLocked starts a reaper. It runs under pl.mu, so that isReaper never
// sees a reaper's pid before it is recorded.
func (pl *reaperPool) spawnLocked() (*reaper, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start reaper: socket pair: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "reaper")
	theirs := os.NewFile(uintptr(fds[1]), "reaper")
	defer theirs.Close()
	c, err := net.FileConn(ours)
	_ = ours.Close()
	if err != nil {
		return nil, fmt.Errorf("start reaper: %w", err)
	}
	cmd := exec.Command(pl.argv[0], pl.argv[1:]...)
	if pl.argv[0] == "/proc/self/exe" {
		cmd.Args[0] = os.Args[0] // what ps shows
	}
	cmd.ExtraFiles = []*os.File{theirs} // ReapFD
	// Its own process group: a signal to the Runner's group (a terminal's
	// ctrl-c) does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("start reaper %s: %w", pl.argv[0], err)
	}
	r := &reaper{pool: pl, cmd: cmd, conn: c.(*net.UnixConn), startc: make(chan reapMsg, 1), done: make(chan struct{})}
	pl.all[cmd.Process.Pid] = r
	pl.wg.Add(1)
	go r.read()
	return r, nil
}

// put makes r available again after its command's subtree emptied.
func (pl *reaperPool) put(r *reaper) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.all[r.pid()] != r || r.dying() {
		return
	}
	if len(pl.idle) >= maxIdleReapers {
		r.stop()
		return
	}
	pl.idle = append(pl.idle, r)
}

// isReaper reports whether pid is one of the pool's reapers.
func (pl *reaperPool) isReaper(pid int) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	_, ok := pl.all[pid]
	return ok
}

// forgetLocked drops r as its process is reaped.
func (pl *reaperPool) forgetLocked(r *reaper) {
	if pl.all[r.pid()] == r {
		delete(pl.all, r.pid())
	}
	for i, x := range pl.idle {
		if x == r {
			pl.idle = append(pl.idle[:i], pl.idle[i+1:]...)
			break
		}
	}
}

// closeAll stops every reaper: each kills its subtree and exits. It waits
// for them (killing one that does not finish within reaperStopWait) and for
// their goroutines. The pool stays usable.
func (pl *reaperPool) closeAll() {
	pl.mu.Lock()
	rs := make([]*reaper, 0, len(pl.all))
	for _, r := range pl.all {
		rs = append(rs, r)
	}
	pl.idle = nil
	pl.mu.Unlock()
	for _, r := range rs {
		r.stop()
	}
	deadline := time.NewTimer(reaperStopWait)
	defer deadline.Stop()
	for _, r := range rs {
		select {
		case <-r.done:
		case <-deadline.C:
			r.signal(unix.SIGKILL)
			<-r.done
		}
	}
}

// wait waits for the goroutines of every reaper that has ended.
func (pl *reaperPool) wait() { pl.wg.Wait() }

// killOrphans kills every child of this process that is not one of the
// pool's reapers, and reaps those that ended: in a process that is a child
// subreaper and starts nothing but reapers, such a child is a process whose
// reaper was killed under it. Call it on SIGCHLD (the death of a reaper, or
// of an orphan killed earlier, whose own children then arrive), and with
// wait at the end, when it goes on until no such child is left or
// reaperStopWait has passed.
func (pl *reaperPool) killOrphans(wait bool) error {
	self := os.Getpid()
	deadline := time.Now().Add(reaperStopWait)
	for {
		kids, err := childrenOf(self)
		if err != nil {
			return fmt.Errorf("kill orphans: %w", err)
		}
		left := 0
		for _, k := range kids {
			if pl.isReaper(k.pid) {
				continue
			}
			// Only this function reaps non-reapers, so k.pid is still ours.
			if k.zombie() {
				_, _, _ = wait4(k.pid, unix.WNOHANG)
				continue
			}
			_ = unix.Kill(k.pid, unix.SIGKILL)
			left++
		}
		if !wait || left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill orphans: %d still alive after %v", left, reaperStopWait)
		}
		time.Sleep(time.Millisecond) // they die, and their children arrive
	}
}

// reaper is the Runner's handle on one reaper process.
type reaper struct {
	pool *reaperPool
	cmd  *exec.Cmd
	conn *net.UnixConn
	wmu  sync.Mutex // serialises writes

	mu       sync.Mutex
	reaped   bool     // the process was waited for: its pid may be reused
	stopping bool     // asked to exit
	cur      *Process // the command it runs, until it is idle again

	startc chan reapMsg  // the answer to a start
	done   chan struct{} // closed once the process is reaped
}

func (r *reaper) pid() int { return r.cmd.Process.Pid }

func (r *reaper) dying() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopping || r.reaped
}

// read handles the reaper's messages until it exits, then reaps it.
func (r *reaper) read() {
	defer r.pool.wg.Done()
	dec := json.NewDecoder(r.conn)
	for {
		var m reapMsg
		if err := dec.Decode(&m); err != nil {
			break
		}
		switch m.Op {
		case reapStarted, reapFailed:
			select {
			case r.startc <- m:
			default:
			}
		case reapExit:
			if p := r.current(m.ID); p != nil {
				code, sig := exitStatus(syscall.WaitStatus(m.Status))
				// Back in the pool before Wait returns: the next command
				// reuses this reaper.
				if m.Idle {
					r.release(m.ID)
				}
				p.finish(code, sig, nil)
			}
		case reapIdle:
			r.release(m.ID)
		}
	}
	// EOF: the reaper exited or is exiting.
	_ = r.conn.Close()
	waitExited(r.pid())
	// Reaped and forgotten at once, under the pool's lock: isReaper never
	// answers for a pid that is no longer this reaper's.
	r.pool.mu.Lock()
	r.mu.Lock()
	_ = r.cmd.Wait()
	r.reaped = true
	p := r.cur
	r.cur = nil
	r.mu.Unlock()
	r.pool.forgetLocked(r)
	r.pool.mu.Unlock()
	if p != nil {
		p.finish(-1, "", errReaperDied)
	}
	close(r.done)
}

// current returns the command with id that r runs, if any.
func (r *reaper) current(id uint64) *Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil && r.cur.id == id {
		return r.cur
	}
	return nil
}

// release puts r back in the pool once command id's subtree is empty.
func (r *reaper) release(id uint64) {
	r.mu.Lock()
	ok := r.cur != nil && r.cur.id == id
	if ok {
		r.cur = nil
	}
	r.mu.Unlock()
	if ok {
		r.pool.put(r)
	}
}

// send writes one message, with files passed as descriptors.
func (r *reaper) send(m reapMsg, files []*os.File) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	n, _, err := r.conn.WriteMsgUnix(data, oob, nil)
	if err == nil && n < len(data) {
		_, err = r.conn.Write(data[n:])
	}
	runtime.KeepAlive(files)
	if err != nil {
		return fmt.Errorf("reaper: send %s: %w", m.Op, err)
	}
	return nil
}

// errNotSent is start's error when the request could not be sent: the
// reaper is gone and started nothing, so another may be tried.
var errNotSent = errors.New("reaper gone")

// start starts p's command in r: files are its stdin, stdout and stderr.
func (r *reaper) start(p *Process, m reapMsg, files []*os.File) error {
	r.mu.Lock()
	r.cur = p
	r.mu.Unlock()
	err := r.send(m, files)
	if err != nil {
		err = fmt.Errorf("%w: %w", errNotSent, err)
	}
	var reply reapMsg
	if err == nil {
		select {
		case reply = <-r.startc:
		case <-r.done:
			err = errReaperDied
		}
	}
	if err == nil && reply.Op == reapStarted {
		p.pid = reply.Pid
		return nil
	}
	r.mu.Lock()
	r.cur = nil
	r.mu.Unlock()
	if err != nil {
		r.stop()
		return err
	}
	r.pool.put(r) // it started nothing: still idle
	err = errors.New(reply.Error)
	if reply.Errno != 0 {
		err = &os.PathError{Op: "fork/exec", Path: m.Path, Err: syscall.Errno(reply.Errno)}
	}
	return err
}

// kill asks r to kill command id's subtree; a stopped reaper is continued
// first (a command may have stopped it).
func (r *reaper) kill(id uint64) error {
	r.signal(unix.SIGCONT)
	return r.send(reapMsg{Op: reapKill, ID: id}, nil)
}

// stop asks r to kill its subtree and exit: EOF on its socket.
func (r *reaper) stop() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	r.signal(unix.SIGCONT)
	_ = r.conn.CloseWrite()
}

// signal sends sig to the reaper process unless it was reaped.
func (r *reaper) signal(sig unix.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.reaped {
		_ = unix.Kill(r.pid(), sig)
	}
}
