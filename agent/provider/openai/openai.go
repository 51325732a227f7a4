// Package openai is shiro's model over the official OpenAI Go SDK. It speaks
// two wire protocols: the Responses API (reasoning items sent back with their
// encrypted content, paired with the function calls that followed them) and
// Chat Completions (also the protocol of OpenAI-compatible servers: Ollama,
// vLLM, llama.cpp, OpenRouter, Groq, DeepSeek and the like).
//
// For the official endpoint the model is a chain over [chat-completions,
// responses]: a request the first endpoint rejects before streaming (an API
// error that is not retryable, status 400, 404, 405, 415, 422 or 501) moves
// to the next, and the switch sticks for the life of the model, announced
// once through Config.OnNotice. Any other base URL is a compatible server:
// chat completions only, API key optional. Transient failures are retried
// (Config.MaxRetries, honouring retry-after) by httpretry, which reports each
// wait; API errors reach the caller as llm.StatusError.
package openai

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/agent/provider/httpretry"
)

// Provider is the name of this provider in llm.ModelInfo and llm.Part.
const Provider = "openai"

// Defaults of Config.
const (
	// DefaultBaseURL is the official API's root.
	DefaultBaseURL = "https://api.openai.com/v1"
	// DefaultMaxRetries is how often a transient failure is retried.
	DefaultMaxRetries = 3
)

// The wire modes of Config.Mode.
const (
	ModeAuto      = ""
	ModeChat      = "chat"
	ModeResponses = "responses"
)

// Errors of New.
var (
	// ErrNoAPIKey is returned for the official endpoint without a key.
	ErrNoAPIKey = errors.New("no API key")
	// ErrNoModel is returned when Config.Model is empty.
	ErrNoModel = errors.New("no model")
	// ErrMode is returned for a Config.Mode other than the Mode constants.
	ErrMode = errors.New("unknown mode")
)

// Config configures a model.
type Config struct {
	// APIKey is sent as a bearer token. It is required for the official
	// endpoint and optional for compatible servers (no Authorization header
	// is sent without one).
	APIKey string
	// BaseURL is the API root; empty means DefaultBaseURL.
	BaseURL string
	// Model is the model id.
	Model string
	// MaxRetries is how often the SDK retries a transient failure: 0 means
	// DefaultMaxRetries, a negative value none.
	MaxRetries int
	// Mode picks the protocol: ModeChat, ModeResponses, or ModeAuto (the
	// chat → responses chain for the official endpoint, chat completions
	// for compatible servers).
	Mode string
	// Compatible treats the endpoint as an OpenAI-compatible server even at
	// the official URL. Any other base URL is always compatible.
	Compatible bool
	// HTTPClient replaces the default client.
	HTTPClient *http.Client
	// OnNotice receives the endpoint fallback notice.
	OnNotice func(string)
}

// official reports whether baseURL is the official OpenAI API.
func official(baseURL string) bool {
	return baseURL == "" || strings.HasPrefix(baseURL, "https://api.openai.com")
}

// New makes a model from cfg.
func New(cfg Config) (llm.Model, error) {
	compatible := cfg.Compatible || !official(cfg.BaseURL)
	switch {
	case cfg.Model == "":
		return nil, fmt.Errorf("new openai model: %w", ErrNoModel)
	case cfg.APIKey == "" && !compatible:
		return nil, fmt.Errorf("new openai model: %w", ErrNoAPIKey)
	case cfg.Mode != ModeAuto && cfg.Mode != ModeChat && cfg.Mode != ModeResponses:
		return nil, fmt.Errorf("new openai model: %w %q", ErrMode, cfg.Mode)
	}
	opts := requestOptions(cfg)
	// Compatible servers get the level too (the spec maps thinking to
	// reasoning_effort for every OpenAI-protocol endpoint); one that
	// refuses it is asked again without (chatEndpoint.open).
	reasoning := compatible || takesReasoning(cfg.Model)
	chat := &chatEndpoint{
		svc:        oai.NewChatCompletionService(opts...),
		model:      cfg.Model,
		compatible: compatible,
		reasoning:  reasoning,
	}
	resp := &responsesEndpoint{
		svc:       responses.NewResponseService(opts...),
		model:     cfg.Model,
		reasoning: reasoning,
	}
	m := &model{info: llm.ModelInfo{Provider: Provider, Model: cfg.Model}, notice: cfg.OnNotice}
	switch {
	case cfg.Mode == ModeChat:
		m.endpoints = []endpoint{chat}
	case cfg.Mode == ModeResponses:
		m.endpoints = []endpoint{resp}
	case compatible:
		m.endpoints = []endpoint{chat}
	default:
		m.endpoints = []endpoint{chat, resp}
	}
	return m, nil
}

