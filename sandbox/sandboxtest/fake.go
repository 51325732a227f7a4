// Package sandboxtest holds what tests share about sandboxes: Fake, a
// sandbox.Sandbox made of funcs for tests of code that runs commands, and
// Run, the conformance suite every implementation passes.
package sandboxtest

import (
	"context"
	"errors"
	"io"

	"github.com/shiroagent/shiro/sandbox"
)

// Fake is a sandbox.Sandbox whose methods call its fields.
type Fake struct {
	// RunFunc answers Run; nil makes Run fail.
	RunFunc func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error)
	// InfoValue is what Info returns.
	InfoValue sandbox.Info
	// CloseFunc answers Close; nil returns nil.
	CloseFunc func() error
}

var _ sandbox.Sandbox = (*Fake)(nil)

// Run implements sandbox.Sandbox.
func (f *Fake) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	if f.RunFunc == nil {
		return sandbox.Result{}, errors.New("sandboxtest: Fake.RunFunc is not set")
	}
	return f.RunFunc(ctx, cmd)
}

// Info implements sandbox.Sandbox.
func (f *Fake) Info() sandbox.Info { return f.InfoValue }

// Close implements sandbox.Sandbox.
func (f *Fake) Close() error {
	if f.CloseFunc == nil {
		return nil
	}
	return f.CloseFunc()
}

// Reply returns a RunFunc that writes stdout and stderr to the command's
// writers and exits with code.
func Reply(stdout, stderr string, code int) func(context.Context, sandbox.Command) (sandbox.Result, error) {
	return func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		for _, o := range []struct {
			w io.Writer
			s string
		}{{cmd.Stdout, stdout}, {cmd.Stderr, stderr}} {
			if o.w != nil && o.s != "" {
				if _, err := io.WriteString(o.w, o.s); err != nil {
					return sandbox.Result{}, err
				}
			}
		}
		return sandbox.Result{ExitCode: code}, nil
	}
}
