//go:build !linux

package checkpoint

import (
	"io/fs"

	"github.com/shiroagent/shiro/tools"
)

// statOf has no events to serve here (they are Linux only).
func statOf(fs.FileInfo) (tools.FileStat, bool) { return tools.FileStat{}, false }
