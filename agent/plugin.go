package agent

import (
	"context"
	"encoding/json"
	"slices"
)

// ToolCall is what a guard sees of a call.
type ToolCall struct {
	Name  string
	Input json.RawMessage
	// Unattended says no one will approve the call before it runs: --yolo,
	// a tool that never asks, or one the user allowed for the session.
	Unattended bool
}

// Plugin extends the agent. Plugins are compiled in; nothing is loaded from
// disk. Every field is optional.
type Plugin struct {
	Name        string
	Description string
	// Tools are offered in addition to the built-ins.
	Tools []Tool
	// AutoApprove names tools that never ask.
	AutoApprove []string
	// BeforeToolCall returns a non-empty reason to refuse a call. Plugins
	// are asked in order; the first refusal wins; an error refuses too.
	BeforeToolCall func(ctx context.Context, call ToolCall) (string, error)
	// AfterTurn runs after every turn, also an aborted or failed one.
	AfterTurn func(ctx context.Context) error
	// Appendix is added to the system prompt.
	Appendix string
}

// Appendices are the plugins' non-empty appendices, in plugin order.
func Appendices(plugins []Plugin) []string {
	var out []string
	for _, p := range plugins {
		if p.Appendix != "" {
			out = append(out, p.Appendix)
		}
	}
	return out
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
