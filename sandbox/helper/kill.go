package helper

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Kill scans: after a scan that signalled something, scan again (children
// forked meanwhile, processes still dying) until one finds nothing.
const (
	killScans     = 50
	killScanPause = 2 * time.Millisecond
)

// KillMarker sends SIGKILL to every process whose environment holds
// MarkerEnv=value, or, with prefix, a MarkerEnv value starting with value.
// It scans /proc until a scan finds no such process. Processes that vanish
// or that it may not read are skipped.
func KillMarker(value string, prefix bool) error {
	if value == "" {
		return errors.New("kill marker: empty marker")
	}
	want := []byte(MarkerEntry(value))
	match := func(environ []byte) bool {
		for len(environ) > 0 {
			entry, rest, _ := bytes.Cut(environ, []byte{0})
			environ = rest
			if prefix && bytes.HasPrefix(entry, want) || !prefix && bytes.Equal(entry, want) {
				return true
			}
		}
		return false
	}
	for range killScans {
		n, err := killMatching(match)
		if err != nil {
			return fmt.Errorf("kill marker %s: %w", value, err)
		}
		if n == 0 {
			return nil
		}
		time.Sleep(killScanPause)
	}
	return fmt.Errorf("kill marker %s: processes still alive after %d scans", value, killScans)
}

// KillSession kills every process of the session: those whose marker starts
// with "<sessionID>.".
func KillSession(sessionID string) error {
	if err := ValidateSessionID(sessionID); err != nil {
		return fmt.Errorf("kill session: %w", err)
	}
	return KillMarker(sessionID+".", true)
}

// killTree kills a command's process group, then every process that carries
// its marker.
func killTree(pid int, marker string) error {
	return errors.Join(killGroup(pid), KillMarker(marker, false))
}
