package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/local"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
	"github.com/shiroagent/shiro/tools"
	"github.com/shiroagent/shiro/tools/mcp/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.ServeIfChild() // the test binary is also the servers' binary
	goleak.VerifyTestMain(m)
}

// echoServer is the config of the test server started from the test
// binary, with more keys merged in.
func echoServer(t *testing.T, more map[string]any) json.RawMessage {
	t.Helper()
	command, env := mcptest.Command()
	cfg := map[string]any{"command": command, "env": env}
	if e, ok := more["env"].(map[string]string); ok {
		maps.Copy(env, e)
		delete(more, "env")
	}
	maps.Copy(cfg, more)
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// connected starts a manager, waits for every server and closes it when
// the test ends.
func connected(t *testing.T, servers []Server, opts Options) *Manager {
	t.Helper()
	m := Start(servers, opts)
	t.Cleanup(func() { m.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := m.Wait(ctx); err != nil {
		t.Fatalf("servers still connecting: %v", m.Status())
	}
	return m
}

func statusOf(t *testing.T, m *Manager, name string) ServerStatus {
	t.Helper()
	for _, s := range m.Status() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no server %q in %v", name, m.Status())
	return ServerStatus{}
}

func toolOf(t *testing.T, m *Manager, name string) tools.Tool {
	t.Helper()
	for _, tl := range m.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	var names []string
	for _, tl := range m.Tools() {
		names = append(names, tl.Name())
	}
	t.Fatalf("no tool %q in %v", name, names)
	return nil
}

func call(t *testing.T, m *Manager, name, input string) tools.Result {
	t.Helper()
	res, err := toolOf(t, m, name).Run(t.Context(), &tools.Env{}, raw(input))
	if err != nil {
		t.Fatalf("%s: Go error %v", name, err)
	}
	return res
}

func wantErr(t *testing.T, st ServerStatus, parts ...string) {
	t.Helper()
	if st.Err == nil || st.Connecting || len(st.Tools) > 0 {
		t.Fatalf("%s: %+v, want a failure", st.Name, st)
	}
	for _, p := range parts {
		if !strings.Contains(st.Err.Error(), p) {
			t.Errorf("%s: error %q lacks %q", st.Name, st.Err, p)
		}
	}
}

func TestManagerHostStdio(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []string
	m := connected(t, []Server{
		{Name: "srv", Config: echoServer(t, map[string]any{"env": map[string]string{"OVER": "new"}})},
		{Name: "insub", Config: echoServer(t, map[string]any{"cwd": "sub"})},
		{Name: "dies", Config: raw(`{"command":"sh","args":["-c","echo boom >&2; exit 3"]}`)},
		{Name: "missing", Config: raw(`{"command":"shiro-no-such-server"}`)},
		{Name: "bad", Config: raw(`{"command":"x","url":"http://y"}`)},
		{Name: "a__b", Config: echoServer(t, nil)},
	}, Options{
		Workspace: ws,
		Environ:   append(os.Environ(), "KEEP=kept", "OVER=old"),
		OnStatus: func(s ServerStatus) {
			mu.Lock()
			reported = append(reported, s.Name)
			mu.Unlock()
		},
	})

	st := statusOf(t, m, "srv")
	if st.Err != nil || st.Where != WhereHost || st.Transport != TransportStdio || st.Connecting {
		t.Fatalf("srv: %+v", st)
	}
	for _, want := range []string{"mcp__srv__echo", "mcp__srv__fail", "mcp__srv__env", "mcp__srv__pwd"} {
		if !slices.Contains(st.Tools, want) {
			t.Errorf("srv's tools %v lack %s", st.Tools, want)
		}
	}
	echo := toolOf(t, m, "mcp__srv__echo")
	if echo.Set() != tools.SetNone || !echo.Gated() || !tools.IsGated(echo) || echo.Description() != "Returns its text argument." {
		t.Errorf("echo: set %q gated %v description %q", echo.Set(), echo.Gated(), echo.Description())
	}
	var schema map[string]any
	if err := json.Unmarshal(echo.Schema(), &schema); err != nil || schema["type"] != "object" {
		t.Errorf("echo's schema %s is not an object schema", echo.Schema())
	}

	if res := call(t, m, "mcp__srv__echo", `{"text":"hello there"}`); res.IsError || res.Text != "hello there" {
		t.Errorf("echo: %+v", res)
	}
	if res := call(t, m, "mcp__srv__fail", `{}`); !res.IsError || !strings.Contains(res.Text, mcptest.FailText) {
		t.Errorf("fail: %+v, want an error result with %q", res, mcptest.FailText)
	}
	if res := call(t, m, "mcp__srv__echo", `{"text":42}`); !res.IsError {
		t.Errorf("echo with a bad argument: %+v, want an error result", res)
	}
	for name, want := range map[string]string{"KEEP": "kept", "OVER": "new"} {
		if res := call(t, m, "mcp__srv__env", `{"name":"`+name+`"}`); res.Text != want {
			t.Errorf("env %s = %q, want %q", name, res.Text, want)
		}
	}
	if res := call(t, m, "mcp__srv__pwd", ``); res.Text != ws {
		t.Errorf("pwd = %q, want the workspace %q", res.Text, ws)
	}
	if res := call(t, m, "mcp__insub__pwd", `null`); res.Text != filepath.Join(ws, "sub") {
		t.Errorf("pwd with cwd sub = %q", res.Text)
	}

	wantErr(t, statusOf(t, m, "dies"), "boom")
	wantErr(t, statusOf(t, m, "missing"), "shiro-no-such-server")
	wantErr(t, statusOf(t, m, "bad"), "not both")
	wantErr(t, statusOf(t, m, "a__b"), "reserved")
	if n := statusOf(t, m, "dies").Notice(); !strings.HasPrefix(n, "mcp dies failed: ") {
		t.Errorf("notice %q", n)
	}
	if statusOf(t, m, "srv").Notice() != "" {
		t.Error("a connected server has a notice")
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(reported)
	if want := []string{"a__b", "bad", "dies", "insub", "missing", "srv"}; !slices.Equal(reported, want) {
		t.Errorf("OnStatus reported %v, want each server once: %v", reported, want)
	}
}

func TestManagerCloseStopsTheServers(t *testing.T) {
	t.Parallel()
	m := connected(t, []Server{{Name: "srv", Config: echoServer(t, nil)}}, Options{Workspace: t.TempDir()})
	pid, err := strconv.Atoi(call(t, m, "mcp__srv__pid", `{}`).Text)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the server (pid %d) is not running: %v", pid, err)
	}
	echo := toolOf(t, m, "mcp__srv__echo")
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server (pid %d) outlived Close: kill -0 = %v", pid, err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	res, err := echo.Run(t.Context(), &tools.Env{}, raw(`{"text":"x"}`))
	if err != nil || !res.IsError {
		t.Errorf("a call after Close: %+v, %v; want an error result", res, err)
	}
}

func TestManagerCancelledCallIsAGoError(t *testing.T) {
	t.Parallel()
	m := connected(t, []Server{{Name: "srv", Config: echoServer(t, nil)}}, Options{Workspace: t.TempDir()})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := toolOf(t, m, "mcp__srv__block").Run(ctx, &tools.Env{}, raw(`{}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a cancelled call: %v, want the context's error", err)
	}
	// The session survives a cancelled call.
	if res := call(t, m, "mcp__srv__echo", `{"text":"still here"}`); res.Text != "still here" {
		t.Errorf("echo after a cancelled call: %+v", res)
	}
}

func TestManagerServerThatNeverAnswers(t *testing.T) {
	t.Parallel()
	m := connected(t, []Server{{Name: "mute", Config: raw(`{"command":"sleep","args":["300"]}`)}}, Options{Workspace: t.TempDir(), Timeout: 300 * time.Millisecond})
	wantErr(t, statusOf(t, m, "mute"), "the server hangs: it started but did not answer the initialize request within 300ms")
}

func TestManagerCloseWhileConnecting(t *testing.T) {
	t.Parallel()
	m := Start([]Server{{Name: "mute", Config: raw(`{"command":"sleep","args":["300"]}`)}}, Options{Workspace: t.TempDir()})
	if st := m.Status()[0]; !st.Connecting {
		t.Fatalf("status right after Start: %+v", st)
	}
	start := time.Now()
	m.Close()
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Close took %s while a server was connecting", took)
	}
	select {
	case <-m.Done():
	default:
		t.Error("Done is still open after Close")
	}
	if st := m.Status()[0]; st.Connecting || st.Err == nil {
		t.Errorf("status after Close: %+v", st)
	}
}

func TestManagerNoServers(t *testing.T) {
	t.Parallel()
	m := Start(nil, Options{})
	select {
	case <-m.Done():
	default:
		t.Fatal("Done is open with no servers")
	}
	if len(m.Tools()) != 0 || len(m.Status()) != 0 {
		t.Errorf("tools %v status %v", m.Tools(), m.Status())
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

func TestManagerRemote(t *testing.T) {
	t.Parallel()
	handlers := map[string]func() http.Handler{
		TransportHTTP: func() http.Handler {
			return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcptest.NewServer() }, nil)
		},
		TransportSSE: func() http.Handler {
			return sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return mcptest.NewServer() }, nil)
		},
	}
	for transport, handler := range handlers {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var tokens []string
			h := handler()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				tokens = append(tokens, r.Header.Get("X-Token"))
				mu.Unlock()
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			cfg, _ := json.Marshal(map[string]any{"url": srv.URL, "type": transport, "headers": map[string]string{"X-Token": "secret"}})
			m := connected(t, []Server{{Name: "web", Config: cfg}}, Options{Workspace: t.TempDir()})
			st := statusOf(t, m, "web")
			if st.Err != nil || st.Transport != transport || st.Where != WhereHost {
				t.Fatalf("web: %+v", st)
			}
			if res := call(t, m, "mcp__web__echo", `{"text":"over the wire"}`); res.IsError || res.Text != "over the wire" {
				t.Errorf("echo: %+v", res)
			}
			if res := call(t, m, "mcp__web__fail", `{}`); !res.IsError {
				t.Errorf("fail: %+v", res)
			}
			m.Close() // before the server, so that its streams end first
			mu.Lock()
			defer mu.Unlock()
			if len(tokens) < 3 {
				t.Fatalf("%d requests", len(tokens))
			}
			for i, tok := range tokens {
				if tok != "secret" {
					t.Errorf("request %d carried X-Token %q", i, tok)
				}
			}
		})
	}
}

func TestManagerRemoteUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	m := connected(t, []Server{{Name: "gone", Config: raw(`{"url":"` + url + `/mcp"}`)}}, Options{Workspace: t.TempDir(), Timeout: 10 * time.Second})
	wantErr(t, statusOf(t, m, "gone"), "connect")
}

// recordingSandbox runs commands on the host (sandbox/local) and records
// them, standing in for the container.
func recordingSandbox(t *testing.T, ws string) (func(context.Context) (sandbox.Sandbox, error), func() []sandbox.Command) {
	t.Helper()
	lsb, err := local.New(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lsb.Close() })
	var mu sync.Mutex
	var cmds []sandbox.Command
	fake := &sandboxtest.Fake{RunFunc: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		mu.Lock()
		cmds = append(cmds, cmd)
		mu.Unlock()
		return lsb.Run(ctx, cmd)
	}}
	open := func(context.Context) (sandbox.Sandbox, error) { return fake, nil }
	return open, func() []sandbox.Command {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(cmds)
	}
}

func TestManagerProjectServers(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	open, ran := recordingSandbox(t, ws)
	m := connected(t, []Server{
		{Name: "mine", Config: echoServer(t, nil)},
		{Name: "proj", Project: true, Config: echoServer(t, map[string]any{"cwd": "tools", "env": map[string]string{"PROJECT_VALUE": "from the repo"}})},
		{Name: "mine", Project: true, Config: echoServer(t, nil)},
		{Name: "dies", Project: true, Config: raw(`{"command":"sh","args":["-c","echo crashed >&2; exit 3"]}`)},
		{Name: "escape", Project: true, Config: echoServer(t, map[string]any{"cwd": "../.."})},
		{Name: "remote", Project: true, Config: raw(`{"url":"http://169.254.169.254/latest"}`)},
	}, Options{Workspace: ws, Sandbox: open, Environ: append(os.Environ(), "PROJECT_VALUE=host value")})

	st := statusOf(t, m, "proj")
	if st.Err != nil || st.Where != WhereSandbox || !st.Project || !slices.Contains(st.Tools, "mcp__proj__echo") {
		t.Fatalf("proj: %+v", st)
	}
	if res := call(t, m, "mcp__proj__echo", `{"text":"from the sandbox"}`); res.Text != "from the sandbox" {
		t.Errorf("echo: %+v", res)
	}
	if res := call(t, m, "mcp__proj__fail", `{}`); !res.IsError || !strings.Contains(res.Text, mcptest.FailText) {
		t.Errorf("fail: %+v", res)
	}
	if res := call(t, m, "mcp__proj__pwd", `{}`); res.Text != filepath.Join(ws, "tools") {
		t.Errorf("pwd = %q", res.Text)
	}
	if res := call(t, m, "mcp__proj__env", `{"name":"PROJECT_VALUE"}`); res.Text != "from the repo" {
		t.Errorf("env = %q", res.Text)
	}
	var args [][]string
	for _, c := range ran() {
		args = append(args, c.Args)
	}
	command, _ := mcptest.Command()
	if !slices.ContainsFunc(args, func(a []string) bool { return len(a) == 1 && a[0] == command }) {
		t.Errorf("the sandbox ran %v, not the project's server", args)
	}
	if len(args) != 2 { // proj and dies; mine is the user's, on the host
		t.Errorf("the sandbox ran %d commands: %v", len(args), args)
	}

	if st := statusOf(t, m, "mine"); st.Err != nil || st.Where != WhereHost {
		t.Errorf("the user's server: %+v", statusOf(t, m, "mine"))
	}
	for _, s := range m.Status() {
		if s.Name == "mine" && s.Project {
			if !errors.Is(s.Err, ErrShadowed) || !s.Ignored {
				t.Errorf("the project's server of the user's name: %+v", s)
			}
		}
	}
	wantErr(t, statusOf(t, m, "dies"), "exited with status 3", "crashed")
	wantErr(t, statusOf(t, m, "escape"), "outside the workspace")
	remote := statusOf(t, m, "remote")
	wantErr(t, remote, "remote servers in the project's config are ignored")
	if want := "mcp remote: remote servers in the project's config are ignored; declare it in your own config"; remote.Notice() != want {
		t.Errorf("notice %q, want %q", remote.Notice(), want)
	}

	// Close kills the server inside the sandbox.
	pid, err := strconv.Atoi(call(t, m, "mcp__proj__pid", `{}`).Text)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the sandbox server (pid %d) outlived Close: %v", pid, err)
	}
}

func TestManagerProjectServersWithoutASandbox(t *testing.T) {
	t.Parallel()
	m := connected(t, []Server{{Name: "proj", Project: true, Config: echoServer(t, nil)}}, Options{Workspace: t.TempDir()})
	st := statusOf(t, m, "proj")
	if !errors.Is(st.Err, ErrNoSandbox) || st.Ignored {
		t.Errorf("proj: %+v", st)
	}
}

func TestManagerSandboxThatCannotOpen(t *testing.T) {
	t.Parallel()
	open := func(context.Context) (sandbox.Sandbox, error) { return nil, errors.New("no Docker engine") }
	m := connected(t, []Server{{Name: "proj", Project: true, Config: echoServer(t, nil)}}, Options{Workspace: t.TempDir(), Sandbox: open})
	wantErr(t, statusOf(t, m, "proj"), "open the sandbox: no Docker engine")
}

func TestServersOrder(t *testing.T) {
	t.Parallel()
	got := Servers(map[string]json.RawMessage{"b": nil, "a": nil}, map[string]json.RawMessage{"c": nil, "a": nil})
	var names []string
	for _, s := range got {
		names = append(names, s.Name+map[bool]string{true: "(project)"}[s.Project])
	}
	if want := []string{"a", "b", "a(project)", "c(project)"}; !slices.Equal(names, want) {
		t.Errorf("Servers = %v, want %v", names, want)
	}
}

// Wait returns only once OnStatus has returned for every server, so that a
// caller that waits has heard every outcome.
func TestManagerDoneAfterOnStatus(t *testing.T) {
	t.Parallel()
	told, release := make(chan struct{}), make(chan struct{})
	m := Start([]Server{{Name: "dies", Config: raw(`{"command":"sh","args":["-c","exit 1"]}`)}}, Options{
		Workspace: t.TempDir(),
		OnStatus: func(ServerStatus) {
			close(told)
			<-release
		},
	})
	defer m.Close()
	<-told
	select {
	case <-m.Done():
		t.Error("done while OnStatus still runs")
	default:
	}
	close(release)
	if err := m.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}
