// Package llm is the provider-neutral language of shiro's agent: messages
// made of parts (text, reasoning, tool calls, tool results), tool specs, the
// request a step sends, and the events a streaming model yields. It imports
// no SDK; each provider package translates to and from its wire format.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Role is who a message is from.
type Role string

// The roles. Tool results travel in RoleTool messages.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// PartType says what a Part holds.
type PartType string

// The part types.
const (
	PartText       PartType = "text"
	PartReasoning  PartType = "reasoning"
	PartToolCall   PartType = "tool_call"
	PartToolResult PartType = "tool_result"
)

// Part is one piece of a message. Fields apply by Type.
type Part struct {
	Type PartType `json:"type"`

	// Text is the text of a text or reasoning part.
	Text string `json:"text,omitempty"`

	// CallID pairs a tool call with its result.
	CallID string `json:"callId,omitempty"`
	// Name is the tool's name (tool calls and results).
	Name string `json:"name,omitempty"`
	// Input is the tool call's JSON arguments as the model sent them. It may
	// be invalid JSON: the agent answers that with a tool error.
	Input json.RawMessage `json:"input,omitempty"`
	// Output is the tool result's text; IsError marks a failed call.
	Output  string `json:"output,omitempty"`
	IsError bool   `json:"isError,omitempty"`

	// Provider state that must be sent back unchanged.
	// ItemID is a provider's id for this item (OpenAI Responses items).
	ItemID string `json:"itemId,omitempty"`
	// Signature authenticates a reasoning part (Anthropic thinking).
	Signature string `json:"signature,omitempty"`
	// Encrypted is opaque reasoning content (OpenAI encrypted reasoning,
	// Anthropic redacted thinking).
	Encrypted string `json:"encrypted,omitempty"`
	// Provider names the provider whose ItemID/Signature/Encrypted these are;
	// other providers ignore them.
	Provider string `json:"provider,omitempty"`
}

// Message is one turn of the conversation.
type Message struct {
	Role  Role   `json:"role"`
	Parts []Part `json:"parts"`
}

// Text makes a message with one text part.
func Text(role Role, s string) Message {
	return Message{Role: role, Parts: []Part{{Type: PartText, Text: s}}}
}

// ToolSpec describes a tool offered to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
}

// Reasoning is how hard the model should think.
type Reasoning string

// The reasoning levels.
const (
	ReasoningOff    Reasoning = "off"
	ReasoningLow    Reasoning = "low"
	ReasoningMedium Reasoning = "medium"
	ReasoningHigh   Reasoning = "high"
	ReasoningMax    Reasoning = "max"
)

// Request is one model call.
type Request struct {
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int
	Reasoning Reasoning
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	// Estimated says some of the counts are shiro's estimate, not the
	// provider's: a request cut (an abort, a broken stream) before the
	// provider reported them.
	Estimated bool `json:"estimated,omitempty"`
}

// Add returns the sum.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens, Estimated: u.Estimated || v.Estimated}
}

// EventType says what an Event carries.
type EventType string

// The stream events.
const (
	// EventText carries a text delta.
	EventText EventType = "text"
	// EventReasoning carries a reasoning delta.
	EventReasoning EventType = "reasoning"
	// EventToolStart names a tool call as soon as it begins streaming,
	// before its arguments are complete.
	EventToolStart EventType = "tool_start"
	// EventToolCall is a complete tool call.
	EventToolCall EventType = "tool_call"
	// EventUsage carries the usage the provider reported before the end
	// (Anthropic's message_start: the input tokens), so that a stream
	// cut later still counts what it billed. Usage is the whole request's
	// so far, not a delta.
	EventUsage EventType = "usage"
	// EventFinish ends the stream: the whole assistant message as the
	// provider needs it sent back, the usage and the stop reason.
	EventFinish EventType = "finish"
)

// Event is one item of a model's stream.
type Event struct {
	Type EventType
	// Text is the delta of text and reasoning events.
	Text string
	// Call is the tool call of tool_start (CallID and Name only) and
	// tool_call events.
	Call Part
	// Message, Usage and StopReason come with the finish event (Usage
	// with a usage event too).
	Message    Message
	Usage      Usage
	StopReason string
}

// ModelInfo names a model.
type ModelInfo struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// Model streams one step of the conversation. The sequence ends after a
// finish event, or with a non-nil error (the stream failed; events already
// yielded stay yielded). Retrying transient failures before the first event
// is the model's job.
type Model interface {
	Info() ModelInfo
	Stream(ctx context.Context, req Request) iter.Seq2[Event, error]
}

// ErrNoFinish is the error of a stream that ended without a finish event.
var ErrNoFinish = errors.New("model stream ended without finishing")

// Retry describes a failed attempt of a model request that is about to be
// made again.
type Retry struct {
	// Attempt is the attempt about to start (2 for the first retry) of
	// Attempts in all, the first included.
	Attempt, Attempts int
	// Delay is the wait before it.
	Delay time.Duration
	// Reason says why the last attempt failed ("503 Service Unavailable").
	Reason string
}

type retryKey struct{}

// WithRetryReport returns ctx carrying report: a model calls it before
// each retry of a request made under ctx (as net/http/httptrace carries its
// hooks), so that the user sees the wait.
func WithRetryReport(ctx context.Context, report func(Retry)) context.Context {
	return context.WithValue(ctx, retryKey{}, report)
}

// ReportRetry calls the report ctx carries, if any.
func ReportRetry(ctx context.Context, r Retry) {
	if report, ok := ctx.Value(retryKey{}).(func(Retry)); ok && report != nil {
		report(r)
	}
}

// StatusError is a model API's answer with an error status: the status and
// the API's own one-line message (never the raw body: an HTML page or a JSON
// document says nothing more to a user).
type StatusError struct {
	Status  int
	Message string // the API's message, "" when the body had none
	Err     error  // the SDK's error
}

func (e *StatusError) Error() string {
	s := strconv.Itoa(e.Status)
	if t := http.StatusText(e.Status); t != "" {
		s += " " + t
	}
	if e.Message != "" && !strings.EqualFold(e.Message, http.StatusText(e.Status)) {
		s += ": " + e.Message
	}
	return s
}

func (e *StatusError) Unwrap() error { return e.Err }
