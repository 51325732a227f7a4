package checkpoint

import (
	"io/fs"
	"syscall"

	"github.com/shiroagent/shiro/tools"
)

// statOf turns lstat data into the walker's form (tools.WalkStat's).
func statOf(fi fs.FileInfo) (tools.FileStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return tools.FileStat{}, false
	}
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFREG:
	default:
		mode |= fs.ModeIrregular
	}
	return tools.FileStat{
		Mode: mode, Size: st.Size,
		MTime: st.Mtim.Nano(), CTime: st.Ctim.Nano(),
		Ino: st.Ino, Dev: uint64(st.Dev),
	}, true
}
