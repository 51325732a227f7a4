// Command ptracer is the hostile suite's attacker inside the sandbox,
// built static so that it runs in any image. It tries to take over the
// processes shiro relies on, as a command of the sandbox's user can:
//
//	ptracer probe
//	    for every process of the container but itself whose command line
//	    is shiro's helper (its own serve and reaper included), tries PTRACE_ATTACH, opening
//	    each of its descriptors through /proc/<pid>/fd for writing, and
//	    reading its /proc/<pid>/environ and mem; prints one line each:
//	    "<pid> <role> attach=<ok|error> fd=<...> environ=<...> mem=<...>"
//	ptracer hijack DURATION LOG
//	    for DURATION, looks every millisecond for a process whose
//	    descriptor 3 it can open for writing (a shell waiting for its
//	    script) and writes a command into it; appends what it did to LOG.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ptracer probe | hijack DURATION LOG")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "probe":
		probe()
	case "hijack":
		d, err := time.ParseDuration(os.Args[2])
		if err != nil || len(os.Args) < 4 {
			fmt.Fprintln(os.Stderr, "usage: ptracer hijack DURATION LOG")
			os.Exit(2)
		}
		hijack(d, os.Args[3])
	default:
		os.Exit(2)
	}
}

// ancestors lists this process and its ancestors.
func ancestors() map[int]bool {
	out := map[int]bool{}
	for pid := os.Getpid(); pid > 0 && !out[pid]; pid = ppid(pid) {
		out[pid] = true
	}
	return out
}

// self is this process alone.
func self() map[int]bool { return map[int]bool{os.Getpid(): true} }

func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if p, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// role names a helper process by its command line ("" for others).
func role(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	args := strings.Split(string(b), "\x00")
	for i, a := range args {
		if a == "helper" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func result(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if e, ok := err.(*os.PathError); ok {
		err = e.Err
	}
	if e, ok := err.(syscall.Errno); ok {
		errno = e
		return strings.ReplaceAll(errno.Error(), " ", "-")
	}
	return strings.ReplaceAll(err.Error(), " ", "-")
}

func probe() {
	mine := self() // ancestors too: serve is one
	for _, pid := range pids() {
		r := role(pid)
		if mine[pid] || r == "" {
			continue
		}
		attach := syscall.PtraceAttach(pid)
		if attach == nil {
			_ = syscall.PtraceDetach(pid)
		}
		dir := "/proc/" + strconv.Itoa(pid)
		fdRes := "none"
		if entries, err := os.ReadDir(dir + "/fd"); err != nil {
			fdRes = result(err)
		} else {
			for _, e := range entries {
				f, err := os.OpenFile(dir+"/fd/"+e.Name(), os.O_WRONLY, 0)
				if err == nil {
					f.Close()
					fdRes = "ok:" + e.Name()
					break
				}
				fdRes = result(err)
			}
		}
		_, envErr := os.ReadFile(dir + "/environ")
		mem, memErr := os.Open(dir + "/mem")
		if memErr == nil {
			mem.Close()
		}
		fmt.Printf("%d %s attach=%s fd=%s environ=%s mem=%s\n", pid, r, result(attach), fdRes, result(envErr), result(memErr))
	}
}

func hijack(d time.Duration, log string) {
	mine := ancestors()
	tried := map[int]bool{}
	logf := func(format string, args ...any) {
		f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			fmt.Fprintf(f, format+"\n", args...)
			f.Close()
		}
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
		for _, pid := range pids() {
			if mine[pid] || tried[pid] {
				continue
			}
			fd3 := filepath.Join("/proc", strconv.Itoa(pid), "fd", "3")
			target, err := os.Readlink(fd3)
			if err != nil || !strings.HasPrefix(target, "pipe:") {
				if role(pid) != "" && !tried[pid] {
					tried[pid] = true
					logf("%d %s fd3=%s", pid, role(pid), result(err))
				}
				continue
			}
			tried[pid] = true
			f, err := os.OpenFile(fd3, os.O_WRONLY, 0)
			if err != nil {
				logf("%d fd3=%s", pid, result(err))
				continue
			}
			_, err = f.WriteString("echo HIJACKED;")
			f.Close()
			logf("%d wrote into fd3: %s", pid, result(err))
		}
	}
}
