package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// Built-in plugin names; Builtins lists them in their default order.
const (
	PluginGuard = "guard"
	PluginTime  = "time"
	PluginBell  = "bell"
)

// DefaultPlugins are on unless --no-plugins.
var DefaultPlugins = []string{PluginGuard, PluginTime}

// Builtins returns the named built-in plugins, in the given order, and the
// names that match none.
func Builtins(names []string) ([]Plugin, []string) { return BuiltinsIn("", names) }

// BuiltinsIn is Builtins for a session in workspace, the directory bash
// starts in (the guard judges chmod -R and chown -R by it).
func BuiltinsIn(workspace string, names []string) ([]Plugin, []string) {
	var out []Plugin
	var unknown []string
	for _, n := range names {
		switch n {
		case PluginGuard:
			out = append(out, GuardPluginIn(workspace))
		case PluginTime:
			out = append(out, TimePlugin(time.Now))
		case PluginBell:
			out = append(out, BellPlugin(os.Stderr))
		default:
			unknown = append(unknown, n)
		}
	}
	return out, unknown
}

// BellPlugin (opt-in) rings the terminal's bell: it writes the BEL byte to
// w after every turn, however the turn ended.
func BellPlugin(w io.Writer) Plugin {
	return Plugin{
		Name:        PluginBell,
		Description: "rings the terminal bell after each turn",
		AfterTurn: func(context.Context) error {
			_, err := w.Write([]byte{'\a'})
			return err
		},
	}
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
