package checkpoint

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncRoot flushes the file system that holds root.
func syncRoot(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}
