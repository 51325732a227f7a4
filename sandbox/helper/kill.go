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

// killMarkerSession kills every process that carries one of the session's
// markers ("<sessionID>.").
func killMarkerSession(sessionID string) error {
	return KillMarker(sessionID+".", true)
}

// sessionKillWait bounds how long KillSession waits for the session's
// reapers to kill their commands and exit.
const sessionKillWait = 5 * time.Second

// KillSession kills a session's processes from outside it (`helper kill
// --session`, run in a fresh exec when the session's channel is broken or
// does not confirm a kill): it kills the session's `helper serve`, whose
// reapers then see their socket close, kill everything below them and exit;
// it continues any reaper a command stopped, waits for them to be gone, and
// kills what still carries one of the session's markers. It returns an
// error when reapers are left after sessionKillWait: the caller should then
// restart the container.
func KillSession(sessionID string) error {
	if err := ValidateSessionID(sessionID); err != nil {
		return fmt.Errorf("kill session: %w", err)
	}
	err := killSessionProcesses(sessionID, sessionKillWait)
	return errors.Join(err, killMarkerSession(sessionID))
}
