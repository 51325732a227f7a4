// Package anthropic is shiro's llm.Model over the Anthropic Messages API,
// through the official SDK's streaming client.
//
// It translates the provider-neutral request into Messages API parameters
// (thinking blocks go back with their signatures; reasoning from other
// providers is dropped), maps thinking levels to budgets, and turns the event
// stream into llm events: text and reasoning deltas as they come, a tool
// start as soon as a tool_use block opens, the complete call when it closes,
// and a finish event with the assembled assistant message.
//
// Transient HTTP failures (429, 5xx, overloaded) are retried, honouring
// retry-after, by httpretry (which reports each wait) rather than by the
// SDK; a stream that fails before any event was yielded is retried here
// too. An error after events were yielded ends the stream. An API error
// reaches the caller as an llm.StatusError.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/agent/provider/httpretry"
)

// Provider is the provider name in model infos and message parts.
const Provider = "anthropic"

// Defaults of Config.
const (
	DefaultMaxRetries = 3
	DefaultMaxTokens  = 16384
)

// Errors of New and ListModels.
var (
	// ErrNoAPIKey is returned for a config without an API key.
	ErrNoAPIKey = errors.New("no API key")
	// ErrNoModel is returned by New for a config without a model.
	ErrNoModel = errors.New("no model")
)

// Config configures a Model.
type Config struct {
	// APIKey is sent as x-api-key.
	APIKey string
	// BaseURL is the API's base, with or without the version:
	// "https://api.anthropic.com/v1" and "https://api.anthropic.com" both
	// work. Empty means the official API.
	BaseURL string
	// Model is the model id, e.g. "claude-sonnet-5-5".
	Model string
	// MaxRetries is how often a transient failure is retried: 0 means
	// DefaultMaxRetries, a negative value none.
	MaxRetries int
	// MaxTokens caps a reply when the request sets no cap; 0 means
	// DefaultMaxTokens. Thinking raises it above the thinking budget.
	MaxTokens int
	// HTTPClient, when set, makes the requests.
	HTTPClient *http.Client
}

// retries is the effective retry count.
func (c Config) retries() int {
	switch {
	case c.MaxRetries < 0:
		return 0
	case c.MaxRetries == 0:
		return DefaultMaxRetries
	}
	return c.MaxRetries
}

// Model is an Anthropic model. It is safe for concurrent use.
type Model struct {
	client     sdk.Client
	model      string
	maxTokens  int
	maxRetries int
	// backoff is the wait before retrying a stream that failed before its
	// first event.
	backoff func(attempt int) time.Duration
}

var _ llm.Model = (*Model)(nil)

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	if cfg.Model == "" {
		return nil, fmt.Errorf("new anthropic model: %w", ErrNoModel)
	}
	client, err := newClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("new anthropic model: %w", err)
	}
	maxTokens := cfg.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	return &Model{
		client:     client,
		model:      cfg.Model,
		maxTokens:  maxTokens,
		maxRetries: cfg.retries(),
		backoff:    backoff,
	}, nil
}

// newClient builds the SDK client. Nothing is read from the environment
// (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, profiles): shiro's config has
// already resolved those.
func newClient(cfg Config) (sdk.Client, error) {
	if cfg.APIKey == "" {
		return sdk.Client{}, ErrNoAPIKey
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		// The SDK's WithAPIKey sends a bearer token; the API and the
		// Anthropic-compatible servers shiro talks to take x-api-key.
		option.WithHeader("x-api-key", cfg.APIKey),
		option.WithMaxRetries(0),
		option.WithMiddleware(httpretry.Middleware(cfg.retries())),
	}
	if cfg.BaseURL != "" {
		base, err := baseURL(cfg.BaseURL)
		if err != nil {
			return sdk.Client{}, err
		}
		opts = append(opts, option.WithBaseURL(base))
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient()
	}
	opts = append(opts, option.WithHTTPClient(hc))
	return sdk.NewClient(opts...), nil
}

