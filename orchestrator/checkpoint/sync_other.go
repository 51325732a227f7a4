//go:build unix && !linux

package checkpoint

import (
	"os"
	"syscall"
)

// syncRoot flushes the file systems (no syncfs here).
func syncRoot(*os.Root) error {
	syscall.Sync()
	return nil
}
