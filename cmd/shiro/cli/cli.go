// Package cli holds shiro's cobra commands: flags bound into options
// structs, signals turned into context cancellation, and errors mapped to
// exit codes in one place.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/moby/term"
	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/internal/termsafe"
)

// Version is shiro's version, set at build time with -ldflags.
var Version = "0.1.0-dev"

// Factory carries what every command needs from the process.
type Factory struct {
	In io.Reader
	// Out and ErrOut are what shiro prints outside the chat UI. Over the
	// real process they pass through the sanitiser (internal/termsafe):
	// on a terminal only colour and style sequences survive; to a file or
	// a pipe no escape sequence does.
	Out, ErrOut io.Writer
	// RawOut and RawErrOut are stdout and stderr as they are, for what
	// must reach them byte for byte: the chat UI and an interactive shell,
	// which draw on the terminal, and the in-container helper's channel.
	// nil means Out and ErrOut.
	RawOut, RawErrOut io.Writer
	Version           string
	Getwd             func() (string, error)
	LookupEnv         func(string) (string, bool)
}

// NewFactory returns a Factory over the real process.
func NewFactory() *Factory {
	return &Factory{
		In: os.Stdin, Out: printable(os.Stdout), ErrOut: printable(os.Stderr),
		RawOut: os.Stdout, RawErrOut: os.Stderr,
		Version:   Version,
		Getwd:     os.Getwd,
		LookupEnv: os.LookupEnv,
	}
}

// printable is f through the sanitiser: SGR survives on a terminal,
// nothing but text, tabs and newlines elsewhere.
func printable(f *os.File) io.Writer {
	_, isTerm := term.GetFdInfo(f)
	return termsafe.NewWriter(f, termsafe.Mode{SGR: isTerm})
}

// raw returns stdout and stderr as they are (see RawOut).
func (f *Factory) raw() (out, errOut io.Writer) {
	out, errOut = f.RawOut, f.RawErrOut
	if out == nil {
		out = f.Out
	}
	if errOut == nil {
		errOut = f.ErrOut
	}
	return out, errOut
}

// terminal is the writer the chat UI and an interactive shell draw on.
func (f *Factory) terminal() io.Writer {
	out, _ := f.raw()
	return out
}

// ExitError ends the process with Code after its message (if any) is printed.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// errSilent is an ExitError whose message was already shown.
func errSilent(code int) error { return &ExitError{Code: code} }

// signalCause is the cancellation cause when a signal arrives.
type signalCause struct{ sig syscall.Signal }

func (s signalCause) Error() string { return "interrupted by " + s.sig.String() }

// Main runs shiro and returns the process exit code.
func Main() int {
	f := NewFactory()
	ctx, stop := signalContext(context.Background(), f.ErrOut)
	defer stop()
	root := NewCmdRoot(f)
	err := root.ExecuteContext(ctx)
	return exitCode(ctx, err, f.ErrOut)
}

// signalContext cancels ctx on the first SIGINT or SIGTERM. A third signal
// forces the exit (the terminal is restored by whoever made it raw, through
// the same context, before that).
func signalContext(parent context.Context, errOut io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case s := <-sigs:
				n++
				sig, _ := s.(syscall.Signal)
				if n == 1 {
					cancel(signalCause{sig})
				}
				if n >= 3 {
					fmt.Fprintln(errOut, "shiro: forced exit")
					os.Exit(128 + int(sig))
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// exitCode maps the outcome of a command to an exit code, printing the
// error once: 0 ok, 1 failure, 2 usage, 128+n after signal n.
func exitCode(ctx context.Context, err error, errOut io.Writer) int {
	var sc signalCause
	signalled := errors.As(context.Cause(ctx), &sc)
	code, msg := 0, err
	var ee *ExitError
	var ue *usageError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code, msg = ee.Code, ee.Err
	case errors.As(err, &ue):
		code = 2
	default:
		code = 1
	}
	if msg != nil && !(signalled && errors.Is(msg, context.Canceled)) {
		fmt.Fprintln(errOut, "shiro:", msg)
	}
	if signalled {
		return 128 + int(sc.sig)
	}
	return code
}

// usageError is a command line the command cannot run (exit 2).
type usageError struct{ err error }

func (u *usageError) Error() string { return u.err.Error() }
func (u *usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// flagErrors turn bad flags into usage errors.
func flagErrors(_ *cobra.Command, err error) error { return &usageError{err} }
