package gitshadow

import (
	"errors"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inotifyEvents watches every directory the scanner read, so that a scan
// after a command re-reads only the directories whose entries changed.
// Events come from the kernel for whatever process changes a directory
// (the sandbox's included: it shares the host's kernel); when the queue
// overflows or a directory moves, the next scan is a full one.
type inotifyEvents struct {
	fd    int
	byWD  map[int32]string
	wdOf  map[string]int32
	dirty map[string]bool
	lost  bool
}

// watchMask: what changes a directory's entries, and IN_ATTRIB for its
// own mode (a directory the sandbox makes unreadable must be read again,
// and made readable, before anything below it is).
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ATTRIB | unix.IN_ONLYDIR

func newEvents() eventSource {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	return &inotifyEvents{fd: fd, byWD: map[int32]string{}, wdOf: map[string]int32{}, dirty: map[string]bool{}}
}

// watch adds a watch on the open directory f, known as rel. It names the
// directory through /proc/self/fd, so the watch is on the directory that
// was read, whatever a path to it leads to meanwhile.
func (e *inotifyEvents) watch(rel string, f *os.File) bool {
	wd, err := unix.InotifyAddWatch(e.fd, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), watchMask)
	if err != nil {
		return false
	}
	if old, ok := e.byWD[int32(wd)]; ok && old != rel {
		delete(e.wdOf, old)
	}
	e.byWD[int32(wd)] = rel
	e.wdOf[rel] = int32(wd)
	return true
}

// forget stops watching rel.
func (e *inotifyEvents) forget(rel string) {
	if wd, ok := e.wdOf[rel]; ok {
		_, _ = unix.InotifyRmWatch(e.fd, uint32(wd))
		delete(e.wdOf, rel)
		delete(e.byWD, wd)
	}
}

// changed reads every queued event and returns the directories whose
// entries changed; all is set when the events cannot say (an overflow, a
// watched directory moved, a read error).
func (e *inotifyEvents) changed() (map[string]bool, bool) {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(e.fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil || n <= 0 {
			e.lost = true
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0, ev.Mask&unix.IN_MOVE_SELF != 0:
				e.lost = true
			case ev.Mask&unix.IN_IGNORED != 0:
				if rel, ok := e.byWD[ev.Wd]; ok {
					delete(e.wdOf, rel)
					delete(e.byWD, ev.Wd)
				}
			case ev.Mask&^(unix.IN_ATTRIB|unix.IN_ISDIR) == 0 && ev.Len > 0:
				// An entry's metadata (a file touched, a subdirectory's
				// mode): the entries are the same, and a subdirectory
				// hears of its own mode through its own watch.
			default:
				if rel, ok := e.byWD[ev.Wd]; ok {
					e.dirty[rel] = true
				}
			}
		}
	}
	dirty, lost := e.dirty, e.lost
	e.dirty, e.lost = map[string]bool{}, false
	return dirty, lost
}

func (e *inotifyEvents) close() { unix.Close(e.fd) }
