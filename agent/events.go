package agent

import "encoding/json"

// EventType names an agent event; the strings are the wire names of
// `--json` output.
type EventType string

// The events of a turn.
const (
	EventText       EventType = "text"
	EventReasoning  EventType = "reasoning"
	EventToolStart  EventType = "tool-start"
	EventToolCall   EventType = "tool-call"
	EventToolOutput EventType = "tool-output"
	EventToolResult EventType = "tool-result"
	EventToolError  EventType = "tool-error"
	EventToolDenied EventType = "tool-denied"
	EventCompacted  EventType = "compacted"
	EventNotice     EventType = "notice"
	EventRetry      EventType = "retry"
	EventError      EventType = "error"
	EventDone       EventType = "done"
)

// Event is one thing that happened in a turn. Fields apply by Type.
type Event struct {
	Type EventType `json:"type"`
	// Text of text, reasoning and notice events.
	Text string `json:"text,omitempty"`
	// ID and Name of the tool call (tool-* events).
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// Input of tool-call and tool-denied events, and of the tool-error
	// event of a call that fails its tool's check before anyone is asked.
	Input json.RawMessage `json:"input,omitempty"`
	// Chunk of live output (tool-output).
	Chunk string `json:"chunk,omitempty"`
	// Output of tool-result and tool-error events (what the model reads).
	Output string `json:"output,omitempty"`
	// Exit says how a command ended (tool-result and tool-error events of
	// tools that run one).
	Exit *Exit `json:"exit,omitempty"`
	// Error of tool-error and error events, as a message.
	Error string `json:"error,omitempty"`
	// Reason a call was denied (tool-denied).
	Reason string `json:"reason,omitempty"`
	// Before and After count messages (compacted).
	Before int `json:"before,omitempty"`
	After  int `json:"after,omitempty"`
	// Attempt, Attempts and DelayMs describe a retry of the model's request
	// (retry events, whose Text says why the last attempt failed): attempt
	// Attempt of Attempts starts after DelayMs milliseconds.
	Attempt  int   `json:"attempt,omitempty"`
	Attempts int   `json:"attempts,omitempty"`
	DelayMs  int64 `json:"delayMs,omitempty"`
	// Token counts of done events.
	InputTokens  int `json:"inputTokens,omitempty"`
	OutputTokens int `json:"outputTokens,omitempty"`
}
