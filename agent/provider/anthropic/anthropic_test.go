package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/integration/fakemodel"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "sk-ant-test"

// newModel returns a model talking to s.
func newModel(t *testing.T, s *fakemodel.Server, edit ...func(*Config)) *Model {
	t.Helper()
	cfg := Config{APIKey: testKey, BaseURL: s.URL + "/v1", Model: "claude-test"}
	for _, e := range edit {
		e(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.backoff = func(int) time.Duration { return 0 }
	return m
}

// collect drains a stream.
func collect(seq iter.Seq2[llm.Event, error]) ([]llm.Event, error) {
	var evs []llm.Event
	for ev, err := range seq {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// finish returns the stream's finish event, failing when it is not last.
func finish(t *testing.T, evs []llm.Event) llm.Event {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Type != llm.EventFinish {
		t.Fatalf("stream did not end with finish: %+v", evs)
	}
	return evs[len(evs)-1]
}

// deltas concatenates the deltas of one type and counts them.
func deltas(evs []llm.Event, typ llm.EventType) (string, int) {
	var b strings.Builder
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			b.WriteString(ev.Text)
			n++
		}
	}
	return b.String(), n
}

// body decodes request i's JSON body.
func body(t *testing.T, s *fakemodel.Server, i int) map[string]any {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) <= i {
		t.Fatalf("got %d requests, want more than %d", len(reqs), i)
	}
	m := reqs[i].JSON()
	if m == nil {
		t.Fatalf("request %d body is not JSON: %s", i, reqs[i].Body)
	}
	return m
}

// at walks a decoded JSON value: strings index objects, ints arrays.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, k := range path {
		switch k := k.(type) {
		case string:
			o, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %v is not an object", path, v)
			}
			v = o[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: no element %d in %v", path, k, v)
			}
			v = a[k]
		}
	}
	return v
}

// jsonEqual compares a decoded value with a JSON literal.
func jsonEqual(t *testing.T, got any, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	if !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		t.Errorf("got  %s\nwant %s", g, want)
	}
}

func TestTextStreamsInDeltasThenFinishes(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{Text: "Hello from the fake model.", Chunks: 4, InputTokens: 21, OutputTokens: 7})
	m := newModel(t, s)

	evs, err := collect(m.Stream(t.Context(), llm.Request{
		System:   "be brief",
		Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")},
	}))
	if err != nil {
		t.Fatal(err)
	}
	text, n := deltas(evs, llm.EventText)
	if text != "Hello from the fake model." || n != 4 {
		t.Errorf("text %q in %d deltas, want 4", text, n)
	}
	fin := finish(t, evs)
	want := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartText, Text: "Hello from the fake model.", Provider: Provider}}}
	if !reflect.DeepEqual(fin.Message, want) {
		t.Errorf("message %+v, want %+v", fin.Message, want)
	}
	if fin.Usage != (llm.Usage{InputTokens: 21, OutputTokens: 7}) || fin.StopReason != "end_turn" {
		t.Errorf("usage %+v, stop %q", fin.Usage, fin.StopReason)
	}

	b := body(t, s, 0)
	jsonEqual(t, b["system"], `[{"type":"text","text":"be brief"}]`)
	jsonEqual(t, b["messages"], `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`)
	if _, sent := b["thinking"]; sent {
		t.Errorf("thinking sent without reasoning: %v", b["thinking"])
	}
	if b["model"] != "claude-test" || b["stream"] != true || b["max_tokens"] != float64(DefaultMaxTokens) {
		t.Errorf("model %v, stream %v, max_tokens %v", b["model"], b["stream"], b["max_tokens"])
	}
}

