package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/agent/provider/openai"
	"github.com/shiroagent/shiro/integration/fakemodel"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// modes are the three ways to reach a fake server: the two official
// protocols pinned by Mode, and a compatible server.
var modes = []struct {
	name string
	cfg  openai.Config
	path string
}{
	{"responses", openai.Config{Mode: openai.ModeResponses, APIKey: "sk-test", Model: "gpt-5"}, "/v1/responses"},
	{"chat", openai.Config{Mode: openai.ModeChat, APIKey: "sk-test", Model: "gpt-5"}, "/v1/chat/completions"},
	{"compatible", openai.Config{Model: "qwen3:8b"}, "/v1/chat/completions"},
}

// client is an HTTP client whose idle connections close with the test.
func client(t *testing.T) *http.Client {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// newModel makes a model talking to s. A cfg with a Mode is the official
// API (no BaseURL) with its requests redirected to s; one without is a
// compatible server at s's URL.
func newModel(t *testing.T, s *fakemodel.Server, cfg openai.Config) llm.Model {
	t.Helper()
	cfg.HTTPClient = client(t)
	if cfg.Mode != "" {
		cfg.HTTPClient.Transport = redirect{host: strings.TrimPrefix(s.URL, "http://"), next: cfg.HTTPClient.Transport}
	} else {
		cfg.BaseURL = s.URL + "/v1"
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// redirect sends requests for the official API to a fake server.
type redirect struct {
	host string
	next http.RoundTripper
}

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = "http", r.host
	return r.next.RoundTrip(req)
}

// officialModel makes a model for the official endpoint with no Mode (so
// the fallback chain) whose requests land on s. It returns the notices.
func officialModel(t *testing.T, s *fakemodel.Server) (llm.Model, func() []string) {
	t.Helper()
	var (
		mu      sync.Mutex
		notices []string
	)
	cfg := openai.Config{APIKey: "sk-test", Model: "gpt-5"}
	cfg.HTTPClient = &http.Client{Transport: redirect{host: strings.TrimPrefix(s.URL, "http://"), next: client(t).Transport}}
	cfg.OnNotice = func(n string) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n)
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(notices)
	}
}

// collect runs one step and returns its events and the error ending it.
func collect(t *testing.T, m llm.Model, req llm.Request) ([]llm.Event, error) {
	t.Helper()
	return collectCtx(t.Context(), t, m, req)
}

func collectCtx(ctx context.Context, t *testing.T, m llm.Model, req llm.Request) ([]llm.Event, error) {
	t.Helper()
	var evs []llm.Event
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// finish returns the finish event, which must end evs.
func finish(t *testing.T, evs []llm.Event) llm.Event {
	t.Helper()
	if len(evs) == 0 || evs[len(evs)-1].Type != llm.EventFinish {
		t.Fatalf("events do not end with finish: %v", types(evs))
	}
	return evs[len(evs)-1]
}

// types lists the events' types, with tool calls' ids.
func types(evs []llm.Event) string {
	var out []string
	for _, ev := range evs {
		s := string(ev.Type)
		if ev.Type == llm.EventToolStart || ev.Type == llm.EventToolCall {
			s += "(" + ev.Call.CallID + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// paths lists the recorded requests' paths.
func paths(s *fakemodel.Server) []string {
	var out []string
	for _, r := range s.Requests() {
		out = append(out, r.Path)
	}
	return out
}

var ask = llm.Request{System: "be brief", Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}}

func TestStreamText(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name+" streams text then finishes with usage", func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, fakemodel.Reply{Text: "hello there, world", Chunks: 3, InputTokens: 12, OutputTokens: 5})
			evs, err := collect(t, newModel(t, s, mode.cfg), ask)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := types(evs), "text text text finish"; got != want {
				t.Fatalf("events %s, want %s", got, want)
			}
			var text string
			for _, ev := range evs[:3] {
				text += ev.Text
			}
			fin := finish(t, evs)
			if text != "hello there, world" || fin.Usage != (llm.Usage{InputTokens: 12, OutputTokens: 5}) || fin.StopReason != "stop" {
				t.Errorf("text %q, usage %+v, stop %q", text, fin.Usage, fin.StopReason)
			}
			msg := fin.Message
			if msg.Role != llm.RoleAssistant || len(msg.Parts) != 1 || msg.Parts[0].Text != "hello there, world" || msg.Parts[0].Provider != "openai" {
				t.Errorf("message %+v", msg)
			}
			if mode.name == "responses" && !strings.HasPrefix(msg.Parts[0].ItemID, "msg_") {
				t.Errorf("text part has item id %q", msg.Parts[0].ItemID)
			}
			reqs := s.Requests()
			if len(reqs) != 1 || reqs[0].Path != mode.path {
				t.Fatalf("requests %v", paths(s))
			}
			body := reqs[0].JSON()
			if body["model"] != mode.cfg.Model || body["stream"] != true {
				t.Errorf("body %s", reqs[0].Body)
			}
			if mode.path == "/v1/chat/completions" {
				if so, _ := body["stream_options"].(map[string]any); so["include_usage"] != true {
					t.Errorf("stream_options %v", body["stream_options"])
				}
				msgs := body["messages"].([]any)
				if sys := msgs[0].(map[string]any); sys["role"] != "system" || sys["content"] != "be brief" {
					t.Errorf("system message %v", sys)
				}
			} else if body["instructions"] != "be brief" || body["store"] != false {
				t.Errorf("body %s", reqs[0].Body)
			}
		})
	}
}

