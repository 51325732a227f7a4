//go:build !linux

package helper

import (
	"errors"
	"os"
	"syscall"
	"time"
)

const supported = false

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(int) error { return errors.ErrUnsupported }

func waitExited(int) {}

func killMatching(func([]byte) bool) (int, error) { return 0, errors.ErrUnsupported }

func processExit(ps *os.ProcessState) (int, string) { return ps.ExitCode(), "" }

func readAvailable(*os.File, []byte) int { return -1 }

func killSessionProcesses(string, time.Duration) error { return errors.ErrUnsupported }

// Reap is a command's reaper; it needs Linux.
func Reap(*os.File, ReapOptions) error { return errors.ErrUnsupported }

// Reapers need Linux: a Runner never makes a pool elsewhere.
type reaperPool struct{}

func newReaperPool([]string) *reaperPool { return nil }

func (*reaperPool) get() (*reaper, error)  { return nil, errors.ErrUnsupported }
func (*reaperPool) warm() error            { return errors.ErrUnsupported }
func (*reaperPool) closeAll()              {}
func (*reaperPool) wait()                  {}
func (*reaperPool) killOrphans(bool) error { return errors.ErrUnsupported }

type reaper struct{}

var errNotSent = errors.ErrUnsupported

func (*reaper) start(*Process, reapMsg, []*os.File) error { return errors.ErrUnsupported }
func (*reaper) kill(uint64) error                         { return errors.ErrUnsupported }

func (*server) ownProcess() (func(), error) { return nil, errors.ErrUnsupported }

func notDumpable() {}