// requestOptions are the SDK options for cfg. The services are built from
// them directly rather than through oai.NewClient, which would also read
// OPENAI_API_KEY, OPENAI_ORG_ID and the like from the environment and send
// them to whatever server BaseURL names.
func requestOptions(cfg Config) []option.RequestOption {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	client := cfg.HTTPClient
	if client == nil {
		client = defaultHTTPClient()
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		// httpretry retries, and reports each wait; the SDK does not.
		option.WithMaxRetries(0),
		option.WithMiddleware(httpretry.Middleware(retries), errorShape),
		option.WithHTTPClient(client),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return opts
}

// defaultHTTPClient is a client over a copy of the default transport that
// gives up on a server that never sends response headers, as the SDK's own
// default does; streamed bodies are not limited.
func defaultHTTPClient() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Client{}
	}
	t = t.Clone()
	t.ResponseHeaderTimeout = 10 * time.Minute
	return &http.Client{Transport: t}
}

// endpoint is one wire protocol.
type endpoint interface {
	// name names the endpoint in errors and notices.
	name() string
	// open sends the request and waits for the first streamed event. An
	// error means the stream never started; the events then follow, ending
	// with a finish event or an error.
	open(ctx context.Context, req llm.Request) (iter.Seq2[llm.Event, error], error)
}

var _ llm.Model = (*model)(nil)

// model streams from the current endpoint of its chain.
type model struct {
	info      llm.ModelInfo
	endpoints []endpoint
	notice    func(string)

	mu  sync.Mutex
	cur int // index of the endpoint in use; it only moves forward
}

// Info reports the provider and model id (the primary's, for a chain).
func (m *model) Info() llm.ModelInfo { return m.info }

// Stream streams one step from the current endpoint, falling back along the
// chain when the endpoint rejects the request before streaming.
func (m *model) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		events, err := m.open(ctx, req)
		if err != nil {
			yield(llm.Event{}, err)
			return
		}
		for ev, err := range events {
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// open opens a stream on the current endpoint or, when it rejects the
// request, on the next ones in turn. The last error surfaces.
func (m *model) open(ctx context.Context, req llm.Request) (iter.Seq2[llm.Event, error], error) {
	m.mu.Lock()
	i := m.cur
	m.mu.Unlock()
	for {
		events, err := m.endpoints[i].open(ctx, req)
		if err == nil {
			return events, nil
		}
		if i+1 == len(m.endpoints) || !rejected(err) {
			return nil, err
		}
		m.fallBack(i, err)
		i++
	}
}

// fallBack moves the chain past endpoint i, once, and announces it.
func (m *model) fallBack(i int, err error) {
	m.mu.Lock()
	moved := m.cur == i
	if moved {
		m.cur = i + 1
	}
	m.mu.Unlock()
	if moved && m.notice != nil {
		m.notice(fmt.Sprintf("endpoint fallback: %s rejected the request, retrying on %s\n  %s",
			m.endpoints[i].name(), m.endpoints[i+1].name(), reason(err)))
	}
}

// fallbackStatuses are the statuses with which an endpoint rejects a request
// it does not support (rather than failing it).
var fallbackStatuses = map[int]bool{
	http.StatusBadRequest:           true,
	http.StatusNotFound:             true,
	http.StatusMethodNotAllowed:     true,
	http.StatusUnsupportedMediaType: true,
	http.StatusUnprocessableEntity:  true,
	http.StatusNotImplemented:       true,
}

// rejected reports whether err is an API error that is not retryable and
// has one of the fallback statuses. Retryable is the SDK's rule: the
// x-should-retry header if present, else 408, 409, 429 and 5xx; so a 501
// moves on only when the server says not to retry it.
func rejected(err error) bool {
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) || !fallbackStatuses[apiErr.StatusCode] {
		return false
	}
	s := apiErr.StatusCode
	retryable := s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
	if apiErr.Response != nil {
		switch apiErr.Response.Header.Get("x-should-retry") {
		case "true":
			retryable = true
		case "false":
			retryable = false
		}
	}
	return !retryable
}

