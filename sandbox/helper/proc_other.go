//go:build !linux

package helper

import (
	"errors"
	"os"
	"syscall"
)

const supported = false

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(int) error { return errors.ErrUnsupported }

func waitExited(int) {}

func killMatching(func([]byte) bool) (int, error) { return 0, errors.ErrUnsupported }

func exitStatus(ps *os.ProcessState) (int, string) { return ps.ExitCode(), "" }

func readAvailable(*os.File, []byte) int { return -1 }
