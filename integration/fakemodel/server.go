// Package fakemodel is a scripted model server for tests. It speaks the
// real wire formats — Anthropic Messages SSE, OpenAI Responses SSE and
// OpenAI Chat Completions SSE — on 127.0.0.1, so the providers' real SDK
// code paths run, and it records every request so tests can assert what
// crossed the wire.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Reply is what the server answers to one request. The zero Reply is an
// empty successful answer.
type Reply struct {
	// Status, when not 0 or 200, answers with that HTTP status and an error
	// body in the format's shape (e.g. 503 to test retries).
	Status int
	// Header is added to the response (e.g. "retry-after").
	Header map[string]string
	// Reasoning is streamed as thinking / reasoning deltas first.
	Reasoning string
	// Text is streamed as text deltas, in Chunks pieces when Chunks > 1.
	Text   string
	Chunks int
	// ToolCalls are streamed after the text, arguments in pieces.
	ToolCalls []ToolCall
	// CutAfterText ends the stream abruptly after the text, without the
	// finishing events (a connection cut mid-stream).
	CutAfterText bool
	// InputTokens and OutputTokens are reported as usage.
	InputTokens, OutputTokens int
	// Delay holds the answer back this long before anything is sent (a
	// slow model; a client that gives up ends the wait).
	Delay time.Duration
	// Reached, when set, is closed when the request this reply answers
	// arrives; Hold, when set, keeps the answer back until it is closed (or
	// the client gives up). Together they let a test look at the client
	// while it waits for the model.
	Reached chan struct{}
	Hold    <-chan struct{}
	// Stall, when set, stops the stream after the reasoning and text
	// deltas (before the text ends and the tool calls come) until it is
	// closed or the client gives up: a model caught mid-answer.
	Stall <-chan struct{}

	gone <-chan struct{} // the request's end, set when it arrives
}

// stall waits for Stall, if set.
func (rep Reply) stall() {
	if rep.Stall == nil {
		return
	}
	select {
	case <-rep.Stall:
	case <-rep.gone:
	}
}

// ToolCall is one tool call the model makes.
type ToolCall struct {
	ID    string
	Name  string
	Input string // raw JSON arguments (may be invalid on purpose)
}

// Request is one recorded request.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Server is a running fake model server.
type Server struct {
	URL string

	mu       sync.Mutex
	script   []Reply
	requests []Request
	busy     time.Duration
	srv      *httptest.Server
	// models, when set, answers GET .../models instead of the usual list.
	models *Reply
}

// SetModels makes GET .../models answer with status and body (as is, with
// its content type guessed: an HTML page, a JSON error).
func (s *Server) SetModels(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = &Reply{Status: status, Text: body}
}

// Busy is the total time the server spent answering model calls, so a
// benchmark can subtract it from a client's wall time.
func (s *Server) Busy() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

// New starts a server answering with replies in order; once they run out it
// answers with an empty text reply. It stops when the test ends.
func New(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := Start(replies...)
	t.Cleanup(s.Close)
	return s
}

// Start starts a server outside a test (for harnesses); call Close.
func Start(replies ...Reply) *Server {
	s := &Server{script: replies}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// DiscardRequests forgets the recorded requests (a benchmark measuring its
// own memory does not want them counted).
func (s *Server) DiscardRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Push appends replies to the script.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// Requests returns the requests received so far (model calls only; model
// listings are recorded too, with their path).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// next records r and pops the next reply.
func (s *Server) next(r Request) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	if len(s.script) == 0 {
		return Reply{}
	}
	rep := s.script[0]
	s.script = s.script[1:]
	return rep
}

// ServeHTTP dispatches on the path's last segments.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() {
		s.mu.Lock()
		s.busy += time.Since(start)
		s.mu.Unlock()
	}()
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		s.mu.Lock()
		s.requests = append(s.requests, req)
		models := s.models
		s.mu.Unlock()
		if models != nil {
			w.Header().Set("Content-Type", http.DetectContentType([]byte(models.Text)))
			w.WriteHeader(models.Status)
			io.WriteString(w, models.Text)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-large","object":"model","type":"model"},{"id":"fake-small","object":"model","type":"model"}]}`)
	case strings.HasSuffix(r.URL.Path, "/messages"):
		s.anthropic(w, delayed(r, s.next(req)))
	case strings.HasSuffix(r.URL.Path, "/responses"):
		s.responses(w, delayed(r, s.next(req)))
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		s.chat(w, delayed(r, s.next(req)))
	default:
		http.NotFound(w, r)
	}
}

// delayed closes rep.Reached, waits for rep.Hold and rep.Delay (or until
// the client gives up) and returns rep.
func delayed(r *http.Request, rep Reply) Reply {
	rep.gone = r.Context().Done()
	if rep.Reached != nil {
		close(rep.Reached)
	}
	if rep.Hold != nil {
		select {
		case <-rep.Hold:
		case <-r.Context().Done():
		}
	}
	if rep.Delay > 0 {
		t := time.NewTimer(rep.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
	}
	return rep
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// startSSE writes the headers of an event stream, or an error reply.
// It reports whether to go on streaming.
func startSSE(w http.ResponseWriter, rep Reply, errorBody string) bool {
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		io.WriteString(w, errorBody)
		return false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return true
}

// pieces splits s into n roughly equal parts (at least one).
func pieces(s string, n int) []string {
	if n <= 1 || len(s) <= 1 {
		return []string{s}
	}
	rs := []rune(s)
	if n > len(rs) {
		n = len(rs)
	}
	out := make([]string, 0, n)
	size := (len(rs) + n - 1) / n
	for i := 0; i < len(rs); i += size {
		out = append(out, string(rs[i:min(i+size, len(rs))]))
	}
	return out
}
