//go:build unix

package checks

import (
	"os"
	"syscall"
)

// fileOwner returns a file's uid and gid.
func fileOwner(fi os.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
