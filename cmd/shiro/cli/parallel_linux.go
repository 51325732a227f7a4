package cli

import "syscall"

// childAttrs puts an agent's shiro in a process group of its own (a
// terminal's ctrl-c reaches the parent, which forwards it once) and has
// the kernel send it SIGTERM should the parent die without forwarding.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
