package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// fakeChannel is a client on a fake helper, which answers a run of
// "true" with exit 0 (and sends its environment to env), ignores a run of
// "hang" and its kill, and breaks the channel at a run of "lose". A dial
// is refused (nothing listens), except on a channel made with loseDial,
// which breaks; listeners names port 3000.
type fakeChannel struct {
	client *helper.Client
	out    *io.PipeWriter // the helper's side of its replies
	env    chan []string
	served chan struct{}
	closed atomic.Bool
}

func newFakeChannel(loseDial bool) *fakeChannel {
	fromHelper, out := io.Pipe()
	in, toHelper := io.Pipe()
	ch := &fakeChannel{out: out, env: make(chan []string, 1), served: make(chan struct{})}
	ch.client = helper.NewClient(fromHelper, toHelper, helper.WithKillWait(10*time.Millisecond))
	go func() {
		defer close(ch.served)
		defer out.Close()
		dec, enc := json.NewDecoder(in), json.NewEncoder(out)
		for {
			var m helper.Message
			if err := dec.Decode(&m); err != nil {
				return
			}
			switch m.Type {
			case helper.TypeDial:
				if loseDial {
					out.CloseWithError(io.ErrUnexpectedEOF)
					continue
				}
				_ = enc.Encode(helper.Message{ID: m.ID, Type: helper.TypeError, Error: "refused", Code: helper.CodeRefused})
				continue
			case helper.TypeListeners:
				_ = enc.Encode(helper.Message{ID: m.ID, Type: helper.TypeListening, Listeners: []sandbox.Listener{{Port: 3000, Address: "127.0.0.1"}}})
				continue
			case helper.TypeRun:
			default:
				continue
			}
			switch m.Args[0] {
			case "true":
				ch.env <- m.Env
				_ = enc.Encode(helper.Message{ID: m.ID, Type: helper.TypeExit, Result: &sandbox.Result{}})
			case "lose":
				out.CloseWithError(io.ErrUnexpectedEOF)
			}
		}
	}()
	return ch
}

func (ch *fakeChannel) Client() *helper.Client { return ch.client }

func (ch *fakeChannel) Close() {
	ch.closed.Store(true)
	_ = ch.client.Close()
	<-ch.served
}

type fakeTunnel struct{ closed atomic.Bool }

func (tu *fakeTunnel) Port() int       { return 4711 }
func (tu *fakeTunnel) Trust() []string { return []string{"SSL_CERT_FILE=/ca.pem"} }
func (tu *fakeTunnel) Close()          { tu.closed.Store(true) }

// fakeEgress hands out one token per tool call, named after it.
type fakeEgress struct{}

func (fakeEgress) Serve(net.Listener) error { return nil }
func (fakeEgress) Register(c sandbox.Caller) (string, func() []string) {
	return "tok-" + c.ID, func() []string { return []string{"refused for " + c.ID} }
}

// fakeBackend records what a Conn asked of it.
type fakeBackend struct {
	mu    sync.Mutex
	chs   []*fakeChannel
	tuns  []*fakeTunnel
	kills int
	lives []bool
}

// newConn is a Conn on a fresh fakeBackend, whose channels are closed when
// the test ends.
func newConn(t *testing.T) (*fakeBackend, *Conn[*fakeChannel, *fakeTunnel]) {
	return newConnLosing(t, false)
}

// newConnLosing is newConn whose first channel breaks at a dial when
// loseDial is set.
func newConnLosing(t *testing.T, loseDial bool) (*fakeBackend, *Conn[*fakeChannel, *fakeTunnel]) {
	f := &fakeBackend{}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, ch := range f.chs {
			if !ch.closed.Load() {
				ch.Close()
			}
		}
	})
	return f, New(Backend[*fakeChannel, *fakeTunnel]{
		Connect: func(context.Context) (*fakeChannel, *fakeTunnel, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			ch, tun := newFakeChannel(loseDial && len(f.chs) == 0), &fakeTunnel{}
			f.chs, f.tuns = append(f.chs, ch), append(f.tuns, tun)
			return ch, tun, nil
		},
		Egress:   fakeEgress{},
		Hostname: func() string { return "box" },
		Kill: func() func(context.Context) {
			return func(context.Context) {
				f.mu.Lock()
				f.kills++
				f.mu.Unlock()
			}
		},
		KillTimeout: time.Second,
		Lost:        func(err error) error { return fmt.Errorf("the sandbox went away: %w", err) },
		Before:      func(context.Context, *helper.Client) []string { return []string{"before"} },
		After: func(_ context.Context, _ *helper.Client, live bool) []string {
			f.mu.Lock()
			f.lives = append(f.lives, live)
			f.mu.Unlock()
			return []string{"after"}
		},
	})
}

