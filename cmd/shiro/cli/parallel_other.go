//go:build !linux

package cli

import "syscall"

// childAttrs leaves an agent's shiro as it is where the kernel has no
// parent-death signal: it stays in the terminal's process group, so a
// ctrl-c there reaches it as well as the parent.
func childAttrs() *syscall.SysProcAttr { return nil }
