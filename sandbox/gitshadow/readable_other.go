//go:build !linux

package gitshadow

import (
	"errors"
	"io/fs"
	"os"
)

// makeReadable is Linux's (it needs O_PATH): elsewhere an unreadable
// directory stays a finding of its own.
func makeReadable(*os.Root, string) (fs.FileMode, error) { return 0, errors.ErrUnsupported }
