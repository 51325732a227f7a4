package agent

import "context"

type callKey struct{}

// CallInfo names the tool call a tool's Run serves.
type CallInfo struct {
	ID, Name string
}

// CallFrom returns the tool call ctx belongs to, inside a tool's Run.
func CallFrom(ctx context.Context) (CallInfo, bool) {
	c, ok := ctx.Value(callKey{}).(CallInfo)
	return c, ok
}
