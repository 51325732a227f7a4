package orchestrator

import (
	"context"
	"encoding/json"
	"iter"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/mcp/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.ServeIfChild() // the test binary is also the MCP server
	goleak.VerifyTestMain(m)
}

// mcpModel answers with scripted messages and records the requests.
type mcpModel struct {
	mu      sync.Mutex
	replies []llm.Message
	reqs    []llm.Request
}

func (m *mcpModel) Info() llm.ModelInfo { return llm.ModelInfo{Provider: "test", Model: "test"} }

func (m *mcpModel) Stream(_ context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	msg := llm.Text(llm.RoleAssistant, "done")
	if len(m.replies) > 0 {
		msg, m.replies = m.replies[0], m.replies[1:]
	}
	m.mu.Unlock()
	return func(yield func(llm.Event, error) bool) {
		yield(llm.Event{Type: llm.EventFinish, Message: msg}, nil)
	}
}

func (m *mcpModel) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

func mcpCalls(calls ...[2]string) llm.Message {
	msg := llm.Message{Role: llm.RoleAssistant}
	for i, c := range calls {
		msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartToolCall, CallID: c[0] + "-" + string(rune('a'+i)), Name: c[0], Input: json.RawMessage(c[1])})
	}
	return msg
}

// echoConfig is the user config entry of the test server.
func echoConfig(t *testing.T) json.RawMessage {
	t.Helper()
	command, env := mcptest.Command()
	b, err := json.Marshal(map[string]any{"command": command, "env": env})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// results are the tool results the model was sent, by tool name.
func results(reqs []llm.Request) map[string][]llm.Part {
	out := map[string][]llm.Part{}
	last := reqs[len(reqs)-1]
	for _, m := range last.Messages {
		for _, p := range m.Parts {
			if p.Type == llm.PartToolResult {
				out[p.Name] = append(out[p.Name], p)
			}
		}
	}
	return out
}

func mcpSession(t *testing.T, model llm.Model, opts SessionOptions) *Session {
	t.Helper()
	ws := t.TempDir()
	opts.Workspace, opts.Model = ws, model
	opts.Sandbox = SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: ws}
	if opts.MCPServers == nil {
		opts.MCPServers = map[string]json.RawMessage{"srv": echoConfig(t)}
	}
	rec := &recorder{}
	if opts.Events == nil {
		opts.Events = rec.add
	}
	s, err := NewSession(opts)
	if err != nil {
		t.Fatal(err)
	}
	recorders.Store(s, rec)
	t.Cleanup(func() { s.Close(); recorders.Delete(s) })
	return s
}

// recorders are the sinks of the sessions mcpSession made.
var recorders sync.Map // *Session → *recorder

// send runs one turn of a session mcpSession made and returns its events.
func send(t *testing.T, s *Session, prompt string) []agent.Event {
	t.Helper()
	r, _ := recorders.Load(s)
	rec := r.(*recorder)
	from := len(rec.all())
	if err := s.Send(t.Context(), prompt); err != nil {
		t.Fatalf("send: %v", err)
	}
	var events []agent.Event
	for _, e := range rec.all()[from:] {
		if te, ok := e.(TurnEvent); ok {
			events = append(events, te.Event)
		}
	}
	return events
}

func specNames(req llm.Request) []string {
	var out []string
	for _, t := range req.Tools {
		out = append(out, t.Name)
	}
	return out
}

func TestSessionMCPToolsNeedApproval(t *testing.T) {
	t.Parallel()
	model := &mcpModel{replies: []llm.Message{mcpCalls([2]string{"mcp__srv__echo", `{"text":"hi"}`})}}
	s := mcpSession(t, model, SessionOptions{})
	send(t, s, "echo hi")

	reqs := model.requests()
	names := specNames(reqs[0])
	echoAt, todoAt := slices.Index(names, "mcp__srv__echo"), slices.Index(names, "todo_write")
	if echoAt < 0 || todoAt < 0 || echoAt < todoAt || !slices.Contains(names, "mcp__srv__fail") {
		t.Errorf("the first request offers %v: want the MCP tools after the session tools", names)
	}
	if !strings.Contains(reqs[0].System, "- mcp__<server>__<tool>: tools from MCP servers; each call needs approval.") {
		t.Errorf("the system prompt lacks the MCP line:\n%s", reqs[0].System)
	}
	res := results(reqs)["mcp__srv__echo"]
	if len(res) != 1 || !res[0].IsError || res[0].Output != agent.NoApprover {
		t.Errorf("without an approver the call was not denied: %+v", res)
	}
}

func TestSessionMCPToolsRunWithYolo(t *testing.T) {
	t.Parallel()
	model := &mcpModel{replies: []llm.Message{mcpCalls([2]string{"mcp__srv__echo", `{"text":"hi there"}`}, [2]string{"mcp__srv__fail", `{}`})}}
	s := mcpSession(t, model, SessionOptions{Yolo: true})
	send(t, s, "go")
	got := results(model.requests())
	if e := got["mcp__srv__echo"]; len(e) != 1 || e[0].IsError || e[0].Output != "hi there" {
		t.Errorf("echo: %+v", e)
	}
	if f := got["mcp__srv__fail"]; len(f) != 1 || !f[0].IsError || !strings.Contains(f[0].Output, mcptest.FailText) {
		t.Errorf("fail: %+v", f)
	}
}

