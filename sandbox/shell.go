package sandbox

import (
	"context"
	"io"
)

// TermSize is a terminal's size in character cells.
type TermSize struct{ Height, Width uint }

// ShellOptions connect an interactive shell to a terminal.
type ShellOptions struct {
	In     io.Reader
	Out    io.Writer
	Size   TermSize
	Resize <-chan TermSize // sizes after a resize; may be nil
	Term   string          // TERM inside; default DefaultTerm
}

// DefaultTerm is TERM in a shell whose options name none.
const DefaultTerm = "xterm-256color"

// Sheller is a sandbox that opens an interactive login shell in the
// workspace (`shiro sandbox shell`).
type Sheller interface {
	// Shell runs the shell with a TTY until it exits and returns its
	// exit code.
	Shell(ctx context.Context, opts ShellOptions) (int, error)
}
