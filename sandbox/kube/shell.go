package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/shiroagent/shiro/sandbox"
)

var _ sandbox.Sheller = (*Sandbox)(nil)

// shellScript starts the login shell of a `shiro sandbox shell`: the
// session's environment from the file the session wrote (then removed),
// bash where the image has it, else sh.
const shellScript = `if [ -n "$SHIRO_SHELL_ENV" ]; then . "$SHIRO_SHELL_ENV"; rm -f "$SHIRO_SHELL_ENV"; fi
unset SHIRO_SHELL_ENV
if command -v bash >/dev/null 2>&1; then exec bash -l; fi
exec sh -l`

// Shell implements sandbox.Sheller: a pods/exec with a TTY in the pod the
// session uses, in the workspace (the claim's copy, as the last session
// left it), as the pod's user.
//
// An exec request names its command in the URL, which API servers may
// log, so the session's --env values do not travel there: the session
// writes them to a file on the pod's memory-backed /tmp that only the
// user reads, and the shell reads and removes it.
func (s *Sandbox) Shell(ctx context.Context, opts sandbox.ShellOptions) (int, error) {
	envFile, err := s.shellEnvFile(ctx)
	if err != nil {
		return 0, err
	}
	term := opts.Term
	if term == "" {
		term = sandbox.DefaultTerm
	}
	pod := s.Pod()
	ex, err := s.c.execWith(pod, corev1.PodExecOptions{
		Command: []string{"env", "TERM=" + term, "SHIRO_SHELL_ENV=" + envFile, "sh", "-c", shellScript},
		Stdin:   true,
		Stdout:  true,
		TTY:     true,
	})
	if err != nil {
		s.removeFile(ctx, envFile)
		return 0, fmt.Errorf("shell in %s: %w", pod, err)
	}
	// The size queue is read by a goroutine of the stream's that nothing
	// stops: its end is the end of this call.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	sizes := &termSizes{first: opts.Size, next: opts.Resize, done: sctx.Done()}
	err = ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: opts.In, Stdout: opts.Out, Tty: true, TerminalSizeQueue: sizes})
	var code utilexec.CodeExitError
	if errors.As(err, &code) {
		return code.Code, nil
	}
	if err != nil {
		s.removeFile(ctx, envFile) // the shell may not have started to read and remove it
		return 0, fmt.Errorf("shell in %s: %w", pod, err)
	}
	return 0, nil
}

// removeFile removes a file in the pod, if name is set, within a few
// seconds whether or not ctx has ended.
func (s *Sandbox) removeFile(ctx context.Context, name string) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = s.Run(ctx, sandbox.Command{Args: []string{"rm", "-f", name}})
}

// shellEnvFile writes the session's environment as a script to a file
// only the pod's user reads, through the session's channel, and returns
// its path ("" when the session adds nothing).
func (s *Sandbox) shellEnvFile(ctx context.Context) (string, error) {
	if len(s.env) == 0 {
		return "", nil
	}
	var script strings.Builder
	for _, kv := range s.env {
		name, value, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&script, "export %s=%s\n", name, shellQuote(value))
	}
	var out, errb strings.Builder
	res, err := s.Run(ctx, sandbox.Command{
		Args:   []string{"sh", "-c", `umask 077 && f=$(mktemp /tmp/shiro-shell.XXXXXX) && cat > "$f" && printf %s "$f"`},
		Stdin:  strings.NewReader(script.String()),
		Stdout: &out,
		Stderr: &errb,
	})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(errb.String()))
	}
	if err != nil {
		return "", fmt.Errorf("pass the session's environment to the shell: %w", err)
	}
	return strings.TrimSpace(out.String()), nil
}

// termSizes is a remotecommand.TerminalSizeQueue over a ShellOptions'
// sizes: the first, then each resize, until the shell ends.
type termSizes struct {
	first sandbox.TermSize
	sent  bool
	next  <-chan sandbox.TermSize
	done  <-chan struct{}
}

func (q *termSizes) Next() *remotecommand.TerminalSize {
	if !q.sent {
		q.sent = true
		if q.first.Height > 0 && q.first.Width > 0 {
			return &remotecommand.TerminalSize{Height: uint16(q.first.Height), Width: uint16(q.first.Width)}
		}
	}
	for {
		select {
		case sz, ok := <-q.next:
			if !ok {
				return nil
			}
			if sz.Height > 0 && sz.Width > 0 {
				return &remotecommand.TerminalSize{Height: uint16(sz.Height), Width: uint16(sz.Width)}
			}
		case <-q.done:
			return nil
		}
	}
}