func TestSessionMCPAlwaysAllowsOneTool(t *testing.T) {
	t.Parallel()
	model := &mcpModel{replies: []llm.Message{
		mcpCalls([2]string{"mcp__srv__echo", `{"text":"1"}`}),
		mcpCalls([2]string{"mcp__srv__echo", `{"text":"2"}`}, [2]string{"mcp__srv__pwd", `{}`}),
	}}
	var mu sync.Mutex
	var asked []string
	asker := testAsker{approve: func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req.Tool)
		if req.Tool == "mcp__srv__echo" {
			return agent.Always, nil
		}
		return agent.Deny, nil
	}}
	s := mcpSession(t, model, SessionOptions{Asker: asker})
	send(t, s, "go")
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"mcp__srv__echo", "mcp__srv__pwd"}; !slices.Equal(asked, want) {
		t.Errorf("asked about %v, want %v: 'always' allows that one tool only", asked, want)
	}
	got := results(model.requests())
	if e := got["mcp__srv__echo"]; len(e) != 2 || e[1].Output != "2" {
		t.Errorf("echo: %+v", e)
	}
	if p := got["mcp__srv__pwd"]; len(p) != 1 || p[0].Output != agent.DeniedByUser {
		t.Errorf("pwd: %+v", p)
	}
}

func TestSessionNoMCP(t *testing.T) {
	t.Parallel()
	model := &mcpModel{}
	s := mcpSession(t, model, SessionOptions{NoMCP: true})
	send(t, s, "hi")
	for _, n := range specNames(model.requests()[0]) {
		if strings.HasPrefix(n, "mcp__") {
			t.Errorf("--no-mcp offers %s", n)
		}
	}
	if len(s.MCPStatus()) != 0 {
		t.Errorf("status %v", s.MCPStatus())
	}
	if err := s.WaitMCP(t.Context()); err != nil {
		t.Error(err)
	}
}

func TestSessionMCPFailuresBecomeNotices(t *testing.T) {
	t.Parallel()
	servers := func(t *testing.T) map[string]json.RawMessage {
		return map[string]json.RawMessage{
			"srv":  echoConfig(t),
			"dies": json.RawMessage(`{"command":"sh","args":["-c","echo gone >&2; exit 1"]}`),
		}
	}
	project := map[string]json.RawMessage{
		"proj": json.RawMessage(`{"command":"sh","args":["-c","touch ran-on-the-host"]}`),
	}
	model := &mcpModel{}
	rec := &recorder{}
	s := mcpSession(t, model, SessionOptions{MCPServers: servers(t), ProjectMCPServers: project, Events: rec.add})
	if err := s.WaitMCP(t.Context()); err != nil {
		t.Fatal(err)
	}
	notices := func() []string {
		var out []string
		for _, e := range rec.all() {
			if n, ok := e.(NoticeEvent); ok {
				out = append(out, n.Text)
			}
		}
		slices.Sort(out)
		return out
	}
	// A server's status is told before WaitMCP returns.
	got := notices()
	if len(got) != 2 || !strings.HasPrefix(got[0], "mcp dies failed: ") || !strings.Contains(got[0], "gone") ||
		got[1] != "mcp proj failed: "+"servers from the project's config run only inside the sandbox, and this session has none (--no-sandbox)" {
		t.Errorf("notices %q", got)
	}
	if _, err := os.Stat(s.Workspace() + "/ran-on-the-host"); err == nil {
		t.Error("the project's server ran on the host")
	}
	for _, prompt := range []string{"hi", "again"} {
		if err := s.Send(t.Context(), prompt); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range rec.all() {
		if te, ok := e.(TurnEvent); ok && te.Type == agent.EventNotice {
			t.Errorf("a server's notice is also a turn's: %q", te.Text)
		}
	}
	if n := notices(); len(n) != 2 {
		t.Errorf("notices after two turns %q, want each once", n)
	}
	if !slices.Contains(specNames(model.requests()[0]), "mcp__srv__echo") {
		t.Error("a failing server took the working one's tools away")
	}
	var where []string
	for _, st := range s.MCPStatus() {
		where = append(where, st.Name+"@"+st.Where)
	}
	if want := []string{"dies@host", "srv@host", "proj@"}; !slices.Equal(where, want) {
		t.Errorf("status %v, want %v", where, want)
	}
}

// Not parallel: goleak looks at every goroutine.
func TestSessionCloseStopsTheMCPServers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ws := t.TempDir()
	s, err := NewSession(SessionOptions{
		Workspace:  ws,
		Model:      &mcpModel{},
		Sandbox:    SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: ws},
		Yolo:       true,
		MCPServers: map[string]json.RawMessage{"srv": echoConfig(t)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitMCP(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := s.MCPStatus(); len(st) != 1 || st[0].Err != nil || len(st[0].Tools) == 0 {
		t.Fatalf("status %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSessionOfferedDescribesEachTool(t *testing.T) {
	t.Parallel()
	s := mcpSession(t, &mcpModel{}, SessionOptions{Plugins: []string{"guard", "time"}})
	if err := s.WaitMCP(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := map[string]OfferedTool{}
	for _, o := range s.Offered() {
		got[o.Name] = o
	}
	for _, want := range []OfferedTool{
		{Name: "read_file", Kind: "core"},
		{Name: "bash", Kind: "core", Gated: true},
		{Name: "git_status", Kind: "git"},
		{Name: "todo_write", Kind: KindSession},
		{Name: "task", Kind: KindSession},
		{Name: "mcp__srv__echo", Kind: KindMCP, Gated: true},
		{Name: "current_time", Kind: KindPlugin},
	} {
		if got[want.Name] != want {
			t.Errorf("%s: got %+v, want %+v", want.Name, got[want.Name], want)
		}
	}
}
