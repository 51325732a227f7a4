package docker

import (
	"context"
	"fmt"
	"io"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox"
)

var _ sandbox.Sheller = (*Sandbox)(nil)

// Shell runs an interactive login shell in the workspace container with a
// TTY and returns its exit code.
func (s *Sandbox) Shell(ctx context.Context, opts sandbox.ShellOptions) (int, error) {
	s.conn.Lock()
	c := s.c
	s.conn.Unlock()
	shell := []string{"bash", "-l"}
	if _, err := s.e.api.ContainerStatPath(ctx, c.id, client.ContainerStatPathOptions{Path: "/bin/bash"}); err != nil {
		shell = []string{"sh", "-l"}
	}
	term := opts.Term
	if term == "" {
		term = sandbox.DefaultTerm
	}
	env := append(baseEnv(s.opts, c.path), "TERM="+term)
	size := client.ConsoleSize{Height: opts.Size.Height, Width: opts.Size.Width}
	ex, err := s.e.api.ExecCreate(ctx, c.id, client.ExecCreateOptions{
		User:         fmt.Sprintf("%d:%d", s.opts.UID, s.opts.GID),
		TTY:          true,
		ConsoleSize:  size,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Env:          env,
		WorkingDir:   s.opts.Workspace,
		Cmd:          shell,
	})
	if err != nil {
		return 0, fmt.Errorf("create shell in %s: %w", c.name, err)
	}
	att, err := s.e.api.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{TTY: true, ConsoleSize: size})
	if err != nil {
		return 0, fmt.Errorf("attach shell in %s: %w", c.name, err)
	}
	defer att.Close()
	// Engines before API 1.42 ignore the console size given at creation:
	// set it once the exec runs.
	if opts.Size.Height > 0 && opts.Size.Width > 0 {
		_, _ = s.e.api.ExecResize(ctx, ex.ID, client.ExecResizeOptions{Height: opts.Size.Height, Width: opts.Size.Width})
	}

	// The input copy ends when the connection closes (the shell exited) or
	// when the input ends; a terminal read blocked at that moment ends with
	// the process, which exits right after Shell returns.
	go func() {
		_, _ = io.Copy(att.Conn, opts.In)
		_ = att.CloseWrite()
	}()
	resizeDone := make(chan struct{})
	defer close(resizeDone)
	go func() {
		for {
			select {
			case sz, ok := <-opts.Resize:
				if !ok {
					return
				}
				_, _ = s.e.api.ExecResize(ctx, ex.ID, client.ExecResizeOptions{Height: sz.Height, Width: sz.Width})
			case <-resizeDone:
				return
			}
		}
	}()
	if _, err := io.Copy(opts.Out, att.Reader); err != nil && ctx.Err() == nil {
		return 0, fmt.Errorf("shell output: %w", err)
	}
	in, err := s.e.api.ExecInspect(context.WithoutCancel(ctx), ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("inspect shell: %w", err)
	}
	return in.ExitCode, nil
}
