package gitshadow

import (
	"errors"

	"golang.org/x/sys/unix"
)

// The events that change what Fingerprint reads: entries of a directory,
// contents and metadata of a file (a directory's watch also reports its
// entries' writes and metadata changes).
const (
	fpDirMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
		unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW
	fpFileMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF |
		unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW
)

// inotifyWatch is a changeWatch on one inotify instance, replaced at each
// reset.
type inotifyWatch struct{ fd int }

func newChangeWatch() changeWatch {
	w := &inotifyWatch{fd: -1}
	if !w.reset() {
		return nil
	}
	return w
}

func (w *inotifyWatch) reset() bool {
	if w.fd >= 0 {
		_ = unix.Close(w.fd)
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		w.fd = -1
		return false
	}
	w.fd = fd
	return true
}

func (w *inotifyWatch) add(abs string, dir bool) bool {
	if w.fd < 0 {
		return false
	}
	mask := uint32(fpFileMask)
	if dir {
		mask = fpDirMask
	}
	_, err := unix.InotifyAddWatch(w.fd, abs, mask)
	return err == nil
}

// changed reads what is queued; any event (an overflow included) counts.
func (w *inotifyWatch) changed() bool {
	if w.fd < 0 {
		return true
	}
	var buf [4096]byte
	for {
		n, err := unix.Read(w.fd, buf[:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return false
		default:
			return err != nil || n > 0
		}
	}
}

func (w *inotifyWatch) close() {
	if w.fd >= 0 {
		_ = unix.Close(w.fd)
		w.fd = -1
	}
}
