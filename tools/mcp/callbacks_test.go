package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/local"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
	"github.com/shiroagent/shiro/tools/mcp/mcptest"
)

// callbacks records what the servers asked and answers as told.
type callbacks struct {
	mu      sync.Mutex
	samples []SampleRequest
	elicits []ElicitRequest

	sampleErr error
	answer    ElicitResult
}

func (c *callbacks) sample(_ context.Context, req SampleRequest) (SampleResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples = append(c.samples, req)
	if c.sampleErr != nil {
		return SampleResult{}, c.sampleErr
	}
	return SampleResult{Text: "an answer to " + req.Messages[0].Text, Model: "fake-model", StopReason: "endTurn"}, nil
}

func (c *callbacks) elicit(_ context.Context, req ElicitRequest) (ElicitResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.elicits = append(c.elicits, req)
	return c.answer, nil
}

func TestServerCallbacksReachTheClient(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	cb := &callbacks{answer: ElicitResult{Action: ElicitAccept, Content: map[string]any{"name": "Ada", "age": int64(36), "color": "green", "agree": true}}}
	m := connected(t, []Server{{Name: "srv", Config: echoServer(t, nil)}}, Options{Workspace: ws, Sample: cb.sample, Elicit: cb.elicit})

	wantRoots := "roots: " + filepath.Base(ws) + " file://" + filepath.ToSlash(ws)
	for _, tool := range []string{"mcp__srv__roots", "mcp__srv__roots_mrtr"} {
		if res := call(t, m, tool, `{}`); res.IsError || res.Text != wantRoots {
			t.Errorf("%s: %+v, want %q", tool, res, wantRoots)
		}
	}

	res := call(t, m, "mcp__srv__sample", `{"prompt":"what is 2+2?","system":"be brief"}`)
	if res.IsError || res.Text != "model fake-model said: an answer to what is 2+2?" {
		t.Errorf("sample: %+v", res)
	}
	if len(cb.samples) != 1 {
		t.Fatalf("%d sampling requests, want 1", len(cb.samples))
	}
	got := cb.samples[0]
	if got.Server != "srv" || got.System != "be brief" || got.MaxTokens != 200 ||
		!slices.Equal(got.Messages, []SampleMessage{{Role: "user", Text: "what is 2+2?"}}) {
		t.Errorf("the sampling request: %+v", got)
	}

	res = call(t, m, "mcp__srv__elicit", `{}`)
	if res.IsError || !strings.HasPrefix(res.Text, "accept ") {
		t.Fatalf("elicit: %+v", res)
	}
	var content map[string]any
	if err := json.Unmarshal([]byte(strings.TrimPrefix(res.Text, "accept ")), &content); err != nil {
		t.Fatal(err)
	}
	if content["name"] != "Ada" || content["age"] != float64(36) || content["agree"] != true || content["color"] != "green" {
		t.Errorf("the server got %v", content)
	}
	if len(cb.elicits) != 1 {
		t.Fatalf("%d elicitations, want 1", len(cb.elicits))
	}
	e := cb.elicits[0]
	var names []string
	for _, f := range e.Fields {
		names = append(names, f.Name)
	}
	if e.Server != "srv" || e.Message != "tell me about you" || !slices.Equal(names, []string{"name", "age", "agree", "color"}) {
		t.Errorf("the elicitation: %+v", e)
	}
	if f := e.Fields[0]; !f.Required || f.Type != "string" || f.Description != "your name" {
		t.Errorf("the name field: %+v", f)
	}
	if f := e.Fields[3]; !slices.Equal(f.Enum, []string{"red", "green"}) || f.Required {
		t.Errorf("the color field: %+v", f)
	}
}

func TestServerCallbacksRefused(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	t.Run("denied sampling and a declined form reach the server as such", func(t *testing.T) {
		t.Parallel()
		cb := &callbacks{sampleErr: ErrSamplingDenied, answer: ElicitResult{Action: ElicitDecline}}
		m := connected(t, []Server{{Name: "srv", Config: echoServer(t, nil)}}, Options{Workspace: ws, Sample: cb.sample, Elicit: cb.elicit})
		if res := call(t, m, "mcp__srv__sample", `{"prompt":"hi"}`); !res.IsError || !strings.Contains(res.Text, ErrSamplingDenied.Error()) {
			t.Errorf("sample: %+v", res)
		}
		if res := call(t, m, "mcp__srv__elicit", `{}`); res.IsError || res.Text != "decline null" {
			t.Errorf("elicit: %+v", res)
		}
	})
	t.Run("without handlers the server is told shiro does neither", func(t *testing.T) {
		t.Parallel()
		m := connected(t, []Server{{Name: "srv", Config: echoServer(t, nil)}}, Options{Workspace: ws})
		if res := call(t, m, "mcp__srv__elicit", `{}`); !res.IsError || !strings.Contains(res.Text, "does not support elicitation") {
			t.Errorf("elicit: %+v", res)
		}
		if res := call(t, m, "mcp__srv__roots", `{}`); res.IsError || !strings.Contains(res.Text, "file://") {
			t.Errorf("roots: %+v", res)
		}
	})
}

