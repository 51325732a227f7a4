package helper_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

// channelSandbox is a sandbox.Sandbox over a Client talking to Serve
// through in-memory pipes, as sandbox/docker talks to the helper through
// docker exec.
type channelSandbox struct {
	*helper.Client
	workspace string
	served    chan struct{}
	serveErr  error
	cancel    context.CancelFunc
}

func (s *channelSandbox) Info() sandbox.Info {
	return sandbox.Info{Kind: "channel", Workspace: s.workspace}
}

// Close closes the client, which ends Serve, and waits for Serve.
func (s *channelSandbox) Close() error {
	err := s.Client.Close()
	<-s.served
	return errors.Join(err, s.serveErr)
}

func newChannelSandbox(t *testing.T, opts ...helper.ClientOption) *channelSandbox {
	t.Helper()
	ws := t.TempDir()
	toHelper, fromHost := io.Pipe()
	toHost, fromHelper := io.Pipe()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	s := &channelSandbox{workspace: ws, served: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(s.served)
		s.serveErr = helper.Serve(ctx, toHelper, fromHelper, helper.ServeOptions{SessionID: helper.NewSessionID(), Dir: ws, Env: sandboxtest.HostEnv(t), Reaper: helper.SelfReaper()})
		fromHelper.Close()
		toHelper.Close()
	}()
	s.Client = helper.NewClient(toHost, fromHost, opts...)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		cancel()
	})
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return newChannelSandbox(t) })
}

func TestRunnerConformance(t *testing.T) {
	t.Parallel()
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return newRunnerSandbox(t) })
}

// runnerSandbox is the bare Runner as a sandbox.Sandbox.
type runnerSandbox struct {
	*helper.Runner
	workspace string
	mu        sync.Mutex
	closed    bool
}

func newRunnerSandbox(t *testing.T) *runnerSandbox {
	ws := t.TempDir()
	r, err := helper.NewRunner(helper.NewSessionID(), helper.WithDir(ws), helper.WithEnv(sandboxtest.HostEnv(t)), helper.WithReaper(helper.SelfReaper()))
	if err != nil {
		t.Fatal(err)
	}
	s := &runnerSandbox{Runner: r, workspace: ws}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (s *runnerSandbox) Run(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return sandbox.Result{}, sandbox.ErrClosed
	}
	return s.Runner.Run(ctx, cmd)
}

func (s *runnerSandbox) Info() sandbox.Info {
	return sandbox.Info{Kind: "runner", Workspace: s.workspace}
}

func (s *runnerSandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return s.KillSession()
}

