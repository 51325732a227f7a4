package workspace

import (
	"fmt"
	"io/fs"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PathID is the identity (see FileID) of the directory at path now. A path
// that reaches it through a symlink (a $PWD with one) names the directory.
func PathID(path string) (string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("stat the workspace %s: %w", path, &fs.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(fd)
	return fdID(fd, path)
}

// FileID names the open directory f as an object, not only a path: a
// repository removed and made again at the same path is a new directory
// (another inode, another birth time), so it gets a fresh HOME and fresh
// state. name is the directory's path, for errors.
func FileID(f *os.File, name string) (string, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", fmt.Errorf("stat the workspace %s: %w", name, err)
	}
	var id string
	var idErr error
	if err := rc.Control(func(raw uintptr) { id, idErr = fdID(int(raw), name) }); err != nil {
		return "", fmt.Errorf("stat the workspace %s: %w", name, err)
	}
	return id, idErr
}

func fdID(fd int, name string) (string, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO|unix.STATX_BTIME, &stx); err != nil {
		return "", fmt.Errorf("stat the workspace %s: %w", name, err)
	}
	id := fmt.Sprintf("%d:%d:%d", unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino, stx.Btime.Sec)
	if stx.Mask&unix.STATX_BTIME != 0 {
		id += fmt.Sprintf(".%d", stx.Btime.Nsec)
	}
	// The birth time ticks with the kernel's coarse clock, so a directory
	// removed and made again within one tick can get the same inode and
	// the same birth time. Filesystems that number inode generations
	// (ext4, xfs, btrfs) tell the two apart.
	if gen, err := unix.IoctlGetUint32(fd, fsIocGetVersion); err == nil {
		id += fmt.Sprintf(":g%d", gen)
	}
	return id, nil
}

// fsIocGetVersion is FS_IOC_GETVERSION, _IOR('v', 1, long); x/sys does not
// define it. The kernel answers with an int.
const fsIocGetVersion = 0x80007601 | uint(unsafe.Sizeof(uintptr(0)))<<16