// reason is the one-line cause of a rejection: status, code and message.
func reason(err error) string {
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) {
		return err.Error()
	}
	parts := []string{strconv.Itoa(apiErr.StatusCode)}
	if apiErr.Code != "" {
		parts = append(parts, apiErr.Code)
	}
	if apiErr.Message != "" {
		parts = append(parts, apiErr.Message)
	}
	return strings.Join(parts, " ")
}

// wrapErr adds op and turns an API error into an llm.StatusError (the
// status and the API's message).
func wrapErr(op string, err error) error {
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		msg := httpretry.OneLine(apiErr.Message, 200)
		if msg == "" {
			msg = httpretry.Message([]byte(apiErr.RawJSON()))
		}
		return fmt.Errorf("%s: %w", op, &llm.StatusError{Status: apiErr.StatusCode, Message: msg, Err: err})
	}
	return fmt.Errorf("%s: %w", op, err)
}

// translator turns a stream's decoded events into llm events.
type translator[T any] interface {
	// event translates one streamed event; done says the finish event was
	// among them and nothing more is to be read.
	event(ev T) (events []llm.Event, done bool, err error)
	// end is called when the stream ended without done.
	end() ([]llm.Event, error)
}

// start reads the stream's first event. An error means the stream never
// started (the request failed, after the SDK's retries).
func start[T any](op string, stream *ssestream.Stream[T]) error {
	if stream.Next() {
		return nil
	}
	err := stream.Err()
	if err == nil {
		err = llm.ErrNoFinish
	}
	return wrapErr(op, err)
}

// events translates a started stream, closing it when done.
func events[T any](op string, stream *ssestream.Stream[T], t translator[T]) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		defer stream.Close()
		emit := func(evs []llm.Event, err error) bool {
			for _, ev := range evs {
				if !yield(ev, nil) {
					return false
				}
			}
			if err != nil {
				yield(llm.Event{}, fmt.Errorf("%s: %w", op, err))
				return false
			}
			return true
		}
		for {
			evs, done, err := t.event(stream.Current())
			if !emit(evs, err) || done {
				return
			}
			if !stream.Next() {
				break
			}
		}
		if err := stream.Err(); err != nil {
			yield(llm.Event{}, wrapErr(op, err))
			return
		}
		emit(t.end())
	}
}

// takesReasoning reports whether an official model accepts reasoning
// parameters: the o-series and gpt-5 onwards do, the gpt-3.5/4 families and
// the -chat variants do not (and reject them).
func takesReasoning(model string) bool {
	m := bareModel(model)
	return !strings.HasPrefix(m, "gpt-3") && !strings.HasPrefix(m, "gpt-4") &&
		!strings.HasPrefix(m, "chatgpt") && !strings.Contains(m, "-chat")
}

// effort maps a reasoning level to the API's effort; "" means send none
// (off leaves the model's default rather than "none", which gpt-5 and the
// o-series reject). Max is "xhigh" where the model has it, else "high".
func effort(model string, r llm.Reasoning) shared.ReasoningEffort {
	switch r {
	case llm.ReasoningLow:
		return shared.ReasoningEffortLow
	case llm.ReasoningMedium:
		return shared.ReasoningEffortMedium
	case llm.ReasoningHigh:
		return shared.ReasoningEffortHigh
	case llm.ReasoningMax:
		if takesXHigh(model) {
			return shared.ReasoningEffortXhigh
		}
		return shared.ReasoningEffortHigh
	}
	return ""
}

// takesXHigh reports whether a model accepts the "xhigh" effort: the
// codex-max models, gpt-5.2 and later.
func takesXHigh(model string) bool {
	m := bareModel(model)
	if strings.Contains(m, "codex-max") {
		return true
	}
	rest, ok := strings.CutPrefix(m, "gpt-")
	if !ok {
		return false
	}
	if i := strings.IndexFunc(rest, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		rest = rest[:i]
	}
	major, minor, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(major)
	if err != nil || n != 5 {
		return err == nil && n > 5
	}
	v, _ := strconv.Atoi(minor)
	return v >= 2
}

// bareModel lower-cases a model id and strips a vendor/ prefix.
func bareModel(model string) string {
	m := strings.ToLower(model)
	if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:]
	}
	return m
}
