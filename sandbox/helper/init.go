package helper

import (
	"io"
	"time"
)

// DefaultPollInterval is how often Init checks for idleness by default.
const DefaultPollInterval = 5 * time.Second

// InitOptions configures Init.
type InitOptions struct {
	// IdleTimeout ends Init once no other process has existed for that
	// long; zero means never.
	IdleTimeout time.Duration
	// PollInterval is how often Init looks (default DefaultPollInterval).
	PollInterval time.Duration
	// Log, when set, receives a line when Init exits.
	Log io.Writer
	// Others lists the processes that keep the container busy. The default
	// is every other live process in /proc when Init is PID 1, else Init's
	// live children (Init makes itself a child subreaper, so orphaned
	// descendants count too).
	Others func() ([]int, error)
}
