package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/publish"
)

// freePort is a host port nothing listens on (it listened a moment ago).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func portSession(t *testing.T, model llm.Model, opts SessionOptions, publishList ...string) (*Session, error) {
	t.Helper()
	ws := t.TempDir()
	opts.Workspace, opts.Model = ws, model
	opts.Sandbox = SandboxConfig{Settings: sandbox.Settings{NoSandbox: true, Publish: publishList}, Workspace: ws}
	opts.MCPServers = map[string]json.RawMessage{}
	rec := &recorder{}
	opts.Events = rec.add
	s, err := NewSession(opts)
	if err != nil {
		return nil, err
	}
	recorders.Store(s, rec)
	t.Cleanup(func() { s.Close(); recorders.Delete(s) })
	return s, nil
}

func TestSessionPortsOpenAndClose(t *testing.T) {
	t.Parallel()
	// Without a sandbox (--no-sandbox) the sandbox's loopback is the
	// host's: a server of the test is "in the sandbox".
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "hello")
			c.Close()
		}
	}()
	serverPort, hp, idle, hpIdle := srv.Addr().(*net.TCPAddr).Port, freePort(t), freePort(t), freePort(t)
	s, err := portSession(t, &mcpModel{}, SessionOptions{}, fmt.Sprintf("%d:%d", hp, serverPort), fmt.Sprintf("%d:%d", hpIdle, idle))
	if err != nil {
		t.Fatal(err)
	}
	addr, addrIdle := "127.0.0.1:"+strconv.Itoa(hp), "127.0.0.1:"+strconv.Itoa(hpIdle)
	if got := s.Ports(); len(got) != 2 {
		t.Fatalf("Ports() = %+v", got)
	}
	read := func(addr string) (string, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if got, err := read(addr); got != "hello" || err != nil {
		t.Errorf("through %s: %q, %v", addr, got, err)
	}
	// Nothing listens: a clean close, and the user hears why.
	if got, err := read(addrIdle); got != "" || err != nil {
		t.Errorf("through %s: %q, %v; want a clean close", addrIdle, got, err)
	}
	r, _ := recorders.Load(s)
	var notices []string
	for deadline := time.Now().Add(5 * time.Second); len(notices) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, e := range r.(*recorder).all() {
			if n, ok := e.(NoticeEvent); ok {
				notices = append(notices, n.Text)
			}
		}
	}
	if want := fmt.Sprintf("nothing listens on port %d in the sandbox (published at %s)", idle, addrIdle); len(notices) != 1 || notices[0] != want {
		t.Errorf("notices %q, want %q", notices, want)
	}
	s.Close()
	for _, a := range []string{addr, addrIdle} {
		if c, err := net.Dial("tcp", a); err == nil {
			c.Close()
			t.Errorf("%s still listens after the session closed", a)
		}
	}
}

func TestSessionFailsOnAHostPortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	free := freePort(t)
	_, err = portSession(t, &mcpModel{}, SessionOptions{}, strconv.Itoa(free), fmt.Sprintf("%d:3000", taken))
	if !errors.Is(err, publish.ErrHostPortInUse) || !strings.Contains(err.Error(), "127.0.0.1:"+strconv.Itoa(taken)) {
		t.Fatalf("NewSession: %v, want the host port in use", err)
	}
	// The port opened before the one in use is closed again.
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(free)); err == nil {
		c.Close()
		t.Errorf("port %d was left open by the failed session", free)
	}
}

