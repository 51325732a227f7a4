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

// anthropicEvent is one decoded server-sent event.
type anthropicEvent struct {
	Name string
	Data map[string]any
}

// postAnthropic sends a Messages request and returns the response.
func postAnthropic(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", "k")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// readAnthropicEvents decodes a whole event stream.
func readAnthropicEvents(t *testing.T, r io.Reader) []anthropicEvent {
	t.Helper()
	var out []anthropicEvent
	var cur anthropicEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Name != "" || cur.Data != nil {
				out = append(out, cur)
			}
			cur = anthropicEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.Data); err != nil {
				t.Fatalf("bad data line %q: %v", line, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, e := range out {
		if e.Data["type"] != e.Name {
			t.Errorf("event %q carries type %v", e.Name, e.Data["type"])
		}
	}
	return out
}

func anthropicNames(evs []anthropicEvent) string {
	names := make([]string, len(evs))
	for i, e := range evs {
		names[i] = e.Name
	}
	return strings.Join(names, " ")
}

// anthropicDeltas concatenates the deltas' field of the given delta type and
// counts them.
func anthropicDeltas(evs []anthropicEvent, typ, field string) (string, int) {
	var b strings.Builder
	n := 0
	for _, e := range evs {
		if e.Name != "content_block_delta" {
			continue
		}
		d := e.Data["delta"].(map[string]any)
		if d["type"] == typ {
			b.WriteString(d[field].(string))
			n++
		}
	}
	return b.String(), n
}

func TestAnthropicStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply fakemodel.Reply
		check func(t *testing.T, evs []anthropicEvent)
	}{
		{
			name:  "text streams in chunks and ends the turn",
			reply: fakemodel.Reply{Text: "hello there, world", Chunks: 3, InputTokens: 12, OutputTokens: 5},
			check: func(t *testing.T, evs []anthropicEvent) {
				want := "message_start ping content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
				if got := anthropicNames(evs); got != want {
					t.Fatalf("events:\n got %s\nwant %s", got, want)
				}
				if text, n := anthropicDeltas(evs, "text_delta", "text"); text != "hello there, world" || n != 3 {
					t.Errorf("text %q in %d deltas", text, n)
				}
				usage := evs[0].Data["message"].(map[string]any)["usage"].(map[string]any)
				if usage["input_tokens"] != 12.0 {
					t.Errorf("start usage %v", usage)
				}
				md := evs[len(evs)-2].Data
				if md["delta"].(map[string]any)["stop_reason"] != "end_turn" || md["usage"].(map[string]any)["output_tokens"] != 5.0 {
					t.Errorf("message_delta %v", md)
				}
			},
		},
		{
			name: "thinking, text and tool calls are blocks in order",
			reply: fakemodel.Reply{
				Reasoning: "let me think",
				Text:      "calling",
				ToolCalls: []fakemodel.ToolCall{
					{ID: "toolu_given", Name: "read_file", Input: `{"path":"a.go"}`},
					{Name: "glob", Input: `{"pattern":"*.go"}`},
				},
			},
			check: func(t *testing.T, evs []anthropicEvent) {
				var blocks []map[string]any
				for _, e := range evs {
					if e.Name == "content_block_start" {
						if int(e.Data["index"].(float64)) != len(blocks) {
							t.Errorf("block index %v, want %d", e.Data["index"], len(blocks))
						}
						blocks = append(blocks, e.Data["content_block"].(map[string]any))
					}
				}
				if len(blocks) != 4 {
					t.Fatalf("got %d blocks, want 4", len(blocks))
				}
				for i, typ := range []string{"thinking", "text", "tool_use", "tool_use"} {
					if blocks[i]["type"] != typ {
						t.Errorf("block %d is %v, want %s", i, blocks[i]["type"], typ)
					}
				}
				if thinking, _ := anthropicDeltas(evs, "thinking_delta", "thinking"); thinking != "let me think" {
					t.Errorf("thinking %q", thinking)
				}
				if sig, n := anthropicDeltas(evs, "signature_delta", "signature"); sig != fakemodel.AnthropicSignature("let me think") || n != 1 {
					t.Errorf("signature %q in %d deltas", sig, n)
				}
				if blocks[2]["id"] != "toolu_given" || blocks[2]["name"] != "read_file" {
					t.Errorf("first tool block %v", blocks[2])
				}
				if id, _ := blocks[3]["id"].(string); !strings.HasPrefix(id, "toolu_") {
					t.Errorf("generated tool id %q", id)
				}
				args, n := anthropicDeltas(evs, "input_json_delta", "partial_json")
				if args != `{"path":"a.go"}{"pattern":"*.go"}` || n < 4 {
					t.Errorf("arguments %q in %d deltas", args, n)
				}
				md := evs[len(evs)-2].Data
				if md["delta"].(map[string]any)["stop_reason"] != "tool_use" {
					t.Errorf("message_delta %v", md)
				}
			},
		},
		{
			name:  "cut after text leaves the stream unfinished",
			reply: fakemodel.Reply{Text: "partial answer", Chunks: 2, CutAfterText: true},
			check: func(t *testing.T, evs []anthropicEvent) {
				want := "message_start ping content_block_start content_block_delta content_block_delta"
				if got := anthropicNames(evs); got != want {
					t.Fatalf("events:\n got %s\nwant %s", got, want)
				}
			},
		},
		{
			name:  "empty reply still starts and stops the message",
			reply: fakemodel.Reply{},
			check: func(t *testing.T, evs []anthropicEvent) {
				want := "message_start ping message_delta message_stop"
				if got := anthropicNames(evs); got != want {
					t.Fatalf("events:\n got %s\nwant %s", got, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, tt.reply)
			res := postAnthropic(t, s.URL, `{"model":"m","stream":true}`)
			if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
			}
			tt.check(t, readAnthropicEvents(t, res.Body))
		})
	}
}

func TestAnthropicErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		wantType string
	}{
		{"503 is overloaded", http.StatusServiceUnavailable, "overloaded_error"},
		{"529 is overloaded", 529, "overloaded_error"},
		{"429 is a rate limit", http.StatusTooManyRequests, "rate_limit_error"},
		{"400 is an invalid request", http.StatusBadRequest, "invalid_request_error"},
		{"401 is an authentication error", http.StatusUnauthorized, "authentication_error"},
		{"418 falls back to api_error", http.StatusTeapot, "api_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := fakemodel.New(t, fakemodel.Reply{Status: tt.status, Header: map[string]string{"retry-after": "0"}})
			res := postAnthropic(t, s.URL, `{}`)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			if res.Header.Get("retry-after") != "0" {
				t.Errorf("retry-after %q", res.Header.Get("retry-after"))
			}
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if body.Type != "error" || body.Error.Type != tt.wantType || body.Error.Message == "" {
				t.Errorf("body %+v", body)
			}
		})
	}
}

func TestAnthropicRecordsRequests(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{Text: "a"}, fakemodel.Reply{Text: "b"})
	for _, body := range []string{`{"n":1}`, `{"n":2}`} {
		res := postAnthropic(t, s.URL, body)
		readAnthropicEvents(t, res.Body)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("recorded %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Path != "/v1/messages" || r.Header.Get("x-api-key") != "k" || r.JSON()["n"] != float64(i+1) {
			t.Errorf("request %d: %s %v %s", i, r.Path, r.Header, r.Body)
		}
	}
}

func TestAnthropicStallHoldsTheStreamMidAnswer(t *testing.T) {
	t.Parallel()
	stall := make(chan struct{})
	s := fakemodel.New(t, fakemodel.Reply{Text: "thinking out loud", Stall: stall, ToolCalls: []fakemodel.ToolCall{{ID: "c1", Name: "bash", Input: `{}`}}})
	res := postAnthropic(t, s.URL, `{"model":"m","max_tokens":10,"stream":true,"messages":[]}`)
	// The text's delta arrives while the stream is held.
	br := bufio.NewReader(res.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before the text: %v", err)
		}
		if strings.Contains(line, "thinking out loud") {
			break
		}
	}
	close(stall)
	rest := readAnthropicEvents(t, br)
	if got := anthropicNames(rest); !strings.HasPrefix(got, "content_block_stop content_block_start content_block_delta") || !strings.HasSuffix(got, "message_delta message_stop") {
		t.Errorf("after the stall: %s", got)
	}
}

func TestSetModelsAnswersTheListing(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t)
	s.SetModels(http.StatusNotFound, "<!DOCTYPE html><html><body>Not Found</body></html>")
	res, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(string(body), "<!DOCTYPE html>") || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("%d %s %q", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
}
