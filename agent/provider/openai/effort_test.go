package openai_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/agent/provider/openai"
	"github.com/shiroagent/shiro/integration/fakemodel"
)

// refuseEffort answers a request that carries reasoning_effort with the
// 400 a server that does not take it sends (xAI's words for grok-4), and
// passes every other request on.
type refuseEffort struct {
	next    http.RoundTripper
	mu      sync.Mutex
	refused int
}

func (r *refuseEffort) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"reasoning_effort"`)) {
			r.mu.Lock()
			r.refused++
			r.mu.Unlock()
			msg := `{"code":"Client specified an invalid argument","error":"Argument not supported on this model: reasoningEffort"}`
			return &http.Response{StatusCode: 400, Status: "400 Bad Request", Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(msg)), Request: req}, nil
		}
	}
	return r.next.RoundTrip(req)
}

// TestCompatibleServerThatRefusesTheEffortIsAskedAgainWithout: the level
// goes out as reasoning_effort; a server that refuses the parameter gets
// the same request without it, and no effort from then on.
func TestCompatibleServerThatRefusesTheEffortIsAskedAgainWithout(t *testing.T) {
	t.Parallel()
	s := fakemodel.New(t, fakemodel.Reply{Text: "one"}, fakemodel.Reply{Text: "two"})
	c := client(t)
	rt := &refuseEffort{next: c.Transport}
	c.Transport = rt
	m, err := openai.New(openai.Config{Model: "grok-4", BaseURL: s.URL + "/v1", HTTPClient: c})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}, Reasoning: llm.ReasoningHigh}
	for _, want := range []string{"one", "two"} {
		evs, err := collect(t, m, req)
		if err != nil {
			t.Fatalf("the refusal reached the caller: %v", err)
		}
		var text strings.Builder
		for _, ev := range evs {
			if ev.Type == llm.EventText {
				text.WriteString(ev.Text)
			}
		}
		if text.String() != want {
			t.Errorf("text %q, want %q", text.String(), want)
		}
	}
	if rt.refused != 1 {
		t.Errorf("%d requests carried the refused effort, want 1", rt.refused)
	}
	for _, r := range s.Requests() {
		if _, ok := r.JSON()["reasoning_effort"]; ok {
			t.Errorf("the server got reasoning_effort after refusing it: %s", r.Body)
		}
	}
}
