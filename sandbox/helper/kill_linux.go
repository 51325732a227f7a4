package helper

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// killSessionProcesses kills the session's `helper serve` processes and
// continues its reapers until none of either is left, or wait has passed.
func killSessionProcesses(sessionID string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	self := os.Getpid()
	for {
		pids, err := listPids()
		if err != nil {
			return fmt.Errorf("kill session %s: %w", sessionID, err)
		}
		left := 0
		for _, pid := range pids {
			if pid == self {
				continue
			}
			role := sessionRole(cmdline(pid), sessionID)
			if role == "" {
				continue
			}
			left++
			still := func() bool { return sessionRole(cmdline(pid), sessionID) == role }
			sig := unix.SIGKILL
			if role == roleReap {
				sig = unix.SIGCONT // it was told (EOF) to kill its commands and exit
			}
			_ = signalIf(pid, sig, still)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill session %s: %d of its processes still alive after %v", sessionID, left, wait)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc for the reapers to finish
	}
}

// What a process is to a session, by its command line.
const (
	roleServe = "serve"
	roleReap  = "reap"
)

// sessionRole says whether argv is the `helper serve` or a reaper of
// sessionID (roleServe, roleReap), or neither (""). A zombie's empty argv is
// neither.
func sessionRole(argv []string, sessionID string) string {
	ours := false
	for i, a := range argv {
		if a == "--session="+sessionID || a == "--session" && i+1 < len(argv) && argv[i+1] == sessionID {
			ours = true
		}
	}
	if !ours {
		return ""
	}
	for _, a := range argv {
		switch {
		case a == "serve":
			return roleServe
		case a == "reap", a == reapMainArg:
			return roleReap
		case strings.HasPrefix(a, "--"):
			return "" // the subcommand comes before the flags
		}
	}
	return ""
}