func TestReasoningSignatureRoundTrip(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t,
		fakemodel.Reply{Reasoning: "the user wants a greeting", Text: "Hello!", Chunks: 3},
		fakemodel.Reply{Text: "Again."},
	)
	m := newModel(t, s)
	history := []llm.Message{llm.Text(llm.RoleUser, "greet me")}

	evs, err := collect(m.Stream(t.Context(), llm.Request{Messages: history, Reasoning: llm.ReasoningMedium}))
	if err != nil {
		t.Fatal(err)
	}
	if r, n := deltas(evs, llm.EventReasoning); r != "the user wants a greeting" || n != 3 {
		t.Errorf("reasoning %q in %d deltas", r, n)
	}
	// The usage of message_start comes first (the input is billed from
	// there, whatever happens to the stream), then the reasoning.
	if evs[0].Type != llm.EventUsage || evs[1].Type != llm.EventReasoning {
		t.Errorf("first events %s, %s, want usage, reasoning", evs[0].Type, evs[1].Type)
	}
	fin := finish(t, evs)
	sig := fakemodel.AnthropicSignature("the user wants a greeting")
	want := []llm.Part{
		{Type: llm.PartReasoning, Text: "the user wants a greeting", Signature: sig, Provider: Provider},
		{Type: llm.PartText, Text: "Hello!", Provider: Provider},
	}
	if !reflect.DeepEqual(fin.Message.Parts, want) {
		t.Errorf("parts %+v, want %+v", fin.Message.Parts, want)
	}
	jsonEqual(t, body(t, s, 0)["thinking"], `{"type":"enabled","budget_tokens":8192}`)

	history = append(history, fin.Message, llm.Text(llm.RoleUser, "again"))
	if _, err := collect(m.Stream(t.Context(), llm.Request{Messages: history, Reasoning: llm.ReasoningMedium})); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, at(t, body(t, s, 1), "messages", 1), `{"role":"assistant","content":[
		{"type":"thinking","thinking":"the user wants a greeting","signature":"`+sig+`"},
		{"type":"text","text":"Hello!"}]}`)
}

func TestToolCalls(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{
		Text: "Let me look.",
		ToolCalls: []fakemodel.ToolCall{
			{Name: "read_file", Input: `{"path":"main.go","limit":10}`},
			{ID: "toolu_given", Name: "glob", Input: `{"pattern":"**/*.go"}`},
		},
		InputTokens: 5, OutputTokens: 9,
	})
	m := newModel(t, s)
	req := llm.Request{
		Messages: []llm.Message{llm.Text(llm.RoleUser, "read main.go")},
		Tools: []llm.ToolSpec{{
			Name:        "read_file",
			Description: "Read a file.",
			Schema:      json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
		}},
	}
	evs, err := collect(m.Stream(t.Context(), req))
	if err != nil {
		t.Fatal(err)
	}

	var order []string
	calls := map[string]llm.Part{}
	for _, ev := range evs {
		switch ev.Type {
		case llm.EventToolStart:
			order = append(order, "start "+ev.Call.Name)
			if ev.Call.CallID == "" || ev.Call.Input != nil {
				t.Errorf("tool_start %+v: want an id and no input", ev.Call)
			}
		case llm.EventToolCall:
			order = append(order, "call "+ev.Call.Name)
			calls[ev.Call.Name] = ev.Call
		}
	}
	if got := strings.Join(order, ", "); got != "start read_file, call read_file, start glob, call glob" {
		t.Errorf("tool events: %s", got)
	}
	if c := calls["read_file"]; string(c.Input) != `{"path":"main.go","limit":10}` || !strings.HasPrefix(c.CallID, "toolu_") {
		t.Errorf("read_file call %+v (input %s)", c, c.Input)
	}
	if c := calls["glob"]; string(c.Input) != `{"pattern":"**/*.go"}` || c.CallID != "toolu_given" {
		t.Errorf("glob call %+v (input %s)", c, c.Input)
	}
	fin := finish(t, evs)
	if fin.StopReason != "tool_use" || len(fin.Message.Parts) != 3 || fin.Message.Parts[1].Type != llm.PartToolCall {
		t.Errorf("finish %+v", fin)
	}
	jsonEqual(t, body(t, s, 0)["tools"], `[{"name":"read_file","description":"Read a file.",
		"input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}}]`)

	// The results go back as tool_result blocks paired with the ids.
	readID := calls["read_file"].CallID
	history := append(req.Messages, fin.Message, llm.Message{Role: llm.RoleTool, Parts: []llm.Part{
		{Type: llm.PartToolResult, CallID: readID, Name: "read_file", Output: "package main"},
		{Type: llm.PartToolResult, CallID: "toolu_given", Name: "glob", Output: "bad pattern", IsError: true},
	}})
	if _, err := collect(m.Stream(t.Context(), llm.Request{Messages: history, Tools: req.Tools})); err != nil {
		t.Fatal(err)
	}
	b := body(t, s, 1)
	jsonEqual(t, at(t, b, "messages", 1), `{"role":"assistant","content":[
		{"type":"text","text":"Let me look."},
		{"type":"tool_use","id":"`+readID+`","name":"read_file","input":{"path":"main.go","limit":10}},
		{"type":"tool_use","id":"toolu_given","name":"glob","input":{"pattern":"**/*.go"}}]}`)
	jsonEqual(t, at(t, b, "messages", 2), `{"role":"user","content":[
		{"type":"tool_result","tool_use_id":"`+readID+`","content":[{"type":"text","text":"package main"}]},
		{"type":"tool_result","tool_use_id":"toolu_given","is_error":true,"content":[{"type":"text","text":"bad pattern"}]}]}`)
}