// wantNotices fails t unless res has the notices want, in order.
func wantNotices(t *testing.T, res sandbox.Result, want ...string) {
	t.Helper()
	if !slices.Equal(res.Notices, want) {
		t.Errorf("notices %q, want %q", res.Notices, want)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConn(t *testing.T) {
	t.Run("a command gets the proxy environment of its tool call", func(t *testing.T) {
		t.Parallel()
		f, c := newConn(t)
		ctx := sandbox.WithCaller(t.Context(), sandbox.Caller{ID: "call1"})
		res, err := c.Run(ctx, sandbox.Command{Args: []string{"true"}, Env: []string{"A=1"}})
		if err != nil {
			t.Fatal(err)
		}
		env := <-f.chs[0].env
		if !slices.Contains(env, "HTTP_PROXY=http://shiro:tok-call1@127.0.0.1:4711") || !slices.Contains(env, "no_proxy=localhost,127.0.0.1,::1,127.0.0.0/8,box") {
			t.Errorf("the command's environment %q has no proxy for call1 on port 4711 keeping box direct", env)
		}
		if !slices.Contains(env, "SSL_CERT_FILE=/ca.pem") || env[len(env)-1] != "A=1" {
			t.Errorf("the command's environment %q lacks the trust or does not end with its own entries", env)
		}
		wantNotices(t, res, "before", "after", "refused for call1")
	})

	t.Run("a broken channel is replaced with its tunnel", func(t *testing.T) {
		t.Parallel()
		f, c := newConn(t)
		first, err := c.Channel(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := c.Channel(t.Context()); again != first {
			t.Fatal("a working channel was replaced")
		}
		first.out.Close()
		<-first.client.Done()
		second, err := c.Channel(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if second == first || !first.closed.Load() || !f.tuns[0].closed.Load() || f.tuns[1].closed.Load() {
			t.Errorf("after the break: a new channel %v, the old one closed %v, its tunnel closed %v, the new tunnel open %v",
				second != first, first.closed.Load(), f.tuns[0].closed.Load(), !f.tuns[1].closed.Load())
		}
	})

	t.Run("a kill the helper does not confirm drops the channel", func(t *testing.T) {
		t.Parallel()
		f, c := newConn(t)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		res, err := c.Run(ctx, sandbox.Command{Args: []string{"hang"}})
		if !errors.Is(err, context.DeadlineExceeded) || !res.Interrupted {
			t.Fatalf("Run = %+v, %v; want an interrupted result and the context's error", res, err)
		}
		if f.kills != 1 || !slices.Equal(f.lives, []bool{false}) {
			t.Errorf("the fallback ran %d times, After saw live %v", f.kills, f.lives)
		}
		if c.Current() != nil || !f.chs[0].closed.Load() || !f.tuns[0].closed.Load() {
			t.Error("the channel or its tunnel outlived the fallback")
		}
		wantNotices(t, res, "before", "after", KillFallbackNotice, "refused for ")
	})

	t.Run("a channel lost while the command ran is the backend's error", func(t *testing.T) {
		t.Parallel()
		f, c := newConn(t)
		res, err := c.Run(t.Context(), sandbox.Command{Args: []string{"lose"}})
		if !errors.Is(err, helper.ErrChannelClosed) || !strings.HasPrefix(err.Error(), "the sandbox went away: ") {
			t.Errorf("Run = %v; want the backend's error around the client's", err)
		}
		if len(f.lives) != 0 {
			t.Errorf("After ran %d times", len(f.lives))
		}
		wantNotices(t, res, "refused for ")
	})

	t.Run("after Close nothing connects", func(t *testing.T) {
		t.Parallel()
		f, c := newConn(t)
		if _, err := c.Channel(t.Context()); err != nil {
			t.Fatal(err)
		}
		stops := 0
		if !c.Close(func() { stops++ }) || c.Close(func() { stops++ }) {
			t.Error("Close reported the wrong one as the first")
		}
		if stops != 1 || !f.chs[0].closed.Load() || !f.tuns[0].closed.Load() {
			t.Errorf("stop ran %d times; the channel closed %v, the tunnel %v", stops, f.chs[0].closed.Load(), f.tuns[0].closed.Load())
		}
		if _, err := c.Run(t.Context(), sandbox.Command{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrClosed) {
			t.Errorf("Run after Close = %v, want sandbox.ErrClosed", err)
		}
		if len(f.chs) != 1 {
			t.Errorf("%d connections, want 1", len(f.chs))
		}
	})

	t.Run("a dial and a listeners request are not commands", func(t *testing.T) {
		t.Parallel()
		f, c := newConn(t)
		if _, err := c.Dial(t.Context(), 8080); !errors.Is(err, sandbox.ErrNothingListens) {
			t.Errorf("Dial = %v, want ErrNothingListens", err)
		}
		ls, err := c.Listeners(t.Context())
		if err != nil || len(ls) != 1 || ls[0].Port != 3000 {
			t.Errorf("Listeners = %+v, %v", ls, err)
		}
		if len(f.lives) != 0 {
			t.Errorf("the git boundary's After ran %d times", len(f.lives))
		}
	})

	t.Run("a dial whose channel breaks under it goes again on a fresh one", func(t *testing.T) {
		t.Parallel()
		f, c := newConnLosing(t, true)
		if _, err := c.Dial(t.Context(), 8080); !errors.Is(err, sandbox.ErrNothingListens) {
			t.Errorf("Dial = %v, want the second channel's ErrNothingListens", err)
		}
		f.mu.Lock()
		n := len(f.chs)
		f.mu.Unlock()
		if n != 2 {
			t.Errorf("%d connections, want 2", n)
		}
	})
}
