//go:build unix

package helper

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// pollable returns r, or when r is a file in blocking mode (the standard
// input an exec gets), a non-blocking duplicate of it that Go's poller
// waits on. A read of a blocking file holds a thread in the kernel, and
// the runtime's monitor then wakes every 20 microseconds for as long as
// it waits (to take the thread's processor back): some fifty wake-ups for
// each command serve runs. The duplicate is closed with close.
func pollable(r io.Reader) (_ io.Reader, close func()) {
	f, ok := r.(*os.File)
	if !ok {
		return r, func() {}
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return r, func() {}
	}
	dup := -1
	_ = raw.Control(func(fd uintptr) {
		dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if err != nil || dup < 0 {
		return r, func() {}
	}
	// O_NONBLOCK belongs to the open file, which only this process reads.
	if err := syscall.SetNonblock(dup, true); err != nil {
		_ = unix.Close(dup)
		return r, func() {}
	}
	nf := os.NewFile(uintptr(dup), f.Name())
	return nf, func() { _ = nf.Close() }
}