func user(s string) llm.Message { return llm.Text(llm.RoleUser, s) }

func call(id, input string) llm.Part {
	return llm.Part{Type: llm.PartToolCall, CallID: id, Name: "bash", Input: json.RawMessage(input)}
}

func result(id, out string) llm.Message {
	return llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, CallID: id, Name: "bash", Output: out}}}
}

func TestRequestTranslation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		req   llm.Request
		path  []any  // where to look in the body
		want  string // JSON
		check func(t *testing.T, b map[string]any)
	}{
		{
			name: "invalid tool-call JSON in the history is sent as an empty object",
			req: llm.Request{Messages: []llm.Message{
				user("run it"),
				{Role: llm.RoleAssistant, Parts: []llm.Part{call("toolu_1", `{"cmd": "ls`), call("toolu_2", `["not","an","object"]`), call("toolu_3", ``)}},
				{Role: llm.RoleTool, Parts: []llm.Part{
					{Type: llm.PartToolResult, CallID: "toolu_1", Output: "invalid JSON arguments", IsError: true},
					{Type: llm.PartToolResult, CallID: "toolu_2", Output: "invalid", IsError: true},
					{Type: llm.PartToolResult, CallID: "toolu_3", Output: ""},
				}},
			}},
			path: []any{"messages"},
			want: `[{"role":"user","content":[{"type":"text","text":"run it"}]},
				{"role":"assistant","content":[
					{"type":"tool_use","id":"toolu_1","name":"bash","input":{}},
					{"type":"tool_use","id":"toolu_2","name":"bash","input":{}},
					{"type":"tool_use","id":"toolu_3","name":"bash","input":{}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":[{"type":"text","text":"invalid JSON arguments"}]},
					{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"invalid"}]},
					{"type":"tool_result","tool_use_id":"toolu_3"}]}]`,
		},
		{
			name: "foreign reasoning is dropped and redacted thinking kept",
			req: llm.Request{Messages: []llm.Message{
				user("q"),
				{Role: llm.RoleAssistant, Parts: []llm.Part{
					{Type: llm.PartReasoning, Text: "openai thoughts", Encrypted: "gAAA", ItemID: "rs_1", Provider: "openai"},
					{Type: llm.PartReasoning, Encrypted: "opaque-data", Provider: Provider},
					{Type: llm.PartReasoning, Text: "unsigned", Provider: Provider},
					{Type: llm.PartText, Text: "a"},
				}},
				user("q2"),
			}},
			path: []any{"messages", 1},
			want: `{"role":"assistant","content":[{"type":"redacted_thinking","data":"opaque-data"},{"type":"text","text":"a"}]}`,
		},
		{
			name: "consecutive messages of one role are merged, tool results first",
			req: llm.Request{Messages: []llm.Message{
				user("a"), user("b"),
				{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartText, Text: "c"}}},
				{Role: llm.RoleAssistant, Parts: []llm.Part{call("toolu_9", `{}`)}},
				{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartReasoning, Text: "x", Provider: "openai"}}},
				user("queued while the tool ran"),
				result("toolu_9", "done"),
				{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText}}},
			}},
			path: []any{"messages"},
			want: `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
				{"role":"assistant","content":[{"type":"text","text":"c"},{"type":"tool_use","id":"toolu_9","name":"bash","input":{}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"toolu_9","content":[{"type":"text","text":"done"}]},
					{"type":"text","text":"queued while the tool ran"}]}]`,
		},
		{
			name: "low thinking keeps the default max tokens",
			req:  llm.Request{Messages: []llm.Message{user("q")}, Reasoning: llm.ReasoningLow},
			check: func(t *testing.T, b map[string]any) {
				jsonEqual(t, b["thinking"], `{"type":"enabled","budget_tokens":2048}`)
				jsonEqual(t, b["max_tokens"], `16384`)
			},
		},
		{
			name: "high thinking raises max tokens above the budget",
			req:  llm.Request{Messages: []llm.Message{user("q")}, Reasoning: llm.ReasoningHigh},
			check: func(t *testing.T, b map[string]any) {
				jsonEqual(t, b["thinking"], `{"type":"enabled","budget_tokens":16384}`)
				jsonEqual(t, b["max_tokens"], `24576`)
			},
		},
		{
			name: "max thinking",
			req:  llm.Request{Messages: []llm.Message{user("q")}, Reasoning: llm.ReasoningMax, MaxTokens: 64000},
			check: func(t *testing.T, b map[string]any) {
				jsonEqual(t, b["thinking"], `{"type":"enabled","budget_tokens":32768}`)
				jsonEqual(t, b["max_tokens"], `64000`)
			},
		},
		{
			name: "off sends no thinking and the request's max tokens win",
			req:  llm.Request{Messages: []llm.Message{user("q")}, Reasoning: llm.ReasoningOff, MaxTokens: 1000},
			check: func(t *testing.T, b map[string]any) {
				if _, sent := b["thinking"]; sent {
					t.Errorf("thinking %v", b["thinking"])
				}
				jsonEqual(t, b["max_tokens"], `1000`)
			},
		},
		{
			name: "thinking switched on in the middle of a tool loop waits for the next turn",
			req: llm.Request{Reasoning: llm.ReasoningHigh, Messages: []llm.Message{
				user("q"),
				{Role: llm.RoleAssistant, Parts: []llm.Part{call("toolu_1", `{}`)}},
				result("toolu_1", "ok"),
			}},
			check: func(t *testing.T, b map[string]any) {
				if _, sent := b["thinking"]; sent {
					t.Errorf("thinking %v", b["thinking"])
				}
			},
		},
		{
			name: "thinking goes on in a tool loop that thought",
			req: llm.Request{Reasoning: llm.ReasoningLow, Messages: []llm.Message{
				user("q"),
				{Role: llm.RoleAssistant, Parts: []llm.Part{
					{Type: llm.PartReasoning, Text: "t", Signature: "s", Provider: Provider},
					call("toolu_1", `{}`),
				}},
				result("toolu_1", "ok"),
			}},
			path: []any{"thinking"},
			want: `{"type":"enabled","budget_tokens":2048}`,
		},
		{
			name: "a tool without a schema takes an empty object",
			req:  llm.Request{Messages: []llm.Message{user("q")}, Tools: []llm.ToolSpec{{Name: "ping"}}},
			path: []any{"tools"},
			want: `[{"name":"ping","input_schema":{"type":"object","properties":{}}}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, fakemodel.Reply{Text: "ok"})
			if _, err := collect(newModel(t, s).Stream(t.Context(), tt.req)); err != nil {
				t.Fatal(err)
			}
			b := body(t, s, 0)
			if tt.path != nil {
				jsonEqual(t, at(t, b, tt.path...), tt.want)
			}
			if tt.check != nil {
				tt.check(t, b)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  llm.Request
		want string
	}{
		{"unknown reasoning level", llm.Request{Reasoning: "extreme"}, `unknown reasoning level "extreme"`},
		{"invalid tool schema", llm.Request{Tools: []llm.ToolSpec{{Name: "t", Schema: json.RawMessage(`{`)}}}, "tool t: invalid schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t)
			_, err := collect(newModel(t, s).Stream(t.Context(), tt.req))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
			if n := len(s.Requests()); n != 0 {
				t.Errorf("sent %d requests", n)
			}
		})
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	now := map[string]string{"retry-after": "0"}
	tests := []struct {
		name       string
		replies    []fakemodel.Reply
		maxRetries int
		wantCalls  int
		wantStatus int // 0: success
	}{
		{
			name:      "503, 503, then success takes three attempts",
			replies:   []fakemodel.Reply{{Status: 503, Header: now}, {Status: 503, Header: now}, {Text: "ok"}},
			wantCalls: 3,
		},
		{
			name:      "rate limit and overloaded are retried",
			replies:   []fakemodel.Reply{{Status: 429, Header: now}, {Status: 529, Header: now}, {Text: "ok"}},
			wantCalls: 3,
		},
		{
			name:       "retries run out after MaxRetries",
			replies:    []fakemodel.Reply{{Status: 503, Header: now}, {Status: 503, Header: now}, {Status: 503, Header: now}, {Status: 503, Header: now}, {Text: "ok"}},
			wantCalls:  4,
			wantStatus: 503,
		},
		{
			name:       "negative MaxRetries means one attempt",
			replies:    []fakemodel.Reply{{Status: 503, Header: now}, {Text: "ok"}},
			maxRetries: -1,
			wantCalls:  1,
			wantStatus: 503,
		},
		{
			name:       "a bad request is not retried",
			replies:    []fakemodel.Reply{{Status: 400}, {Text: "ok"}},
			wantCalls:  1,
			wantStatus: 400,
		},
		{
			name:      "a stream that ends before its first event is sent again",
			replies:   []fakemodel.Reply{{CutAfterText: true}, {Text: "ok"}},
			wantCalls: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, tt.replies...)
			m := newModel(t, s, func(c *Config) { c.MaxRetries = tt.maxRetries })
			var retries []llm.Retry
			ctx := llm.WithRetryReport(t.Context(), func(r llm.Retry) { retries = append(retries, r) })
			evs, err := collect(m.Stream(ctx, llm.Request{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}}))
			if n := len(s.Requests()); n != tt.wantCalls {
				t.Errorf("%d requests, want %d", n, tt.wantCalls)
			}
			// Every attempt after the first was announced, numbered.
			if len(retries) != tt.wantCalls-1 {
				t.Errorf("%d retries reported, want %d: %+v", len(retries), tt.wantCalls-1, retries)
			}
			attempts := DefaultMaxRetries + 1
			if tt.maxRetries != 0 {
				attempts = max(tt.maxRetries, 0) + 1
			}
			for i, r := range retries {
				if r.Attempt != i+2 || r.Attempts != attempts || r.Reason == "" {
					t.Errorf("retry %d reported as %+v", i, r)
				}
			}
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if text, _ := deltas(evs, llm.EventText); text != "ok" {
					t.Errorf("text %q", text)
				}
				finish(t, evs)
				return
			}
			var apiErr *sdk.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.wantStatus {
				t.Fatalf("error %v, want an API error with status %d", err, tt.wantStatus)
			}
			var status *llm.StatusError
			if !errors.As(err, &status) || status.Status != tt.wantStatus || strings.Contains(err.Error(), "{") {
				t.Errorf("error %q, want an llm.StatusError with status %d and no JSON", err, tt.wantStatus)
			}
			if len(evs) != 0 {
				t.Errorf("events before the error: %+v", evs)
			}
		})
	}
}

func TestStreamCutAfterText(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{Text: "partial answer", Chunks: 3, CutAfterText: true}, fakemodel.Reply{Text: "not asked for"})
	evs, err := collect(newModel(t, s).Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}}))
	if !errors.Is(err, llm.ErrNoFinish) {
		t.Fatalf("error %v, want ErrNoFinish", err)
	}
	if text, n := deltas(evs, llm.EventText); text != "partial answer" || n != 3 || len(evs) != 4 || evs[0].Type != llm.EventUsage {
		t.Errorf("events before the error: %+v", evs)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests: a stream that yielded events must not be retried", n)
	}
}

func TestStopIteratingEarly(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{Text: "one two three four", Chunks: 4})
	n := 0
	for _, err := range newModel(t, s).Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 {
		t.Errorf("got %d events", n)
	}
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := collect(newModel(t, s).Stream(ctx, llm.Request{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}}))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

func TestBaseURLForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		base     func(url string) string
		wantPath string
	}{
		{"with /v1, as users are shown", func(u string) string { return u + "/v1" }, "/v1/messages"},
		{"with /v1/", func(u string) string { return u + "/v1/" }, "/v1/messages"},
		{"bare host", func(u string) string { return u }, "/v1/messages"},
		{"bare host with a slash", func(u string) string { return u + "/" }, "/v1/messages"},
		{"compatible endpoint under a prefix", func(u string) string { return u + "/anthropic" }, "/anthropic/v1/messages"},
		{"compatible endpoint under a prefix with /v1", func(u string) string { return u + "/api/anthropic/v1" }, "/api/anthropic/v1/messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, fakemodel.Reply{Text: "ok"})
			m := newModel(t, s, func(c *Config) { c.BaseURL = tt.base(s.URL) })
			if _, err := collect(m.Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}})); err != nil {
				t.Fatal(err)
			}
			if got := s.Requests()[0].Path; got != tt.wantPath {
				t.Errorf("path %q, want %q", got, tt.wantPath)
			}
			ids, err := ListModels(t.Context(), Config{APIKey: testKey, BaseURL: tt.base(s.URL)})
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimSuffix(tt.wantPath, "messages") + "models"; s.Requests()[1].Path != want {
				t.Errorf("models path %q, want %q", s.Requests()[1].Path, want)
			}
			if !reflect.DeepEqual(ids, []string{"fake-large", "fake-small"}) {
				t.Errorf("ids %v", ids)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{Text: "ok"})
	if _, err := collect(newModel(t, s).Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}})); err != nil {
		t.Fatal(err)
	}
	if _, err := ListModels(t.Context(), Config{APIKey: testKey, BaseURL: s.URL + "/v1"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Requests() {
		if got := r.Header.Get("x-api-key"); got != testKey {
			t.Errorf("%s %s: x-api-key %q", r.Method, r.Path, got)
		}
		if got := r.Header.Get("Authorization"); got != "" {
			t.Errorf("%s %s: Authorization %q, want none", r.Method, r.Path, got)
		}
		if r.Header.Get("anthropic-version") == "" {
			t.Errorf("%s %s: no anthropic-version", r.Method, r.Path)
		}
	}
}

// Not parallel: it sets the environment.
func TestEnvironmentIsIgnored(t *testing.T) {
	s := fakemodel.New(t, fakemodel.Reply{Text: "ok"})
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_API_KEY", "env-key")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "x-api-key: env-header")
	if _, err := collect(newModel(t, s).Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}})); err != nil {
		t.Fatal(err)
	}
	if got := s.Requests()[0].Header.Values("x-api-key"); !reflect.DeepEqual(got, []string{testKey}) {
		t.Errorf("x-api-key %q", got)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want error
		text string
	}{
		{name: "no model", cfg: Config{APIKey: "k"}, want: ErrNoModel},
		{name: "no API key", cfg: Config{Model: "m"}, want: ErrNoAPIKey},
		{name: "base URL without a scheme", cfg: Config{APIKey: "k", Model: "m", BaseURL: "api.anthropic.com/v1"}, text: "want http:// or https://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %v, want %v %q", err, tt.want, tt.text)
			}
		})
	}
	if _, err := ListModels(t.Context(), Config{BaseURL: "http://127.0.0.1:1"}); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("ListModels error %v, want ErrNoAPIKey", err)
	}
}

func TestListModelsError(t *testing.T) {
	t.Parallel()
	// The fake lists models for any key; a 401 needs its own server.
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
	}))
	defer srv.Close()
	_, err := ListModels(t.Context(), Config{APIKey: "wrong", BaseURL: srv.URL + "/v1"})
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("error %v, want a 401", err)
	}
	if want := "list anthropic models: 401 Unauthorized: invalid x-api-key"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls: a 401 is not retried", n)
	}
}

func TestInfo(t *testing.T) {
	t.Parallel()
	m, err := New(Config{APIKey: "k", Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Info(); got != (llm.ModelInfo{Provider: "anthropic", Model: "claude-sonnet-4-5"}) {
		t.Errorf("info %+v", got)
	}
}

func TestAdaptiveThinking(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]bool{
		"claude-sonnet-4-5": false, "claude-sonnet-4-5-20250929": false, "claude-opus-4-1": false,
		"claude-opus-4-20250514": false, "claude-haiku-4-5": false, "claude-3-7-sonnet-latest": false, "claude-test": false,
		"claude-sonnet-4-6": true, "claude-opus-4-6": true, "claude-opus-4-7": true, "claude-opus-5": true,
		"claude-sonnet-5-5": true, "claude-haiku-5-5": true, "claude-fable-5-2": true, "claude-mythos-preview": true,
		"anthropic.claude-opus-4-6-v1": true, "gpt-5": false,
	} {
		if got := adaptiveThinking(model); got != want {
			t.Errorf("adaptiveThinking(%q) = %v, want %v", model, got, want)
		}
	}

	tests := []struct {
		name, model string
		req         llm.Request
		thinking    string // "" = not sent
		effort      string
	}{
		{"an effort instead of a budget", "claude-opus-4-7", llm.Request{Messages: []llm.Message{user("q")}, Reasoning: llm.ReasoningMedium}, `{"type":"adaptive"}`, "medium"},
		{"max where the family has it", "claude-opus-4-6", llm.Request{Messages: []llm.Message{user("q")}, Reasoning: llm.ReasoningMax}, `{"type":"adaptive"}`, "max"},
		{"high where it has not", "claude-sonnet-4-6", llm.Request{Messages: []llm.Message{user("q")}, Reasoning: llm.ReasoningMax}, `{"type":"adaptive"}`, "high"},
		{"off sends nothing", "claude-fable-5-2", llm.Request{Messages: []llm.Message{user("q")}, Reasoning: llm.ReasoningOff}, "", ""},
		{"a tool loop whose last step did not think goes on thinking", "claude-sonnet-5-5", llm.Request{Reasoning: llm.ReasoningHigh, Messages: []llm.Message{
			user("q"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{call("toolu_1", `{}`)}},
			result("toolu_1", "ok"),
		}}, `{"type":"adaptive"}`, "high"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, fakemodel.Reply{Text: "ok"})
			m := newModel(t, s, func(c *Config) { c.Model = tt.model })
			if _, err := collect(m.Stream(t.Context(), tt.req)); err != nil {
				t.Fatal(err)
			}
			b := body(t, s, 0)
			if tt.thinking == "" {
				if b["thinking"] != nil || b["output_config"] != nil {
					t.Errorf("thinking %v, output_config %v", b["thinking"], b["output_config"])
				}
				return
			}
			jsonEqual(t, b["thinking"], tt.thinking)
			jsonEqual(t, b["output_config"], `{"effort":"`+tt.effort+`"}`)
		})
	}
}

// TestACutStreamReportsTheInputItWasBilled: message_start's usage comes
// as a usage event, so a stream cut before message_delta still counts
// the input tokens the API billed.
func TestACutStreamReportsTheInputItWasBilled(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{Text: "partial", CutAfterText: true, InputTokens: 321, OutputTokens: 5})
	evs, _ := collect(newModel(t, s).Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}}))
	if len(evs) == 0 || evs[0].Type != llm.EventUsage || evs[0].Usage.InputTokens != 321 {
		t.Errorf("events %+v", evs)
	}
}
