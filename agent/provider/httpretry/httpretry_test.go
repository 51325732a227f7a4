package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/agent/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reply is one scripted answer of the test server.
type reply struct {
	status int
	header map[string]string
	body   string
}

func server(t *testing.T, replies ...reply) (*httptest.Server, *atomic.Int32, *[]string) {
	t.Helper()
	var calls atomic.Int32
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b)+"|"+r.Header.Get(countHeader))
		n := int(calls.Add(1)) - 1
		rep := reply{status: 200, body: "ok"}
		if n < len(replies) {
			rep = replies[n]
		}
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls, &bodies
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	now := map[string]string{"retry-after": "0"}
	tests := []struct {
		name       string
		replies    []reply
		retries    int
		wantCalls  int
		wantStatus int
		wantReport []llm.Retry
	}{
		{
			name:       "a 503 is retried and each wait announced",
			replies:    []reply{{status: 503, header: now, body: `{"error":{"message":"Overloaded"}}`}, {status: 503, header: now, body: "<html>busy</html>"}},
			retries:    3,
			wantCalls:  3,
			wantStatus: 200,
			wantReport: []llm.Retry{
				{Attempt: 2, Attempts: 4, Reason: "503 Service Unavailable: Overloaded"},
				{Attempt: 3, Attempts: 4, Reason: "503 Service Unavailable"},
			},
		},
		{
			name:       "the server's wait is the delay",
			replies:    []reply{{status: 429, header: map[string]string{"retry-after-ms": "20"}}},
			retries:    1,
			wantCalls:  2,
			wantStatus: 200,
			wantReport: []llm.Retry{{Attempt: 2, Attempts: 2, Delay: 20 * time.Millisecond, Reason: "429 Too Many Requests"}},
		},
		{
			name:       "retries run out",
			replies:    []reply{{status: 500, header: now}, {status: 500, header: now}, {status: 500, header: now}},
			retries:    1,
			wantCalls:  2,
			wantStatus: 500,
			wantReport: []llm.Retry{{Attempt: 2, Attempts: 2, Reason: "500 Internal Server Error"}},
		},
		{
			name:       "a 401 is not retried",
			replies:    []reply{{status: 401, body: `{"error":{"message":"bad key"}}`}},
			retries:    3,
			wantCalls:  1,
			wantStatus: 401,
		},
		{
			name:       "x-should-retry false is obeyed",
			replies:    []reply{{status: 503, header: map[string]string{"x-should-retry": "false"}}},
			retries:    3,
			wantCalls:  1,
			wantStatus: 503,
		},
		{
			name:       "x-should-retry true retries a 400",
			replies:    []reply{{status: 400, header: map[string]string{"x-should-retry": "true", "retry-after": "0"}}},
			retries:    3,
			wantCalls:  2,
			wantStatus: 200,
			wantReport: []llm.Retry{{Attempt: 2, Attempts: 4, Reason: "400 Bad Request"}},
		},
		{
			name:       "a wait longer than MaxWait is not taken",
			replies:    []reply{{status: 503, header: map[string]string{"retry-after": "3600"}}},
			retries:    3,
			wantCalls:  1,
			wantStatus: 503,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, calls, bodies := server(t, tt.replies...)
			var got []llm.Retry
			ctx := llm.WithRetryReport(t.Context(), func(r llm.Retry) { got = append(got, r) })
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("payload"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(countHeader, "0")
			res, err := do(req, http.DefaultClient.Do, tt.retries, func(int) time.Duration { return 0 })
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tt.wantStatus || int(calls.Load()) != tt.wantCalls {
				t.Errorf("status %d after %d calls, want %d after %d", res.StatusCode, calls.Load(), tt.wantStatus, tt.wantCalls)
			}
			if !slices.Equal(got, tt.wantReport) {
				t.Errorf("reported %+v, want %+v", got, tt.wantReport)
			}
			// Every attempt carried the whole body and its number.
			for i, b := range *bodies {
				if want := "payload|" + string(rune('0'+i)); b != want {
					t.Errorf("attempt %d got %q, want %q", i, b, want)
				}
			}
		})
	}
}

func TestConnectionErrorsAreRetried(t *testing.T) {
	t.Parallel()
	attempts := 0
	next := func(*http.Request) (*http.Response, error) {
		attempts++
		return nil, errors.New("dial tcp: connection refused\nmore")
	}
	var got []llm.Retry
	ctx := llm.WithRetryReport(t.Context(), func(r llm.Retry) { got = append(got, r) })
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
	_, err := do(req, next, 2, func(int) time.Duration { return 0 })
	if err == nil || attempts != 3 || len(got) != 2 || got[0].Reason != "dial tcp: connection refused" {
		t.Errorf("err %v after %d attempts, reports %+v", err, attempts, got)
	}
}

func TestCancelEndsTheWait(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	next := func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(""))}, nil
	}
	ctx = llm.WithRetryReport(ctx, func(llm.Retry) { cancel() })
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://example.invalid/", nil)
	_, err := do(req, next, 3, func(int) time.Duration { return 30 * time.Second })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want the cancellation", err)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	for i := range 6 {
		got = append(got, backoff(i))
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("backoff %v, want %v", got, want)
	}
}

func TestMessage(t *testing.T) {
	t.Parallel()
	tests := []struct{ body, want string }{
		{`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, "invalid x-api-key"},
		{`{"message":"model not found"}`, "model not found"},
		{`{"error":"no such model"}`, "no such model"},
		{"<!DOCTYPE html><html><body>Not Found</body></html>", ""},
		{`{"error":{"message":"line one\nline two"}}`, "line one line two"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Message([]byte(tt.body)); got != tt.want {
			t.Errorf("Message(%q) = %q, want %q", tt.body, got, tt.want)
		}
	}
}
