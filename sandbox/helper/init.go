package helper

import (
	"io"
	"time"
)

// DefaultPollInterval is how often Init looks at the processes by default.
const DefaultPollInterval = time.Second

// InitOptions configures Init.
type InitOptions struct {
	// IdleTimeout ends Init once no session has been open for that long;
	// zero means never.
	IdleTimeout time.Duration
	// PollInterval is how often Init counts the sessions (default
	// DefaultPollInterval, or a quarter of IdleTimeout when that is
	// shorter).
	PollInterval time.Duration
	// Log, when set, receives a line when Init kills processes and when it
	// exits.
	Log io.Writer
	// Sessions counts the open sessions. The default counts the processes
	// started from outside the container's pid namespace (docker exec):
	// those whose parent pid is 0.
	Sessions func() (int, error)
}

func (o InitOptions) pollInterval() time.Duration {
	if o.PollInterval > 0 {
		return o.PollInterval
	}
	poll := DefaultPollInterval
	if q := o.IdleTimeout / 4; o.IdleTimeout > 0 && q < poll {
		poll = max(q, 10*time.Millisecond)
	}
	return poll
}
