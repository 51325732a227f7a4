package sandbox

import "context"

// Caller names the tool call a command runs for, so that what the command
// does outside the sandbox (a network connection) can be traced back to it.
type Caller struct {
	// ID is the tool call's id; Tool its tool's name; Summary a short form
	// of its input (the command line).
	ID      string `json:"callId,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Summary string `json:"command,omitempty"`
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller ctx carries, if any.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}
