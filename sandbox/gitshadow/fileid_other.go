//go:build !linux && !darwin

package gitshadow

import (
	"io/fs"
	"time"
)

// fileID has neither an inode nor a change time to give here: it returns
// the current time, so that every scan re-reads every directory.
func fileID(fs.FileInfo) (uint64, int64) { return 0, time.Now().UnixNano() }

// keyOf has no identity to give here: protection falls back to paths.
func keyOf(fs.FileInfo) (FileKey, bool) { return FileKey{}, false }
