package gitshadow

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// makeReadable gives the owner of the directory rel (under root) read and
// search permission, without following a symlink at rel, and returns the
// mode it had. A directory the caller does not own stays as it was (an
// error).
func makeReadable(root *os.Root, rel string) (fs.FileMode, error) {
	if rel == "." {
		// The workspace itself: root holds it, so nothing can be swapped
		// in its place, and it needs no reading to be changed.
		fi, err := root.Stat(".")
		if err != nil {
			return 0, err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != uint32(os.Geteuid()) {
			return fi.Mode(), fmt.Errorf("the workspace is not yours")
		}
		return fi.Mode(), root.Chmod(".", fi.Mode().Perm()|0o500)
	}
	parent, err := root.Open(path.Dir(rel))
	if err != nil {
		return 0, err
	}
	defer parent.Close()
	// O_PATH opens what cannot be read; O_NOFOLLOW and O_DIRECTORY make
	// sure it is the directory itself.
	fd, err := unix.Openat(int(parent.Fd()), path.Base(rel), unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", rel, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", rel, err)
	}
	mode := fs.FileMode(st.Mode & 0o7777)
	if st.Uid != uint32(os.Geteuid()) {
		return mode, fmt.Errorf("%s is not yours", rel)
	}
	// fchmod does not take an O_PATH descriptor; its /proc link names the
	// same inode.
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), uint32(mode|0o500)); err != nil {
		return mode, fmt.Errorf("chmod %s: %w", rel, err)
	}
	return mode, nil
}
