//go:build unix

package mcp

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a process group of its own, out of the
// terminal's foreground group, so that the ctrl-c that interrupts a turn
// does not kill the server.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
