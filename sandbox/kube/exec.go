package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// executor makes a pods/exec stream of argv in the sandbox container.
func (c *Cluster) executor(pod string, argv []string, stdin, stderr bool) (remotecommand.Executor, error) {
	return c.execWith(pod, corev1.PodExecOptions{Command: argv, Stdin: stdin, Stdout: true, Stderr: stderr})
}

// execWith makes a pods/exec stream in the sandbox container: WebSocket,
// falling back to SPDY where the API server (or a proxy in between) does
// not upgrade to it. The exec runs as the pod's user: the API cannot
// choose another.
func (c *Cluster) execWith(pod string, o corev1.PodExecOptions) (remotecommand.Executor, error) {
	o.Container = mainContainer
	req := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.ns).Name(pod).SubResource("exec").
		VersionedParams(&o, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(c.cfg, "GET", req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("exec in %s: %w", pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.cfg, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("exec in %s: %w", pod, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("exec in %s: %w", pod, err)
	}
	return ex, nil
}

// stream is a long-lived exec: its stdin and stdout as a pipe pair. It is
// owned by whoever started it and ends with close.
type stream struct {
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{} // closed when the exec ended; err is set before
	err    error

	closeOnce sync.Once
}

// startStream starts argv and returns its streams; stderr receives the
// process's stderr. The exec lives until close (or until it ends), not
// until ctx: ctx bounds only the start.
func (c *Cluster) startStream(ctx context.Context, pod string, argv []string, stderr io.Writer) (*stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ex, err := c.executor(pod, argv, true, true)
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &stream{stdin: inW, stdout: outR, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		err := ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: stderr})
		s.err = err
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err)
		inR.CloseWithError(err)
	}()
	return s, nil
}

// closeStdin half-closes the exec: the process reads EOF.
func (s *stream) closeStdin() error {
	_ = s.stdin.Close()
	return nil
}

// close ends the exec: EOF on its stdin, a few seconds for the process to
// finish, then the connection is cut.
func (s *stream) close(wait time.Duration) {
	s.closeOnce.Do(func() {
		_ = s.stdin.Close()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
		}
		s.cancel()
		<-s.done
		_ = s.stdout.Close()
	})
}

// Exec runs argv in a pod's sandbox container through a pods/exec of its
// own (no session, no stdin), discards its output and returns its exit
// code: a bare exec round trip.
func (c *Cluster) Exec(ctx context.Context, pod string, argv []string) (int, error) {
	ex, err := c.executor(pod, argv, false, true)
	if err != nil {
		return 0, err
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
	var code utilexec.CodeExitError
	if errors.As(err, &code) {
		return code.Code, nil
	}
	if err != nil {
		return 0, fmt.Errorf("exec in %s: %w", pod, err)
	}
	return 0, nil
}