func TestServerCallbacksInTheSandboxNameItsPath(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	lsb, err := local.New(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lsb.Close() })
	// The sandbox holds the workspace at a path of its own: the server is
	// told that one, not the host's.
	fake := &sandboxtest.Fake{RunFunc: lsb.Run, InfoValue: sandbox.Info{Kind: "test", Workspace: "/sandbox/work space"}}
	open := func(context.Context) (sandbox.Sandbox, error) { return fake, nil }
	m := connected(t, []Server{
		{Name: "proj", Project: true, Config: echoServer(t, nil)},
		{Name: "mine", Config: echoServer(t, nil)},
	}, Options{Workspace: ws, Sandbox: open})
	if res := call(t, m, "mcp__proj__roots", `{}`); res.Text != "roots: work space file:///sandbox/work%20space" {
		t.Errorf("the project server's roots: %+v", res)
	}
	if res := call(t, m, "mcp__mine__roots", `{}`); !strings.Contains(res.Text, "file://"+filepath.ToSlash(ws)) {
		t.Errorf("the host server's roots: %+v", res)
	}
}

func TestMisbehavingServersAreNamedAsSuch(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	mode := func(m string) map[string]any { return map[string]any{"env": map[string]string{mcptest.ModeEnv: m}} }
	servers := []Server{
		{Name: "crash", Config: echoServer(t, mode("crash"))},
		{Name: "garbage", Config: echoServer(t, mode("garbage"))},
		{Name: "hang", Config: echoServer(t, mode("hang"))},
	}
	start := time.Now()
	m := connected(t, servers, Options{Workspace: ws, Timeout: 3 * time.Second})
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the servers took %s to fail", took)
	}
	crash := statusOf(t, m, "crash").Err
	if crash == nil || !strings.HasPrefix(crash.Error(), "the server exited with status 3") || !strings.Contains(crash.Error(), mcptest.CrashText) || strings.Contains(crash.Error(), "broken pipe") {
		t.Errorf("crash: %v", crash)
	}
	garbage := statusOf(t, m, "garbage").Err
	if garbage == nil || !strings.Contains(garbage.Error(), "not JSON-RPC") || !strings.Contains(garbage.Error(), `"`+mcptest.GarbageLine+`"`) {
		t.Errorf("garbage: %v", garbage)
	}
	hang := statusOf(t, m, "hang").Err
	if hang == nil || !strings.Contains(hang.Error(), "the server hangs: it started but did not answer the initialize request within 3s") {
		t.Errorf("hang: %v", hang)
	}
	t.Logf("crash: %v\ngarbage: %v\nhang: %v", crash, garbage, hang)
	for _, e := range []error{crash, garbage, hang} {
		if errors.Is(e, context.DeadlineExceeded) && e != hang {
			t.Errorf("%v waited for the timeout", e)
		}
	}
}

func TestStdoutWatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, bad string
	}{
		{"json lines pass", "{\"a\":1}\n  [1]\n\n", ""},
		{"a banner", "{\"a\":1}\nServer ready\n{}\n", "Server ready"},
		{"only the first", "hello\nworld\n", "hello"},
		{"crlf", "oops\r\n", "oops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := &stdoutWatch{}
			for i := range len(tc.in) { // byte by byte: lines cross reads
				w.scan([]byte{tc.in[i]})
			}
			line, found := w.bad()
			if found != (tc.bad != "") || line != tc.bad {
				t.Errorf("bad() = %q, %v; want %q", line, found, tc.bad)
			}
		})
	}
}

func TestWaitStarted(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	lsb, err := local.New(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lsb.Close() })
	// The sandbox takes longer to open than the grace: its server is
	// waited for; the hanging server on the host is not, past the grace.
	slowOpen := func(ctx context.Context) (sandbox.Sandbox, error) {
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return lsb, nil
	}
	m := Start([]Server{
		{Name: "hang", Config: echoServer(t, map[string]any{"env": map[string]string{mcptest.ModeEnv: "hang"}})},
		{Name: "proj", Project: true, Config: echoServer(t, nil)},
	}, Options{Workspace: ws, Sandbox: slowOpen})
	t.Cleanup(func() { m.Close() })
	start := time.Now()
	if err := m.WaitStarted(t.Context(), 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if st := statusOf(t, m, "proj"); st.Connecting || st.Err != nil {
		t.Errorf("WaitStarted returned after %s before the sandbox's server connected: %+v", took, st)
	}
	if st := statusOf(t, m, "hang"); !st.Connecting {
		t.Errorf("the hanging server: %+v", st)
	}
	if took > 10*time.Second {
		t.Errorf("WaitStarted took %s", took)
	}
}