func TestToolStartBeforeToolCall(t *testing.T) {
	t.Parallel()
	reply := fakemodel.Reply{
		Text: "looking",
		ToolCalls: []fakemodel.ToolCall{
			{ID: "call_a", Name: "read_file", Input: `{"path":"a.go"}`},
			{ID: "call_b", Name: "glob", Input: `{"pattern":"*.go"}`},
		},
	}
	tests := []struct {
		mode int
		want string
	}{
		{0, "text tool_start(call_a) tool_call(call_a) tool_start(call_b) tool_call(call_b) finish"},
		{1, "text tool_start(call_a) tool_start(call_b) tool_call(call_a) tool_call(call_b) finish"},
		{2, "text tool_start(call_a) tool_start(call_b) tool_call(call_a) tool_call(call_b) finish"},
	}
	for _, tt := range tests {
		mode := modes[tt.mode]
		t.Run(mode.name+" announces each call before completing it", func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, reply)
			evs, err := collect(t, newModel(t, s, mode.cfg), ask)
			if err != nil {
				t.Fatal(err)
			}
			if got := types(evs); got != tt.want {
				t.Fatalf("events\n got %s\nwant %s", got, tt.want)
			}
			for _, ev := range evs {
				if ev.Type == llm.EventToolStart && (ev.Call.Name == "" || len(ev.Call.Input) != 0) {
					t.Errorf("tool_start %+v", ev.Call)
				}
				if ev.Type == llm.EventToolCall && ev.Call.CallID == "call_a" && (ev.Call.Name != "read_file" || string(ev.Call.Input) != `{"path":"a.go"}`) {
					t.Errorf("tool_call %+v", ev.Call)
				}
			}
			fin := finish(t, evs)
			if fin.StopReason != "tool_calls" {
				t.Errorf("stop reason %q", fin.StopReason)
			}
			var kinds []string
			for _, p := range fin.Message.Parts {
				kinds = append(kinds, string(p.Type)+":"+p.CallID)
			}
			if got, want := strings.Join(kinds, " "), "text: tool_call:call_a tool_call:call_b"; got != want {
				t.Errorf("message parts %s, want %s", got, want)
			}
			if got := string(fin.Message.Parts[2].Input); got != `{"pattern":"*.go"}` {
				t.Errorf("second call input %s", got)
			}
		})
	}
}