func TestPublishPortAsksNamingThePort(t *testing.T) {
	t.Parallel()
	hp, cp := freePort(t), freePort(t)
	var mu sync.Mutex
	var asked []agent.ApprovalRequest
	model := &mcpModel{replies: []llm.Message{
		mcpCalls([2]string{"publish_port", fmt.Sprintf(`{"container_port": %d, "host_port": %d}`, cp, hp)}),
		mcpCalls([2]string{"publish_port", `{"container_port": 4000}`}),
	}}
	s, err := portSession(t, model, SessionOptions{Asker: testAsker{approve: func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req)
		if len(asked) == 1 {
			return agent.Once, nil
		}
		return agent.Deny, nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	send(t, s, "publish")
	send(t, s, "publish another")
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Fatalf("asked %d times, want every call", len(asked))
	}
	var in struct{ Approval string }
	json.Unmarshal(asked[0].Input, &in)
	if want := fmt.Sprintf("publish port %d of the sandbox at 127.0.0.1:%d (nothing listens there yet)", cp, hp); in.Approval != want {
		t.Errorf("approval %q, want %q", in.Approval, want)
	}
	if got := s.Ports(); len(got) != 1 || got[0].HostPort != hp || got[0].ContainerPort != cp {
		t.Errorf("Ports() = %+v, want only the approved one", got)
	}
	res := results(model.requests())["publish_port"]
	if len(res) != 2 || !strings.Contains(res[0].Output, fmt.Sprintf("at 127.0.0.1:%d", hp)) || !res[1].IsError {
		t.Errorf("results %+v", res)
	}
}

func TestPublishPortIsOfferedWhereSomeoneApproves(t *testing.T) {
	t.Parallel()
	asker := testAsker{}
	for _, c := range []struct {
		name  string
		opts  SessionOptions
		offer bool
	}{
		{"chat", SessionOptions{Asker: asker}, true},
		{"headless --yolo", SessionOptions{Yolo: true}, true},
		{"headless", SessionOptions{}, false},
		{"plan", SessionOptions{Asker: asker, Variant: "plan"}, false},
		{"review", SessionOptions{Yolo: true, Variant: "review"}, false},
	} {
		m := &mcpModel{}
		s, err := portSession(t, m, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		send(t, s, "hi")
		if got := slices.Contains(specNames(m.requests()[0]), "publish_port"); got != c.offer {
			t.Errorf("%s: publish_port offered %v, want %v", c.name, got, c.offer)
		}
		for _, o := range s.Offered() {
			if o.Name == "publish_port" && !o.Gated {
				t.Errorf("%s: publish_port is not gated", c.name)
			}
		}
	}
}

func TestListenerText(t *testing.T) {
	t.Parallel()
	list := []sandbox.Listener{
		{Port: 3000, Address: "0.0.0.0", Pid: 42, Command: "python3 -m http.server 3000"},
		{Port: 5432, Address: "127.0.0.1", Pid: 7},
		{Port: 22, Address: "::"},
	}
	for port, want := range map[int]string{
		3000: "python3 -m http.server 3000 listens there",
		5432: "process 7 listens there",
		22:   "a process shiro cannot name listens there",
		8080: "nothing listens there yet",
	} {
		if got := ListenerText(list, port); got != want {
			t.Errorf("ListenerText(%d) = %q, want %q", port, got, want)
		}
	}
}

func TestPublishPortApprovalNamesTheListener(t *testing.T) {
	t.Parallel()
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := srv.Addr().(*net.TCPAddr).Port
	s, err := portSession(t, &mcpModel{}, SessionOptions{Asker: testAsker{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartSandbox(t.Context()); err != nil {
		t.Fatal(err)
	}
	var in struct{ Approval string }
	json.Unmarshal(s.approvalInput(t.Context(), json.RawMessage(fmt.Sprintf(`{"container_port": %d}`, port))), &in)
	prefix := fmt.Sprintf("publish port %d of the sandbox at 127.0.0.1:%d (", port, port)
	if !strings.HasPrefix(in.Approval, prefix) || !strings.HasSuffix(in.Approval, " listens there)") || strings.Contains(in.Approval, "nothing") {
		t.Errorf("approval %q: want it to name what listens on %d", in.Approval, port)
	}
}

func TestPublishPortRefusesBeforeAsking(t *testing.T) {
	t.Parallel()
	hp := freePort(t)
	s, err := portSession(t, &mcpModel{}, SessionOptions{Asker: testAsker{}}, strconv.Itoa(hp))
	if err != nil {
		t.Fatal(err)
	}
	tool := publishPortTool{s: s}
	for in, want := range map[string]string{
		fmt.Sprintf(`{"container_port": 9, "host_port": %d}`, hp): "published already",
		`{"container_port": 70000}`:                               "out of range",
		`{"container_port": 3000, "remove": true}`:                "not published",
		`{"port": 3000}`: "invalid arguments",
	} {
		if got := tool.Check(t.Context(), json.RawMessage(in)); !strings.Contains(got, want) {
			t.Errorf("Check(%s) = %q, want %q", in, got, want)
		}
	}
	if got := tool.Check(t.Context(), json.RawMessage(fmt.Sprintf(`{"container_port": %d, "remove": true}`, hp))); got != "" {
		t.Errorf("removing a published port: %q", got)
	}
}

// TestNoSandboxPublishesOnLoopbackOnly: without a sandbox a published port
// is this machine's own port, so another address is refused when ports are
// asked for, and set aside (with a notice) when none are.
func TestNoSandboxPublishesOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	open := func(publishList ...string) (*Session, error) {
		ws := t.TempDir()
		opts := SessionOptions{Workspace: ws, Model: &mcpModel{}, MCPServers: map[string]json.RawMessage{}}
		opts.Sandbox = SandboxConfig{Settings: sandbox.Settings{NoSandbox: true, Publish: publishList, PublishAddress: "0.0.0.0"}, Workspace: ws}
		s, err := NewSession(opts)
		if err == nil {
			t.Cleanup(func() { s.Close() })
		}
		return s, err
	}
	if _, err := open(strconv.Itoa(freePort(t))); err == nil || !strings.Contains(err.Error(), "with --no-sandbox would open this machine's own loopback ports") {
		t.Fatalf("NewSession with --no-sandbox on 0.0.0.0: %v", err)
	}
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if got := s.PortsAddress(); got != publish.DefaultAddress {
		t.Errorf("ports listen on %s, want %s", got, publish.DefaultAddress)
	}
	if !strings.Contains(strings.Join(s.Notices, "\n"), "is not used with --no-sandbox") {
		t.Errorf("no notice of the address set aside: %q", s.Notices)
	}
}
