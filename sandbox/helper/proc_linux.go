package helper

import (
	"bytes"
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

// procInfo is what /proc/<pid>/stat says about a process.
type procInfo struct {
	pid, ppid int
	state     byte   // R, S, D, Z, T...
	flags     uint64 // PF_* flags
	start     uint64 // start time, in clock ticks after boot: with pid, it names one process
}

// pfKthread marks a kernel thread in procInfo.flags.
const pfKthread = 0x00200000

func (p procInfo) zombie() bool { return p.state == 'Z' || p.state == 'X' }

// procStat reads /proc/<pid>/stat; ok is false when the process is gone.
func procStat(pid int) (procInfo, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	return parseStat(pid, data)
}

// parseStat parses the contents of /proc/<pid>/stat.
func parseStat(pid int, data []byte) (procInfo, bool) {
	// "pid (comm) S ppid pgrp session tty_nr tpgid flags ... starttime ...":
	// comm may hold spaces and parentheses. After it, field n of proc(5) is
	// fields[n-3].
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procInfo{}, false
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(string(fields[1]))
	flags, err2 := strconv.ParseUint(string(fields[6]), 10, 64)
	start, err3 := strconv.ParseUint(string(fields[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, ppid: ppid, state: fields[0][0], flags: flags, start: start}, true
}

// processes lists every process in /proc that can be read.
func processes() ([]procInfo, error) {
	pids, err := listPids()
	if err != nil {
		return nil, err
	}
	out := make([]procInfo, 0, len(pids))
	for _, pid := range pids {
		if p, ok := procStat(pid); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// childrenOf lists the children of parent, zombies included.
func childrenOf(parent int) ([]procInfo, error) {
	all, err := processes()
	if err != nil {
		return nil, err
	}
	var out []procInfo
	for _, p := range all {
		if p.ppid == parent {
			out = append(out, p)
		}
	}
	return out, nil
}

// descendantsOf lists the descendants of root in procs, parents before
// their children.
func descendantsOf(procs []procInfo, root int) []procInfo {
	children := make(map[int][]procInfo)
	for _, p := range procs {
		if p.pid != root {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []procInfo
	queue := []int{root}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// killSame sends SIGKILL to p if the process with p's pid is still the one
// p describes (same start time), through a pidfd so that the check and the
// signal concern the same process. It does nothing where pidfds are
// missing.
func killSame(p procInfo) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if now, ok := procStat(p.pid); ok && now.start == p.start {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
}

// cmdline returns a process's argv; nil when it is gone or a zombie.
func cmdline(pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings0(data)
}

// strings0 splits NUL-terminated strings.
func strings0(data []byte) []string {
	data = bytes.TrimSuffix(data, []byte{0})
	parts := bytes.Split(data, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}

// signalIf sends sig to pid if still() holds once pid is pinned: through a
// pidfd where the kernel has them, so that a pid reused after still()
// looked is not signalled; else with kill(2) right after still().
func signalIf(pid int, sig unix.Signal, still func() bool) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		if !still() {
			return nil
		}
		if err := unix.Kill(pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("signal %d: %w", pid, err)
		}
		return nil
	}
	defer unix.Close(fd)
	if !still() {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	return nil
}

// setOOMScoreAdj writes the oom_score_adj of process pid. Raising it
// needs no privilege, only a process whose /proc files are the caller's
// user's (a dumpable one); its children inherit it.
func setOOMScoreAdj(pid, n int) error {
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(n)), 0); err != nil {
		return fmt.Errorf("set oom_score_adj: %w", err)
	}
	return nil
}

// notDumpable makes the calling process not dumpable: a process of the
// same user can then neither ptrace it nor open anything under its
// /proc/<pid> but what is world-readable. The helper's own processes are
// already so from their exec on, as long as the helper binary is not
// readable by the user that runs it (see docs/sandbox.md); this covers
// a helper that is.
func notDumpable() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

// exitStatus returns the exit code, or 128+signal and the signal's name.
func exitStatus(ws syscall.WaitStatus) (int, string) {
	if ws.Signaled() {
		return 128 + int(ws.Signal()), unix.SignalName(ws.Signal())
	}
	return ws.ExitStatus(), ""
}

// processExit is exitStatus for a process os/exec waited for.
func processExit(ps *os.ProcessState) (int, string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return exitStatus(ws)
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