// inputItems returns the input items of a recorded Responses request.
func inputItems(t *testing.T, r fakemodel.Request) []map[string]any {
	t.Helper()
	var body struct {
		Input []map[string]any `json:"input"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Input
}

// chatWire returns the messages of a recorded Chat Completions request.
func chatWire(t *testing.T, r fakemodel.Request) []map[string]any {
	t.Helper()
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body.Messages
}

// secondStep runs a step that calls tools, answers the calls with results
// (the second one failed) and runs the next step, returning the assistant
// message of the first.
func secondStep(t *testing.T, m llm.Model, first llm.Request) llm.Message {
	t.Helper()
	evs, err := collect(t, m, first)
	if err != nil {
		t.Fatal(err)
	}
	assistant := finish(t, evs).Message
	results := llm.Message{Role: llm.RoleTool}
	for _, p := range assistant.Parts {
		if p.Type == llm.PartToolCall {
			failed := len(results.Parts) == 1
			results.Parts = append(results.Parts, llm.Part{Type: llm.PartToolResult, CallID: p.CallID, Name: p.Name, Output: "result " + p.Name, IsError: failed})
		}
	}
	next := first
	next.Messages = append(slices.Clone(first.Messages), assistant, results)
	if _, err := collect(t, m, next); err != nil {
		t.Fatal(err)
	}
	return assistant
}

func TestToolResultsPairedWithCalls(t *testing.T) {
	t.Parallel()
	reply := fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{
		{Name: "read_file", Input: `{"path":"a.go"}`},
		{Name: "glob", Input: `{"pattern":"*.go"}`},
	}}
	t.Run("responses sends the function_calls, then their outputs", func(t *testing.T) {
		t.Parallel()
		s := fakemodel.New(t, reply, fakemodel.Reply{Text: "done"})
		assistant := secondStep(t, newModel(t, s, modes[0].cfg), ask)
		items := inputItems(t, s.Requests()[1])
		if len(items) != 5 {
			t.Fatalf("input %v", items)
		}
		if items[0]["role"] != "user" || items[0]["content"] != "hi" {
			t.Errorf("user item %v", items[0])
		}
		for i, call := range assistant.Parts {
			fc, out := items[1+i], items[3+i]
			if fc["type"] != "function_call" || fc["call_id"] != call.CallID || fc["name"] != call.Name || fc["arguments"] != string(call.Input) || fc["id"] != call.ItemID {
				t.Errorf("function_call %v for %+v", fc, call)
			}
			if out["type"] != "function_call_output" || out["call_id"] != call.CallID {
				t.Errorf("function_call_output %v for %s", out, call.CallID)
			}
		}
		if items[3]["output"] != "result read_file" || items[4]["output"] != "Error: result glob" {
			t.Errorf("outputs %v, %v", items[3]["output"], items[4]["output"])
		}
	})
	for _, mode := range modes[1:] {
		t.Run(mode.name+" sends tool_calls then tool messages", func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, reply, fakemodel.Reply{Text: "done"})
			assistant := secondStep(t, newModel(t, s, mode.cfg), ask)
			msgs := chatWire(t, s.Requests()[1])
			if len(msgs) != 5 {
				t.Fatalf("messages %v", msgs)
			}
			a := msgs[2]
			calls, _ := a["tool_calls"].([]any)
			if a["role"] != "assistant" || len(calls) != 2 {
				t.Fatalf("assistant message %v", a)
			}
			for i, call := range assistant.Parts {
				c := calls[i].(map[string]any)
				fn := c["function"].(map[string]any)
				if c["id"] != call.CallID || c["type"] != "function" || fn["name"] != call.Name || fn["arguments"] != string(call.Input) {
					t.Errorf("tool call %v for %+v", c, call)
				}
				tm := msgs[3+i]
				if tm["role"] != "tool" || tm["tool_call_id"] != call.CallID {
					t.Errorf("tool message %v for %s", tm, call.CallID)
				}
			}
			if msgs[4]["content"] != "Error: result glob" {
				t.Errorf("failed result %v", msgs[4]["content"])
			}
		})
	}
}

func TestReasoningSentBack(t *testing.T) {
	t.Parallel()
	const thought = "the file is small"
	reply := fakemodel.Reply{Reasoning: thought, Chunks: 2, ToolCalls: []fakemodel.ToolCall{{Name: "read_file", Input: `{"path":"a.go"}`}}}

	t.Run("responses sends the reasoning item right before its function call", func(t *testing.T) {
		t.Parallel()
		s := fakemodel.New(t, reply, fakemodel.Reply{Text: "done"})
		assistant := secondStep(t, newModel(t, s, modes[0].cfg), ask)
		r := assistant.Parts[0]
		if r.Type != llm.PartReasoning || r.Text != thought || !strings.HasPrefix(r.ItemID, "rs_") || r.Encrypted != fakemodel.OpenAIEncrypted(thought) {
			t.Fatalf("reasoning part %+v", r)
		}
		first := s.Requests()[0].JSON()
		if inc, _ := first["include"].([]any); len(inc) != 1 || inc[0] != "reasoning.encrypted_content" || first["store"] != false {
			t.Errorf("include %v, store %v", first["include"], first["store"])
		}
		items := inputItems(t, s.Requests()[1])
		if len(items) != 4 {
			t.Fatalf("input %v", items)
		}
		rs, fc := items[1], items[2]
		if rs["type"] != "reasoning" || rs["id"] != r.ItemID || rs["encrypted_content"] != r.Encrypted {
			t.Errorf("reasoning item %v", rs)
		}
		if summary, _ := rs["summary"].([]any); len(summary) != 1 || summary[0].(map[string]any)["text"] != thought {
			t.Errorf("summary %v", rs["summary"])
		}
		if fc["type"] != "function_call" || fc["id"] != assistant.Parts[1].ItemID || !strings.HasPrefix(fc["id"].(string), "fc_") {
			t.Errorf("function call %v", fc)
		}
	})

	t.Run("chat streams reasoning_content and never sends reasoning back", func(t *testing.T) {
		t.Parallel()
		s := fakemodel.New(t, reply, fakemodel.Reply{Text: "done"})
		m := newModel(t, s, modes[2].cfg)
		evs, err := collect(t, m, ask)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := types(evs), "reasoning reasoning tool_start("+evs[2].Call.CallID+") tool_call("+evs[2].Call.CallID+") finish"; got != want {
			t.Fatalf("events %s, want %s", got, want)
		}
		assistant := finish(t, evs).Message
		if r := assistant.Parts[0]; r.Type != llm.PartReasoning || r.Text != thought {
			t.Fatalf("reasoning part %+v", r)
		}
		secondStep(t, m, ask)
		msgs := chatWire(t, s.Requests()[2])
		for _, msg := range msgs {
			if _, ok := msg["reasoning_content"]; ok || msg["content"] == thought {
				t.Errorf("reasoning sent back: %v", msg)
			}
		}
	})

	t.Run("responses drops reasoning it cannot send and the ids that needed it", func(t *testing.T) {
		t.Parallel()
		s := fakemodel.New(t)
		history := []llm.Message{
			llm.Text(llm.RoleUser, "hi"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Type: llm.PartReasoning, Text: "claude thinking", Signature: "sig", Provider: "anthropic"},
				{Type: llm.PartText, Text: "from claude", Provider: "anthropic"},
				{Type: llm.PartReasoning, Text: "pruned", ItemID: "rs_1", Provider: "openai"},
				{Type: llm.PartToolCall, CallID: "call_1", Name: "glob", Input: json.RawMessage(`{}`), ItemID: "fc_1", Provider: "openai"},
				{Type: llm.PartReasoning, ItemID: "rs_2", Encrypted: "enc", Provider: "openai"},
				{Type: llm.PartText, Text: "kept", ItemID: "msg_2", Provider: "openai"},
			}},
			{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, CallID: "call_1", Output: "x"}}},
		}
		if _, err := collect(t, newModel(t, s, modes[0].cfg), llm.Request{Messages: history}); err != nil {
			t.Fatal(err)
		}
		items := inputItems(t, s.Requests()[0])
		var got []string
		for _, it := range items {
			id, _ := it["id"].(string)
			typ, _ := it["type"].(string)
			if typ == "" {
				typ = "message"
			}
			got = append(got, typ+":"+id)
		}
		want := "message: message: function_call: reasoning:rs_2 message:msg_2 function_call_output:"
		if strings.Join(got, " ") != want {
			t.Errorf("input items\n got %s\nwant %s", strings.Join(got, " "), want)
		}
		if items[1]["role"] != "assistant" || items[1]["content"] != "from claude" {
			t.Errorf("foreign text %v", items[1])
		}
		if summary, ok := items[3]["summary"].([]any); !ok || len(summary) != 0 {
			t.Errorf("empty summary sent as %v", items[3]["summary"])
		}
	})
}

func TestReasoningEffort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		mode  int
		model string
		level llm.Reasoning
		want  string // "" = no effort sent
	}{
		{"chat medium", 1, "gpt-5", llm.ReasoningMedium, "medium"},
		{"chat max tops out at high on gpt-5", 1, "gpt-5-mini", llm.ReasoningMax, "high"},
		{"chat max is xhigh on gpt-5.2", 1, "gpt-5.2", llm.ReasoningMax, "xhigh"},
		{"chat off sends nothing", 1, "gpt-5", llm.ReasoningOff, ""},
		{"chat gpt-4o takes no effort", 1, "gpt-4o", llm.ReasoningHigh, ""},
		{"responses low", 0, "o4-mini", llm.ReasoningLow, "low"},
		{"responses max on codex-max", 0, "gpt-5.1-codex-max", llm.ReasoningMax, "xhigh"},
		{"responses gpt-4.1 takes no effort", 0, "gpt-4.1", llm.ReasoningHigh, ""},
		{"compatible servers get the effort", 2, "deepseek-reasoner", llm.ReasoningHigh, "high"},
		{"compatible low", 2, "openai/gpt-oss-120b", llm.ReasoningLow, "low"},
		{"compatible max is high where xhigh is unknown", 2, "grok-4", llm.ReasoningMax, "high"},
		{"compatible max is xhigh on gpt-5.2", 2, "openai/gpt-5.2", llm.ReasoningMax, "xhigh"},
		{"compatible off sends nothing", 2, "qwen3:8b", llm.ReasoningOff, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t)
			cfg := modes[tt.mode].cfg
			cfg.Model = tt.model
			req := ask
			req.Reasoning = tt.level
			if _, err := collect(t, newModel(t, s, cfg), req); err != nil {
				t.Fatal(err)
			}
			body := s.Requests()[0].JSON()
			var got any
			if tt.mode == 0 {
				if r, ok := body["reasoning"].(map[string]any); ok {
					got = r["effort"]
				}
				if inc := body["include"]; (inc != nil) != (tt.model != "gpt-4.1") {
					t.Errorf("include %v", inc)
				}
			} else {
				got = body["reasoning_effort"]
			}
			if (tt.want == "" && got != nil) || (tt.want != "" && got != tt.want) {
				t.Errorf("effort %v, want %q", got, tt.want)
			}
		})
	}
}

func TestEndpointFallback(t *testing.T) {
	t.Parallel()
	const (
		chat = "/v1/chat/completions"
		resp = "/v1/responses"
	)
	quick := map[string]string{"retry-after": "0"}
	tests := []struct {
		name    string
		script  []fakemodel.Reply
		calls   int
		paths   []string
		notices int
		status  int  // of the last call's error; 0 = success
		cut     bool // the last call's stream was cut
	}{
		{
			name:    "404 on chat moves to responses once and sticks",
			script:  []fakemodel.Reply{{Status: 404}, {Text: "a"}, {Text: "b"}},
			calls:   2,
			paths:   []string{chat, resp, resp},
			notices: 1,
		},
		{
			name:  "a healthy chat endpoint never touches responses",
			calls: 2, paths: []string{chat, chat},
		},
		{
			name:    "400 on both surfaces the last error",
			script:  []fakemodel.Reply{{Status: 400}, {Status: 400}},
			calls:   1,
			paths:   []string{chat, resp},
			notices: 1,
			status:  400,
		},
		{
			name:   "401 propagates",
			script: []fakemodel.Reply{{Status: 401}},
			calls:  1, paths: []string{chat}, status: 401,
		},
		{
			name:   "429 propagates after the retries",
			script: []fakemodel.Reply{{Status: 429, Header: quick}, {Status: 429, Header: quick}, {Status: 429, Header: quick}, {Status: 429, Header: quick}},
			calls:  1, paths: []string{chat, chat, chat, chat}, status: 429,
		},
		{
			name:   "500 propagates after the retries",
			script: []fakemodel.Reply{{Status: 500, Header: quick}, {Status: 500, Header: quick}, {Status: 500, Header: quick}, {Status: 500, Header: quick}},
			calls:  1, paths: []string{chat, chat, chat, chat}, status: 500,
		},
		{
			name:   "501 the server says not to retry moves on",
			script: []fakemodel.Reply{{Status: 501, Header: map[string]string{"x-should-retry": "false"}}, {Text: "a"}},
			calls:  1, paths: []string{chat, resp}, notices: 1,
		},
		{
			name:   "a stream cut mid-way never switches",
			script: []fakemodel.Reply{{Text: "par", CutAfterText: true}, {Text: "a"}},
			calls:  2, paths: []string{chat, chat}, cut: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, tt.script...)
			m, notices := officialModel(t, s)
			if info := m.Info(); info != (llm.ModelInfo{Provider: "openai", Model: "gpt-5"}) {
				t.Errorf("info %+v", info)
			}
			var err error
			for i := range tt.calls {
				_, err = collect(t, m, ask)
				if tt.cut && i == 0 && !errors.Is(err, llm.ErrNoFinish) {
					t.Errorf("cut stream: error %v", err)
				}
			}
			if got := paths(s); !slices.Equal(got, tt.paths) {
				t.Errorf("paths %v, want %v", got, tt.paths)
			}
			var apiErr *oai.Error
			switch {
			case tt.status == 0 && err != nil:
				t.Errorf("error %v", err)
			case tt.status != 0 && (!errors.As(err, &apiErr) || apiErr.StatusCode != tt.status):
				t.Errorf("error %v, want status %d", err, tt.status)
			}
			ns := notices()
			if len(ns) != tt.notices {
				t.Fatalf("notices %q, want %d", ns, tt.notices)
			}
			for _, n := range ns {
				if !strings.HasPrefix(n, "endpoint fallback: chat-completions rejected the request, retrying on responses\n  ") {
					t.Errorf("notice %q", n)
				}
			}
		})
	}
}

func TestFallbackNoticeGivesTheReason(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{Status: 404}, fakemodel.Reply{Text: "ok"})
	m, notices := officialModel(t, s)
	if _, err := collect(t, m, ask); err != nil {
		t.Fatal(err)
	}
	want := "endpoint fallback: chat-completions rejected the request, retrying on responses\n  404 model_not_found The model `gpt-fake` does not exist or you do not have access to it."
	if ns := notices(); len(ns) != 1 || ns[0] != want {
		t.Errorf("notices %q\nwant %q", ns, want)
	}
}

func TestCompatibleBaseURLHasNoChain(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{Status: 404}, fakemodel.Reply{Text: "ok"})
	_, err := collect(t, newModel(t, s, openai.Config{Model: "llama3", OnNotice: func(n string) { t.Errorf("notice %q", n) }}), ask)
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("error %v", err)
	}
	if !strings.Contains(err.Error(), "does not exist") || !strings.HasPrefix(err.Error(), "chat-completions: ") {
		t.Errorf("error text %q", err)
	}
	if got := paths(s); !slices.Equal(got, []string{"/v1/chat/completions"}) {
		t.Errorf("paths %v", got)
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name+" 503, 503, ok takes three attempts", func(t *testing.T) {
			t.Parallel()
			busy := fakemodel.Reply{Status: 503, Header: map[string]string{"retry-after": "0"}}
			s := fakemodel.New(t, busy, busy, fakemodel.Reply{Text: "ok"})
			var retries []llm.Retry
			ctx := llm.WithRetryReport(t.Context(), func(r llm.Retry) { retries = append(retries, r) })
			evs, err := collectCtx(ctx, t, newModel(t, s, mode.cfg), ask)
			if err != nil {
				t.Fatal(err)
			}
			want := []llm.Retry{{Attempt: 2, Attempts: 4, Reason: "503 Service Unavailable"}, {Attempt: 3, Attempts: 4, Reason: "503 Service Unavailable"}}
			for i := range retries {
				retries[i].Reason, _, _ = strings.Cut(retries[i].Reason, ":") // the fake's message varies by format
			}
			if !slices.Equal(retries, want) {
				t.Errorf("retries reported %+v, want %+v", retries, want)
			}
			if fin := finish(t, evs); fin.Message.Parts[0].Text != "ok" {
				t.Errorf("message %+v", fin.Message)
			}
			reqs := s.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d attempts, want 3", len(reqs))
			}
			for i, r := range reqs {
				if r.Path != mode.path || r.Header.Get("X-Stainless-Retry-Count") != string(rune('0'+i)) {
					t.Errorf("attempt %d: %s retry count %q", i, r.Path, r.Header.Get("X-Stainless-Retry-Count"))
				}
			}
		})
	}
}

func TestStreamCut(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name+" yields the text, then an error", func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, fakemodel.Reply{Text: "partial answer", Chunks: 2, CutAfterText: true})
			evs, err := collect(t, newModel(t, s, mode.cfg), ask)
			if got := types(evs); got != "text text" {
				t.Errorf("events %s", got)
			}
			if !errors.Is(err, llm.ErrNoFinish) {
				t.Errorf("error %v, want %v", err, llm.ErrNoFinish)
			}
		})
	}
}

func TestStopEarly(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name+" stops after the first event", func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, fakemodel.Reply{Text: "a long answer", Chunks: 5})
			n := 0
			for _, err := range newModel(t, s, mode.cfg).Stream(t.Context(), ask) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				break
			}
			if n != 1 {
				t.Errorf("got %d events", n)
			}
		})
	}
}

// TestCompatibleWithoutKey is not parallel: it sets the environment.
func TestCompatibleWithoutKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_ORG_ID", "org-from-env")
	tests := []struct {
		name, key, want string
	}{
		{"no key sends no authorization", "", ""},
		{"a key is a bearer token", "sk-local", "Bearer sk-local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fakemodel.New(t, fakemodel.Reply{Text: "ok"})
			m, err := openai.New(openai.Config{BaseURL: s.URL + "/v1", Model: "llama3", APIKey: tt.key})
			if err != nil {
				t.Fatal(err)
			}
			evs, err := collect(t, m, ask)
			if err != nil {
				t.Fatal(err)
			}
			finish(t, evs)
			h := s.Requests()[0].Header
			if h.Get("Authorization") != tt.want || h.Get("OpenAI-Organization") != "" {
				t.Errorf("headers %v", h)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  openai.Config
		want error
	}{
		{"the official endpoint needs a key", openai.Config{Model: "gpt-5"}, openai.ErrNoAPIKey},
		{"the official URL needs a key too", openai.Config{Model: "gpt-5", BaseURL: "https://api.openai.com/v1"}, openai.ErrNoAPIKey},
		{"compatible mode at the official URL does not", openai.Config{Model: "gpt-5", Compatible: true}, nil},
		{"a local server does not", openai.Config{Model: "llama3", BaseURL: "http://localhost:11434/v1"}, nil},
		{"a model is required", openai.Config{APIKey: "k"}, openai.ErrNoModel},
		{"modes are checked", openai.Config{APIKey: "k", Model: "gpt-5", Mode: "completions"}, openai.ErrMode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := openai.New(tt.cfg)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
		})
	}
}

func TestListModels(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t)
	ids, err := openai.ListModels(t.Context(), openai.Config{BaseURL: s.URL + "/v1", APIKey: "sk-test", HTTPClient: client(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"fake-large", "fake-small"}) {
		t.Errorf("ids %v", ids)
	}
	r := s.Requests()[0]
	if r.Method != http.MethodGet || r.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("request %s %s %v", r.Method, r.Path, r.Header)
	}
}
