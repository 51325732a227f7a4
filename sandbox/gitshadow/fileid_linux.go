package gitshadow

import (
	"io/fs"
	"syscall"
)

// fileID returns a file's inode and change time (nanoseconds).
func fileID(fi fs.FileInfo) (uint64, int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fi.ModTime().UnixNano()
	}
	return st.Ino, st.Ctim.Sec*1e9 + st.Ctim.Nsec
}

// keyOf returns a file's identity: its device and inode.
func keyOf(fi fs.FileInfo) (FileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileKey{}, false
	}
	return FileKey{Dev: uint64(st.Dev), Ino: st.Ino}, true
}