// baseURL turns a configured base URL into the SDK's: the SDK's paths start
// with "v1/", so a trailing "/v1" (the form users are shown) is dropped.
func baseURL(s string) (string, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		return "", fmt.Errorf("base URL %q: want http:// or https://", s)
	}
	return strings.TrimSuffix(s, "/v1") + "/", nil
}

// defaultHTTPClient bounds the wait for response headers, as the SDK's own
// default does, so a server that accepts the connection and never answers
// cannot hang a turn. Streamed bodies are not bounded.
func defaultHTTPClient() *http.Client {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return &http.Client{}
	}
	t = t.Clone()
	t.ResponseHeaderTimeout = 10 * time.Minute
	return &http.Client{Transport: t}
}

// backoff doubles from half a second up to 8 seconds.
func backoff(attempt int) time.Duration {
	if attempt >= 4 {
		return 8 * time.Second
	}
	return 500 * time.Millisecond << attempt
}

// Info names the model.
func (m *Model) Info() llm.ModelInfo {
	return llm.ModelInfo{Provider: Provider, Model: m.model}
}

// Stream sends one request and streams the reply.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		params, err := m.params(req)
		if err != nil {
			yield(llm.Event{}, fmt.Errorf("anthropic request: %w", err))
			return
		}
		for attempt := 0; ; attempt++ {
			res := m.streamOnce(ctx, params, yield)
			if res.err == nil || res.stopped {
				return
			}
			// A stream that failed before anything reached the caller can
			// be sent again; a failed request has had the SDK's retries.
			if res.yielded || res.request || attempt >= m.maxRetries || ctx.Err() != nil {
				yield(llm.Event{}, fmt.Errorf("anthropic messages: %w", statusError(res.err)))
				return
			}
			llm.ReportRetry(ctx, llm.Retry{Attempt: attempt + 2, Attempts: m.maxRetries + 1, Delay: m.backoff(attempt), Reason: httpretry.OneLine(res.err.Error(), 200)})
			t := time.NewTimer(m.backoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				yield(llm.Event{}, fmt.Errorf("anthropic messages: %w", ctx.Err()))
				return
			case <-t.C:
			}
		}
	}
}

// outcome is how one streaming call went.
type outcome struct {
	yielded bool  // events reached the consumer
	stopped bool  // the consumer stopped iterating
	request bool  // err is the request's, not the stream's
	err     error // nil when the stream finished
}

// streamOnce makes one streaming call and yields its events.
func (m *Model) streamOnce(ctx context.Context, params sdk.MessageNewParams, yield func(llm.Event, error) bool) (res outcome) {
	stream := m.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	if err := stream.Err(); err != nil {
		return outcome{request: true, err: err}
	}
	var acc accumulator
	for stream.Next() {
		ev, ok, err := acc.add(stream.Current())
		if err != nil {
			res.err = err
			return res
		}
		if !ok {
			continue
		}
		// A usage event says what was billed so far, not a part of the
		// answer: a stream cut after it and before any content is still
		// one that may be sent again (whose usage event replaces it).
		res.yielded = res.yielded || ev.Type != llm.EventUsage
		if !yield(ev, nil) {
			res.stopped = true
			return res
		}
		if ev.Type == llm.EventFinish {
			return res
		}
	}
	res.err = stream.Err()
	if res.err == nil {
		res.err = llm.ErrNoFinish
	}
	return res
}

// statusError turns the SDK's API error into an llm.StatusError (the status
// and the API's message, never the raw body); other errors pass as they are.
func statusError(err error) error {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		return err
	}
	msg := httpretry.OneLine(apiErr.Message, 200)
	if msg == "" {
		msg = httpretry.Message([]byte(apiErr.RawJSON()))
	}
	return &llm.StatusError{Status: apiErr.StatusCode, Message: msg, Err: err}
}
