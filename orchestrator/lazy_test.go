package orchestrator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
)

// countedSandbox is a sandbox that counts its closes.
type countedSandbox struct{ closes atomic.Int32 }

func (s *countedSandbox) Run(context.Context, sandbox.Command) (sandbox.Result, error) {
	return sandbox.Result{}, nil
}
func (s *countedSandbox) Info() sandbox.Info { return sandbox.Info{Kind: "opened"} }
func (s *countedSandbox) Close() error       { s.closes.Add(1); return nil }

// blockingLazy is a Lazy whose open waits for release, counting opens.
func blockingLazy(release <-chan struct{}, fail *atomic.Bool) (*Lazy, *countedSandbox, *atomic.Int32) {
	sb := &countedSandbox{}
	var opens atomic.Int32
	l := &Lazy{info: sandbox.Info{Kind: "configured"}, open: func(ctx context.Context) (sandbox.Sandbox, error) {
		opens.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if fail != nil && fail.Load() {
			return nil, errors.New("no engine")
		}
		return sb, nil
	}}
	return l, sb, &opens
}

// waitOpening waits until an open is under way.
func waitOpening(t *testing.T, opens *atomic.Int32, n int32) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); opens.Load() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d opens, want %d", opens.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLazyAnswersWhileItOpens: while an open is under way, Info and
// Opened answer at once, other callers share that open, and a caller
// whose context ends stops waiting.
func TestLazyAnswersWhileItOpens(t *testing.T) {
	release := make(chan struct{})
	l, sb, opens := blockingLazy(release, nil)
	var wg sync.WaitGroup
	got := make([]sandbox.Sandbox, 3)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = l.Get(t.Context())
		}()
	}
	waitOpening(t, opens, 1)
	answered := make(chan sandbox.Info, 1)
	go func() {
		l.Opened()
		answered <- l.Info()
	}()
	select {
	case info := <-answered:
		if info.Kind != "configured" {
			t.Errorf("Info before the open: %+v", info)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Info waited for the open")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a caller whose context ended: %v", err)
	}
	close(release)
	wg.Wait()
	for i, s := range got {
		if s != sandbox.Sandbox(sb) {
			t.Errorf("caller %d got %v", i, s)
		}
	}
	if n := opens.Load(); n != 1 {
		t.Errorf("%d opens, want 1", n)
	}
	if l.Info().Kind != "opened" {
		t.Errorf("Info after the open: %+v", l.Info())
	}
	l.Close()
	if sb.closes.Load() != 1 {
		t.Errorf("closed %d times", sb.closes.Load())
	}
}

// TestLazyCloseDuringOpen: Close while an open is under way waits for it
// and closes what it opened; the opener and later callers get ErrClosed.
func TestLazyCloseDuringOpen(t *testing.T) {
	release := make(chan struct{})
	l, sb, opens := blockingLazy(release, nil)
	opened := make(chan error, 1)
	go func() {
		_, err := l.Get(t.Context())
		opened <- err
	}()
	waitOpening(t, opens, 1)
	closed := make(chan struct{})
	go func() {
		l.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned before the open it raced ended")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if err := <-opened; !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("the opener: %v", err)
	}
	if sb.closes.Load() != 1 {
		t.Errorf("the sandbox opened during Close was closed %d times", sb.closes.Load())
	}
	if _, err := l.Get(t.Context()); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestLazyTriesTheOpenOnce: a failed open is kept, an *OpenError that
// ends the turn, and every later caller gets it without a second open
// (issue 33: a run without an engine retried on every command); Reopen
// forgets it, and an open its caller cancelled is tried again.
func TestLazyTriesTheOpenOnce(t *testing.T) {
	release := make(chan struct{})
	close(release)
	var fail atomic.Bool
	fail.Store(true)
	l, sb, opens := blockingLazy(release, &fail)
	_, err := l.Get(t.Context())
	var oe *OpenError
	if !errors.As(err, &oe) || !oe.EndsTurn() || !strings.Contains(err.Error(), "no engine") {
		t.Fatalf("the failing open: %v", err)
	}
	fail.Store(false)
	if _, err2 := l.Get(t.Context()); err2 != err {
		t.Fatalf("the second use: %v, want the first error", err2)
	}
	if _, err := l.Run(t.Context(), sandbox.Command{Shell: "true"}); !errors.As(err, &oe) {
		t.Fatalf("Run after the failure: %v", err)
	}
	if n := opens.Load(); n != 1 {
		t.Errorf("%d opens, want 1", n)
	}
	if err := l.Reopen(false); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Get(t.Context()); err != nil || got != sandbox.Sandbox(sb) {
		t.Fatalf("after Reopen: %v %v", got, err)
	}

	hold := make(chan struct{})
	l2, sb2, opens2 := blockingLazy(hold, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l2.Get(ctx); !errors.Is(err, context.Canceled) || errors.As(err, &oe) {
		t.Fatalf("a cancelled open: %v", err)
	}
	close(hold)
	if got, err := l2.Get(t.Context()); err != nil || got != sandbox.Sandbox(sb2) {
		t.Fatalf("after a cancelled open: %v %v", got, err)
	}
	if n := opens2.Load(); n != 2 {
		t.Errorf("%d opens, want 2", n)
	}
}

func TestNewLazyKindBeforeTheOpen(t *testing.T) {
	for backend, want := range map[string]string{"": "docker", sandbox.BackendDocker: "docker", sandbox.BackendKubernetes: "kubernetes"} {
		var cfg SandboxConfig
		cfg.Backend = backend
		if got := NewLazy(cfg).Info().Kind; got != want {
			t.Errorf("backend %q: kind %q, want %q", backend, got, want)
		}
	}
	var cfg SandboxConfig
	cfg.NoSandbox = true
	if got := NewLazy(cfg).Info().Kind; got != "local" {
		t.Errorf("--no-sandbox: kind %q", got)
	}
}
