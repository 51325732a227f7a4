package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Built-in plugin names; Builtins lists them in their default order.
const (
	PluginGuard = "guard"
	PluginTime  = "time"
)

// DefaultPlugins are on unless --no-plugins.
var DefaultPlugins = []string{PluginGuard, PluginTime}

// Builtins returns the named built-in plugins, in the given order, and the
// names that match none.
func Builtins(names []string) ([]Plugin, []string) {
	var out []Plugin
	var unknown []string
	for _, n := range names {
		switch n {
		case PluginGuard:
			out = append(out, GuardPlugin())
		case PluginTime:
			out = append(out, TimePlugin(time.Now))
		default:
			unknown = append(unknown, n)
		}
	}
	return out, unknown
}

// TimePlugin offers current_time.
func TimePlugin(now func() time.Time) Plugin {
	return Plugin{
		Name:        PluginTime,
		Description: "adds current_time",
		Tools:       []Tool{timeTool{now: now}},
		AutoApprove: []string{"current_time"},
	}
}

type timeTool struct{ now func() time.Time }

func (timeTool) Name() string { return "current_time" }
func (timeTool) Description() string {
	return "The current date and time (UTC, ISO 8601) and the local time."
}
func (timeTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
}
func (timeTool) Gated() bool { return false }
func (t timeTool) Run(context.Context, json.RawMessage, func(string)) (Result, error) {
	n := t.now()
	return Result{Output: fmt.Sprintf("%s (local: %s)", n.UTC().Format("2006-01-02T15:04:05.000Z"), n.Local().Format("Mon Jan 02 2006 15:04:05 MST-0700"))}, nil
}
