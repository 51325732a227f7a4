package local_test

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
	"github.com/shiroagent/shiro/sandbox/local"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	// The sandboxes in these tests start this binary as their reaper.
	if code, ok := helper.ReapMain(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

func newSandbox(t *testing.T) sandbox.Sandbox {
	t.Helper()
	sb, err := local.New(t.TempDir(), local.WithEnv(sandboxtest.HostEnv(t)), local.WithReaper(helper.SelfReaper()))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb
}

func TestConformance(t *testing.T) {
	t.Parallel()
	sandboxtest.Run(t, newSandbox)
}

func TestNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name    string
		ws      string
		opts    []local.Option
		wantErr bool
	}{
		{name: "existing directory", ws: dir},
		{name: "missing directory", ws: dir + "/missing", wantErr: true},
		{name: "bad session id", ws: dir, opts: []local.Option{local.WithSessionID("a.b")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sb, err := local.New(tt.ws, tt.opts...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New error = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer sb.Close()
			if got := sb.Info(); got.Kind != "local" || got.Workspace != tt.ws {
				t.Errorf("Info = %+v", got)
			}
		})
	}
}

func TestEnvOption(t *testing.T) {
	t.Parallel()
	sb, err := local.New(t.TempDir(), local.WithEnv([]string{"PATH=/usr/bin:/bin", "SHIRO_LOCAL_BASE=base"}), local.WithSessionID("fixed-session"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer sb.Close()
	var out []byte
	w := writerFunc(func(p []byte) (int, error) { out = append(out, p...); return len(p), nil })
	res, err := sb.Run(t.Context(), sandbox.Command{Args: []string{"sh", "-c", `printf '%s|%s|%s' "$SHIRO_LOCAL_BASE" "$HOME" "$SHIRO_CMD"`}, Stdout: w})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	if got, want := string(out), "base||fixed-session.1"; got != want {
		t.Errorf("env = %q, want %q", got, want)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestDialPort(t *testing.T) {
	t.Parallel()
	sb, err := local.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	go func() {
		c, err := l.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := sb.DialPort(t.Context(), port)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(got) != "hi" {
		t.Fatalf("read %q, %v", got, err)
	}
	l.Close()
	// Port 1 (tcpmux), not the port just closed: a parallel test may be
	// given that one again at once.
	if _, err := sb.DialPort(t.Context(), 1); !errors.Is(err, sandbox.ErrNothingListens) {
		t.Fatalf("a closed port: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.DialPort(t.Context(), port); !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