func TestClientStreamsStdinAndOutput(t *testing.T) {
	t.Parallel()
	sb := newChannelSandbox(t)
	stdinR, stdinW := io.Pipe()
	lines := make(chan string, 4)
	out := writerFunc(func(p []byte) (int, error) {
		for l := range strings.Lines(string(p)) {
			lines <- l
		}
		return len(p), nil
	})
	done := make(chan error, 1)
	go func() {
		res, err := sb.Run(t.Context(), sandbox.Command{Args: []string{"cat"}, Stdin: stdinR, Stdout: out})
		if err == nil && res.ExitCode != 0 {
			err = errors.New("cat failed")
		}
		done <- err
	}()
	// Each line must come back before the next is sent: output is live.
	for _, l := range []string{"one\n", "two\n"} {
		if _, err := io.WriteString(stdinW, l); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-lines:
			if got != l {
				t.Fatalf("echoed %q, want %q", got, l)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q not echoed within 10s", l)
		}
	}
	stdinW.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// fakeHelper answers a Client's requests by hand.
type fakeHelper struct {
	dec *json.Decoder
	enc *json.Encoder
	out *io.PipeWriter
}

func newFakeHelper(t *testing.T, opts ...helper.ClientOption) (*helper.Client, *fakeHelper) {
	t.Helper()
	toHelper, fromHost := io.Pipe()
	toHost, fromHelper := io.Pipe()
	c := helper.NewClient(toHost, fromHost, opts...)
	t.Cleanup(func() {
		fromHelper.Close()
		toHelper.Close()
		_ = c.Close()
	})
	return c, &fakeHelper{dec: json.NewDecoder(toHelper), enc: json.NewEncoder(fromHelper), out: fromHelper}
}

func (f *fakeHelper) next(t *testing.T, typ string) helper.Message {
	t.Helper()
	var m helper.Message
	if err := f.dec.Decode(&m); err != nil {
		t.Errorf("fake helper: read %s: %v", typ, err)
		return m
	}
	if m.Type != typ {
		t.Errorf("fake helper: got %q, want %q", m.Type, typ)
	}
	return m
}

func (f *fakeHelper) send(t *testing.T, m helper.Message) {
	t.Helper()
	if err := f.enc.Encode(m); err != nil {
		t.Errorf("fake helper: send %s: %v", m.Type, err)
	}
}

func TestClientKillTimeout(t *testing.T) {
	t.Parallel()
	c, fake := newFakeHelper(t, helper.WithKillWait(100*time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	fakeDone := make(chan struct{})
	go func() {
		defer close(fakeDone)
		run := fake.next(t, helper.TypeRun)
		fake.send(t, helper.Message{ID: run.ID, Type: helper.TypeStarted, Marker: "sess.7"})
		fake.send(t, helper.Message{ID: run.ID, Type: helper.TypeOut, Stream: helper.StreamStdout, Data: []byte("started\n")})
		fake.next(t, helper.TypeKill) // and never answer it
	}()
	out := &syncBuffer{}
	out.onWrite = cancel
	start := time.Now()
	res, err := c.Run(ctx, sandbox.Command{Shell: "sleep 360", Stdout: out})
	var kerr *helper.KillTimeoutError
	if !errors.Is(err, helper.ErrKillTimeout) || !errors.Is(err, context.Canceled) || !errors.As(err, &kerr) || kerr.Marker != "sess.7" {
		t.Fatalf("Run = %v, want ErrKillTimeout for marker sess.7 and context.Canceled", err)
	}
	if !res.Interrupted {
		t.Errorf("Result = %+v, want Interrupted", res)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Run took %v with a 100ms kill wait", took)
	}
	// A late exit for the abandoned call is ignored; the channel still works.
	<-fakeDone
	fake.send(t, helper.Message{ID: 1, Type: helper.TypeExit, Result: &sandbox.Result{}})
	go func() {
		run := fake.next(t, helper.TypeRun)
		fake.send(t, helper.Message{ID: run.ID, Type: helper.TypeExit, Result: &sandbox.Result{ExitCode: 4}})
	}()
	if res, err := c.Run(t.Context(), sandbox.Command{Shell: "exit 4"}); err != nil || res.ExitCode != 4 {
		t.Errorf("next Run = %+v, %v; want exit 4", res, err)
	}
}

func TestClientChannelClosed(t *testing.T) {
	t.Parallel()
	c, fake := newFakeHelper(t)
	cause := errors.New("connection reset")
	go func() {
		fake.next(t, helper.TypeRun)
		fake.out.CloseWithError(cause)
	}()
	_, err := c.Run(t.Context(), sandbox.Command{Shell: "sleep 361"})
	if !errors.Is(err, helper.ErrChannelClosed) || !errors.Is(err, cause) {
		t.Errorf("Run = %v, want ErrChannelClosed wrapping the cause", err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the stream broke")
	}
	if _, err := c.Run(t.Context(), sandbox.Command{Shell: "true"}); !errors.Is(err, helper.ErrChannelClosed) {
		t.Errorf("Run after the break = %v, want ErrChannelClosed", err)
	}
}

func TestClientRemoteErrors(t *testing.T) {
	t.Parallel()
	c, fake := newFakeHelper(t)
	tests := []struct {
		name string
		msg  helper.Message
		want error
	}{
		{"no shell", helper.Message{Type: helper.TypeExit, Error: "no shell", Code: helper.CodeNoShell}, sandbox.ErrNoShell},
		{"refused request", helper.Message{Type: helper.TypeError, Error: "run: id 1 is already running"}, nil},
	}
	for _, tt := range tests { // sequential: one fake stream
		t.Run(tt.name, func(t *testing.T) {
			go func() {
				run := fake.next(t, helper.TypeRun)
				m := tt.msg
				m.ID = run.ID
				fake.send(t, m)
			}()
			_, err := c.Run(t.Context(), sandbox.Command{Shell: "x"})
			var rerr *helper.RemoteError
			if !errors.As(err, &rerr) || rerr.Msg != tt.msg.Error || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("Run = %v, want RemoteError %q matching %v", err, tt.msg.Error, tt.want)
			}
		})
	}
}

func TestServeProtocol(t *testing.T) {
	t.Parallel()
	toHelper, fromHost := io.Pipe()
	toHost, fromHelper := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- helper.Serve(t.Context(), toHelper, fromHelper, helper.ServeOptions{SessionID: helper.NewSessionID(), Dir: t.TempDir(), Env: sandboxtest.HostEnv(t), Reaper: helper.SelfReaper()})
		fromHelper.Close()
	}()
	enc, dec := json.NewEncoder(fromHost), json.NewDecoder(toHost)
	send := func(m helper.Message) {
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() helper.Message {
		var m helper.Message
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	send(helper.Message{ID: 9, Type: "bogus"})
	if m := recv(); m.ID != 9 || m.Type != helper.TypeError || !strings.Contains(m.Error, "bogus") {
		t.Errorf("unknown type answered with %+v", m)
	}
	send(helper.Message{ID: 1, Type: helper.TypeRun, Shell: "echo hi; exec sleep 362"})
	if m := recv(); m.ID != 1 || m.Type != helper.TypeStarted || !strings.HasSuffix(m.Marker, ".1") || m.Pid == 0 {
		t.Errorf("started = %+v", m)
	}
	if m := recv(); m.Type != helper.TypeOut || m.Stream != helper.StreamStdout || string(m.Data) != "hi\n" {
		t.Errorf("out = %+v", m)
	}
	send(helper.Message{ID: 1, Type: helper.TypeRun, Shell: "true"})
	if m := recv(); m.ID != 1 || m.Type != helper.TypeError {
		t.Errorf("duplicate id answered with %+v", m)
	}
	send(helper.Message{ID: 1, Type: helper.TypeKill})
	if m := recv(); m.ID != 1 || m.Type != helper.TypeExit || m.Result == nil || !m.Result.Interrupted || m.Result.Signal != "SIGKILL" || m.Error != "" {
		t.Errorf("exit after kill = %+v (result %+v)", m, m.Result)
	}
	send(helper.Message{ID: 2, Type: helper.TypeRun, Args: []string{"shiro-no-such-binary"}})
	if m := recv(); m.Type != helper.TypeExit || m.Code != helper.CodeNotFound || m.Result != nil {
		t.Errorf("exit of a missing binary = %+v", m)
	}
	fromHost.Close()
	var extra []helper.Message
	for {
		var m helper.Message
		if err := dec.Decode(&m); err != nil {
			if err != io.EOF {
				t.Errorf("after the session: read %v, want EOF", err)
			}
			break
		}
		extra = append(extra, m)
	}
	if len(extra) > 0 {
		t.Errorf("unexpected messages: %+v", extra)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve at EOF = %v, want nil", err)
	}
}

func TestServeContextKillsSession(t *testing.T) {
	t.Parallel()
	toHelper, fromHost := io.Pipe()
	toHost, fromHelper := io.Pipe()
	defer fromHost.Close()
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() {
		served <- helper.Serve(ctx, toHelper, fromHelper, helper.ServeOptions{SessionID: helper.NewSessionID(), Dir: t.TempDir(), Env: sandboxtest.HostEnv(t), Reaper: helper.SelfReaper()})
		fromHelper.Close()
	}()
	c := helper.NewClient(toHost, fromHost)
	defer c.Close()
	out := &syncBuffer{}
	out.onWrite = cancel // cancel Serve's context once the command runs
	res, err := c.Run(t.Context(), sandbox.Command{Shell: "echo up; sleep 363", Stdout: out})
	if !errors.Is(err, helper.ErrChannelClosed) || !res.Interrupted {
		t.Errorf("Run = %+v, %v; want Interrupted and ErrChannelClosed", res, err)
	}
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve = %v, want context.Canceled", err)
	}
	toHelper.Close() // end Serve's reader
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// syncBuffer is a goroutine-safe buffer that calls onWrite after each write.
type syncBuffer struct {
	mu      sync.Mutex
	b       strings.Builder
	onWrite func()
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.b.Write(p)
	b.mu.Unlock()
	if b.onWrite != nil {
		b.onWrite()
	}
	return len(p), nil
}

func BenchmarkClientRoundTrip(b *testing.B) {
	toHelper, fromHost := io.Pipe()
	toHost, fromHelper := io.Pipe()
	c := helper.NewClient(toHost, fromHost)
	go func() { // a helper that answers every run at once
		defer fromHelper.Close()
		dec, enc := json.NewDecoder(toHelper), json.NewEncoder(fromHelper)
		for {
			var m helper.Message
			if dec.Decode(&m) != nil {
				return
			}
			_ = enc.Encode(helper.Message{ID: m.ID, Type: helper.TypeOut, Stream: 1, Data: []byte("ok\n")})
			_ = enc.Encode(helper.Message{ID: m.ID, Type: helper.TypeExit, Result: &sandbox.Result{}})
		}
	}()
	defer c.Close()
	cmd := sandbox.Command{Args: []string{"true"}, Stdout: io.Discard}
	for b.Loop() {
		if _, err := c.Run(b.Context(), cmd); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkServeRunTrue(b *testing.B) {
	toHelper, fromHost := io.Pipe()
	toHost, fromHelper := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = helper.Serve(b.Context(), toHelper, fromHelper, helper.ServeOptions{SessionID: helper.NewSessionID(), Dir: b.TempDir(), Env: sandboxtest.HostEnv(b), Reaper: helper.SelfReaper()})
		fromHelper.Close()
	}()
	c := helper.NewClient(toHost, fromHost)
	cmd := sandbox.Command{Args: []string{"true"}}
	for b.Loop() {
		if _, err := c.Run(b.Context(), cmd); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	<-served
}
