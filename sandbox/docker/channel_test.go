package docker

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/helper"
)

// TestChannelGoesOverTheSessionSocket: on a local engine the session's
// messages go over a socket in the session sockets directory, and the
// socket's file is gone once the helper connected (nothing else can
// connect); the channel still carries commands after that.
func TestChannelGoesOverTheSessionSocket(t *testing.T) {
	api := testenv.RequireDocker(t)
	ws := testenv.Workspace(t, api)
	eng, err := Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if !strings.HasPrefix(eng.host, "unix://") {
		t.Skipf("the engine at %s is not local: its channel goes over the exec", eng.host)
	}
	sb, err := eng.Open(context.WithoutCancel(t.Context()), Reference(testenv.RequireImage(t, api)), Options{Spec: sandbox.Spec{Workspace: ws, HelperBinary: testenv.Helper(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var out strings.Builder
	if res, err := sb.Run(t.Context(), sandbox.Command{Shell: "echo over the socket", Stdout: &out}); err != nil || res.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if out.String() != "over the socket\n" {
		t.Errorf("output %q", out.String())
	}
	ch := sb.conn.Current()
	if ch == nil || ch.sock == nil {
		t.Fatal("the channel does not go over the session's socket")
	}
	left, _ := filepath.Glob(filepath.Join(eng.socketDir(sb.opts, sb.wsID), "c-*.sock"))
	if len(left) > 0 {
		t.Errorf("channel sockets left to connect to: %v", left)
	}
}

// TestChannelConnectFallsBackToTheExec: when the helper says the socket is
// out of reach, connect returns no connection and leaves the helper's
// output at its next message; anything else the helper writes first is an
// error. The token goes to the helper's stdin first.
func TestChannelConnectFallsBackToTheExec(t *testing.T) {
	for _, tt := range []struct {
		name, first string
		fallback    bool
	}{
		{"out of reach", helper.SocketRefused + "\n" + `{"id":1,"type":"exit"}` + "\n", true},
		{"something else", `{"id":1,"type":"exit"}` + "\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sockPath := filepath.Join(t.TempDir(), "c.sock")
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sockPath, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			host, ctr := net.Pipe() // the exec's stdin
			defer host.Close()
			defer ctr.Close()
			ch := &channel{}
			ch.conn.Conn = host
			tokenc := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(ctr).ReadString('\n')
				tokenc <- line
			}()
			out := bufio.NewReader(strings.NewReader(tt.first))
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			conn, err := ch.connect(ctx, l, out)
			if conn != nil {
				conn.Close()
				t.Fatal("a connection came, with no helper to make it")
			}
			if tt.fallback != (err == nil) {
				t.Fatalf("connect: %v (want the fallback: %v)", err, tt.fallback)
			}
			if tok := <-tokenc; len(strings.TrimSpace(tok)) != 32 {
				t.Errorf("the helper's stdin got %q, want a token line", tok)
			}
			if tt.fallback {
				if rest, _ := io.ReadAll(out); string(rest) != `{"id":1,"type":"exit"}`+"\n" {
					t.Errorf("the output left for the client: %q", rest)
				}
			}
			if _, err := os.Stat(sockPath); err == nil {
				if _, err := net.Dial("unix", sockPath); err == nil {
					t.Error("the socket still accepts after connect")
				}
			}
		})
	}
}
