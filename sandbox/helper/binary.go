package helper

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
)

// BinaryEnv names the environment variable that chooses the helper binary
// the engines deliver into sandboxes.
const BinaryEnv = "SHIRO_HELPER"

// FindBinary finds the helper to deliver into sandboxes: $SHIRO_HELPER,
// else the small shiro-helper beside the running executable (make build
// puts it there), else the executable itself, which carries the same
// helper behind `shiro helper`.
func FindBinary() (string, error) {
	if h := os.Getenv(BinaryEnv); h != "" {
		return h, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the shiro binary to copy into the sandbox: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	beside := filepath.Join(filepath.Dir(exe), "shiro-helper")
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() {
		return beside, nil
	}
	return exe, nil
}

// CheckStatic reports a helper binary that cannot run in any Linux image:
// one that is not a Linux executable, or is dynamically linked.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("helper binary %s is not a Linux executable (build shiro for linux with CGO_ENABLED=0 and set SHIRO_HELPER): %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("helper binary %s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}
