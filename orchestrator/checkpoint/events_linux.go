package checkpoint

import (
	"errors"
	"os"
	"path"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inotifyEvents watches every directory a scan listed, so that the next
// scan reads only what changed: the files named in events, and the
// directories whose entries changed. The kernel reports changes made by any
// process (the sandbox's too: it shares the host's kernel). It has no
// goroutine: events queue in the kernel and are read at the next scan.
type inotifyEvents struct {
	fd   int
	dir  *os.File // the workspace's root, open
	base string   // a path to it: through /proc/self/fd, so it stays right if the workspace is renamed
	byWD map[int32]string
}

const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

func newEvents(root *os.Root) events {
	dir, err := root.Open(".")
	if err != nil {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		dir.Close()
		return nil
	}
	return &inotifyEvents{fd: fd, dir: dir, base: "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())), byWD: map[int32]string{}}
}

func (e *inotifyEvents) watch(rel string) bool {
	p := e.base + "/." // the link /proc/self/fd/N itself is no directory
	if rel != "" {
		p = e.base + "/" + rel
	}
	wd, err := unix.InotifyAddWatch(e.fd, p, watchMask)
	if err != nil {
		return false
	}
	e.byWD[int32(wd)] = rel
	return true
}

func (e *inotifyEvents) changed() (changes, bool) {
	ch := changes{files: map[string]bool{}, dirs: map[string]bool{}, deep: map[string]bool{}}
	buf := make([]byte, 64<<10)
	lost := false
	for {
		n, err := unix.Read(e.fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil || n <= 0 {
			return ch, true
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				for i, c := range raw {
					if c == 0 {
						raw = raw[:i]
						break
					}
				}
				name = string(raw)
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
			dir, ok := e.byWD[ev.Wd]
			switch {
			case ev.Mask&(unix.IN_Q_OVERFLOW|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0:
				lost = true
			case ev.Mask&unix.IN_IGNORED != 0:
				delete(e.byWD, ev.Wd)
			case !ok:
			case name == "":
				// The directory itself: its deletion shows in its parent.
			case isIgnoreFile(name):
				ch.deep[dir] = true
			case ev.Mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0:
				ch.dirs[dir] = true
			case ev.Mask&unix.IN_ISDIR == 0:
				ch.files[path.Join(dir, name)] = true
			}
		}
	}
	return ch, lost
}

func (e *inotifyEvents) close() {
	unix.Close(e.fd)
	e.dir.Close()
}
