package fakemodel_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

// openaiEvent is one decoded server-sent event; Done marks data: [DONE].
type openaiEvent struct {
	Name string
	Data map[string]any
	Done bool
}

// postOpenAI sends a request to path and returns the response.
func postOpenAI(t *testing.T, url, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// readOpenAIEvents decodes a whole event stream.
func readOpenAIEvents(t *testing.T, r io.Reader) []openaiEvent {
	t.Helper()
	var out []openaiEvent
	var cur openaiEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Name != "" || cur.Data != nil || cur.Done {
				out = append(out, cur)
			}
			cur = openaiEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case line == "data: [DONE]":
			cur.Done = true
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.Data); err != nil {
				t.Fatalf("bad data line %q: %v", line, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// responsesNames lists the event names, checking each matches its type and
// that sequence numbers count up from 0.
func responsesNames(t *testing.T, evs []openaiEvent) string {
	t.Helper()
	names := make([]string, len(evs))
	for i, e := range evs {
		if e.Data["type"] != e.Name {
			t.Errorf("event %q carries type %v", e.Name, e.Data["type"])
		}
		if e.Data["sequence_number"] != float64(i) {
			t.Errorf("event %d %q has sequence number %v", i, e.Name, e.Data["sequence_number"])
		}
		names[i] = strings.TrimPrefix(e.Name, "response.")
	}
	return strings.Join(names, " ")
}

// responsesDeltas concatenates the deltas of the named event and counts them.
func responsesDeltas(evs []openaiEvent, name string) (string, int) {
	var b strings.Builder
	n := 0
	for _, e := range evs {
		if e.Name == name {
			b.WriteString(e.Data["delta"].(string))
			n++
		}
	}
	return b.String(), n
}

// responsesItems returns the items of the output_item events with the name.
func responsesItems(evs []openaiEvent, name string) []map[string]any {
	var items []map[string]any
	for _, e := range evs {
		if e.Name == name {
			items = append(items, e.Data["item"].(map[string]any))
		}
	}
	return items
}

func TestOpenAIResponsesStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply fakemodel.Reply
		check func(t *testing.T, evs []openaiEvent)
	}{
		{
			name:  "text streams in chunks and completes with usage",
			reply: fakemodel.Reply{Text: "hello there, world", Chunks: 3, InputTokens: 12, OutputTokens: 5},
			check: func(t *testing.T, evs []openaiEvent) {
				want := "created in_progress output_item.added content_part.added output_text.delta output_text.delta output_text.delta output_text.done content_part.done output_item.done completed"
				if got := responsesNames(t, evs); got != want {
					t.Fatalf("events:\n got %s\nwant %s", got, want)
				}
				if text, n := responsesDeltas(evs, "response.output_text.delta"); text != "hello there, world" || n != 3 {
					t.Errorf("text %q in %d deltas", text, n)
				}
				item := responsesItems(evs, "response.output_item.done")[0]
				if id, _ := item["id"].(string); !strings.HasPrefix(id, "msg_") || item["type"] != "message" {
					t.Errorf("message item %v", item)
				}
				resp := evs[len(evs)-1].Data["response"].(map[string]any)
				usage := resp["usage"].(map[string]any)
				if resp["status"] != "completed" || usage["input_tokens"] != 12.0 || usage["output_tokens"] != 5.0 || usage["total_tokens"] != 17.0 {
					t.Errorf("completed response %v", resp)
				}
				if out := resp["output"].([]any); len(out) != 1 {
					t.Errorf("output %v", out)
				}
			},
		},
		{
			name: "reasoning, text and function calls are items in order",
			reply: fakemodel.Reply{
				Reasoning: "let me think",
				Text:      "calling",
				ToolCalls: []fakemodel.ToolCall{
					{ID: "call_given", Name: "read_file", Input: `{"path":"a.go"}`},
					{Name: "glob", Input: `{"pattern":"*.go"}`},
				},
			},
			check: func(t *testing.T, evs []openaiEvent) {
				responsesNames(t, evs)
				added, done := responsesItems(evs, "response.output_item.added"), responsesItems(evs, "response.output_item.done")
				if len(added) != 4 || len(done) != 4 {
					t.Fatalf("%d items added, %d done, want 4", len(added), len(done))
				}
				for i, typ := range []string{"reasoning", "message", "function_call", "function_call"} {
					if added[i]["type"] != typ || done[i]["type"] != typ || added[i]["id"] != done[i]["id"] {
						t.Errorf("item %d: added %v, done %v, want %s", i, added[i], done[i], typ)
					}
				}
				if id, _ := done[0]["id"].(string); !strings.HasPrefix(id, "rs_") {
					t.Errorf("reasoning id %q", id)
				}
				if done[0]["encrypted_content"] != fakemodel.OpenAIEncrypted("let me think") {
					t.Errorf("reasoning item %v", done[0])
				}
				if summary, _ := responsesDeltas(evs, "response.reasoning_summary_text.delta"); summary != "let me think" {
					t.Errorf("summary %q", summary)
				}
				if added[2]["call_id"] != "call_given" || added[2]["name"] != "read_file" || added[2]["arguments"] != "" {
					t.Errorf("first call added %v", added[2])
				}
				if id, _ := added[3]["call_id"].(string); !strings.HasPrefix(id, "call_") || id == "call_given" {
					t.Errorf("generated call id %q", id)
				}
				if id, _ := done[3]["id"].(string); !strings.HasPrefix(id, "fc_") {
					t.Errorf("function call item id %q", id)
				}
				if done[2]["arguments"] != `{"path":"a.go"}` || done[3]["arguments"] != `{"pattern":"*.go"}` {
					t.Errorf("arguments %v, %v", done[2]["arguments"], done[3]["arguments"])
				}
				args, n := responsesDeltas(evs, "response.function_call_arguments.delta")
				if args != `{"path":"a.go"}{"pattern":"*.go"}` || n != 6 {
					t.Errorf("argument deltas %q in %d", args, n)
				}
				for _, e := range evs {
					if e.Name == "response.function_call_arguments.delta" && e.Data["item_id"] != done[2]["id"] && e.Data["item_id"] != done[3]["id"] {
						t.Errorf("delta for unknown item %v", e.Data)
					}
				}
				out := evs[len(evs)-1].Data["response"].(map[string]any)["output"].([]any)
				if len(out) != 4 {
					t.Errorf("completed output has %d items", len(out))
				}
			},
		},
		{
			name:  "cut after text leaves the response unfinished",
			reply: fakemodel.Reply{Text: "partial answer", Chunks: 2, CutAfterText: true, ToolCalls: []fakemodel.ToolCall{{Name: "glob"}}},
			check: func(t *testing.T, evs []openaiEvent) {
				want := "created in_progress output_item.added content_part.added output_text.delta output_text.delta"
				if got := responsesNames(t, evs); got != want {
					t.Fatalf("events:\n got %s\nwant %s", got, want)
				}
			},
		},
		{
			name:  "empty reply still creates and completes the response",
			reply: fakemodel.Reply{},
			check: func(t *testing.T, evs []openaiEvent) {
				if got, want := responsesNames(t, evs), "created in_progress completed"; got != want {
					t.Fatalf("events:\n got %s\nwant %s", got, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, tt.reply)
			res := postOpenAI(t, s.URL, "/v1/responses", `{"model":"m","stream":true}`)
			if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
			}
			tt.check(t, readOpenAIEvents(t, res.Body))
		})
	}
}

// chatChoice is choices[0] of a chunk, or nil for a usage chunk.
func chatChoice(e openaiEvent) map[string]any {
	choices, _ := e.Data["choices"].([]any)
	if len(choices) == 0 {
		return nil
	}
	return choices[0].(map[string]any)
}

// chatContent concatenates a delta field across the chunks and counts them.
func chatContent(evs []openaiEvent, field string) (string, int) {
	var b strings.Builder
	n := 0
	for _, e := range evs {
		if c := chatChoice(e); c != nil {
			if s, ok := c["delta"].(map[string]any)[field].(string); ok && s != "" {
				b.WriteString(s)
				n++
			}
		}
	}
	return b.String(), n
}

func TestOpenAIChatStream(t *testing.T) {
	t.Parallel()
	const withUsage = `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`
	tests := []struct {
		name  string
		body  string
		reply fakemodel.Reply
		check func(t *testing.T, evs []openaiEvent)
	}{
		{
			name:  "text streams in chunks, then stop, usage and done",
			body:  withUsage,
			reply: fakemodel.Reply{Text: "hello there, world", Chunks: 3, InputTokens: 12, OutputTokens: 5},
			check: func(t *testing.T, evs []openaiEvent) {
				if len(evs) != 7 {
					t.Fatalf("got %d events, want role, 3 text, finish, usage, done: %v", len(evs), evs)
				}
				for _, e := range evs[:6] {
					if e.Data["object"] != "chat.completion.chunk" || e.Data["id"] != evs[0].Data["id"] {
						t.Errorf("chunk %v", e.Data)
					}
				}
				if d := chatChoice(evs[0])["delta"].(map[string]any); d["role"] != "assistant" {
					t.Errorf("first delta %v", d)
				}
				if text, n := chatContent(evs, "content"); text != "hello there, world" || n != 3 {
					t.Errorf("text %q in %d chunks", text, n)
				}
				if c := chatChoice(evs[4]); c["finish_reason"] != "stop" {
					t.Errorf("finish chunk %v", c)
				}
				usage, _ := evs[5].Data["usage"].(map[string]any)
				if chatChoice(evs[5]) != nil || usage["prompt_tokens"] != 12.0 || usage["completion_tokens"] != 5.0 {
					t.Errorf("usage chunk %v", evs[5].Data)
				}
				if !evs[6].Done {
					t.Errorf("last event %v, want [DONE]", evs[6])
				}
			},
		},
		{
			name:  "no usage chunk unless asked",
			body:  `{"model":"m","stream":true}`,
			reply: fakemodel.Reply{Text: "hi", InputTokens: 1, OutputTokens: 1},
			check: func(t *testing.T, evs []openaiEvent) {
				for _, e := range evs {
					if !e.Done && (chatChoice(e) == nil || e.Data["usage"] != nil) {
						t.Errorf("unexpected usage chunk %v", e.Data)
					}
				}
				if !evs[len(evs)-1].Done {
					t.Errorf("stream does not end with [DONE]")
				}
			},
		},
		{
			name: "reasoning content, text and tool calls with indexes",
			body: withUsage,
			reply: fakemodel.Reply{
				Reasoning: "let me think",
				Text:      "calling",
				ToolCalls: []fakemodel.ToolCall{
					{ID: "call_given", Name: "read_file", Input: `{"path":"a.go"}`},
					{Name: "glob", Input: `{"pattern":"*.go"}`},
				},
			},
			check: func(t *testing.T, evs []openaiEvent) {
				if r, _ := chatContent(evs, "reasoning_content"); r != "let me think" {
					t.Errorf("reasoning %q", r)
				}
				type call struct{ id, name, args string }
				var calls []call
				for _, e := range evs {
					c := chatChoice(e)
					if c == nil {
						continue
					}
					tcs, _ := c["delta"].(map[string]any)["tool_calls"].([]any)
					for _, tc := range tcs {
						tc := tc.(map[string]any)
						i := int(tc["index"].(float64))
						fn := tc["function"].(map[string]any)
						if i == len(calls) {
							id, _ := tc["id"].(string)
							name, _ := fn["name"].(string)
							calls = append(calls, call{id: id, name: name})
						} else if i != len(calls)-1 || tc["id"] != nil {
							t.Errorf("delta for index %d after %d calls: %v", i, len(calls), tc)
							continue
						}
						calls[i].args += fn["arguments"].(string)
					}
				}
				if len(calls) != 2 {
					t.Fatalf("calls %v", calls)
				}
				if calls[0] != (call{"call_given", "read_file", `{"path":"a.go"}`}) {
					t.Errorf("first call %v", calls[0])
				}
				if !strings.HasPrefix(calls[1].id, "call_") || calls[1].name != "glob" || calls[1].args != `{"pattern":"*.go"}` {
					t.Errorf("second call %v", calls[1])
				}
				if c := chatChoice(evs[len(evs)-3]); c["finish_reason"] != "tool_calls" {
					t.Errorf("finish chunk %v", c)
				}
			},
		},
		{
			name:  "cut after text sends no finish reason and no done",
			body:  withUsage,
			reply: fakemodel.Reply{Text: "partial answer", Chunks: 2, CutAfterText: true},
			check: func(t *testing.T, evs []openaiEvent) {
				if len(evs) != 3 {
					t.Fatalf("got %d events, want role and 2 text chunks", len(evs))
				}
				for _, e := range evs {
					if e.Done || chatChoice(e)["finish_reason"] != nil {
						t.Errorf("finishing event %v", e)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, tt.reply)
			res := postOpenAI(t, s.URL, "/v1/chat/completions", tt.body)
			if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
			}
			tt.check(t, readOpenAIEvents(t, res.Body))
		})
	}
}

func TestOpenAIErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		path     string
		status   int
		wantType string
		wantCode any
	}{
		{"responses 404 is a missing model", "/v1/responses", http.StatusNotFound, "invalid_request_error", "model_not_found"},
		{"responses 503 is a server error", "/v1/responses", http.StatusServiceUnavailable, "server_error", nil},
		{"chat 401 is an invalid key", "/v1/chat/completions", http.StatusUnauthorized, "invalid_request_error", "invalid_api_key"},
		{"chat 429 is a rate limit", "/v1/chat/completions", http.StatusTooManyRequests, "requests", "rate_limit_exceeded"},
		{"chat 400 is an invalid request", "/v1/chat/completions", http.StatusBadRequest, "invalid_request_error", nil},
		{"chat 501 falls back to a server error", "/v1/chat/completions", http.StatusNotImplemented, "server_error", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, fakemodel.Reply{Status: tt.status, Header: map[string]string{"retry-after": "0"}})
			res := postOpenAI(t, s.URL, tt.path, `{}`)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			if res.Header.Get("retry-after") != "0" || res.Header.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", res.Header)
			}
			var body struct {
				Error map[string]any `json:"error"`
			}
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			e := body.Error
			if e["type"] != tt.wantType || e["code"] != tt.wantCode || e["message"] == "" {
				t.Errorf("error %v", e)
			}
			if _, ok := e["param"]; !ok {
				t.Errorf("error has no param: %v", e)
			}
		})
	}
}

func TestOpenAIRecordsRequests(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{Text: "a"}, fakemodel.Reply{Text: "b"})
	for i, path := range []string{"/v1/responses", "/v1/chat/completions"} {
		res := postOpenAI(t, s.URL, path, `{"n":`+string(rune('1'+i))+`}`)
		readOpenAIEvents(t, res.Body)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("recorded %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Header.Get("Authorization") != "Bearer k" || r.JSON()["n"] != float64(i+1) {
			t.Errorf("request %d: %s %v %s", i, r.Path, r.Header, r.Body)
		}
	}
}
