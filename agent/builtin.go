package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"
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

// guardRule is one refusal of the guard.
type guardRule struct {
	re  *regexp.Regexp
	why string
}

// The start of a command: the line start or a shell separator.
const cmdStart = `(?:^|[;&|(){}\n]|\$\(|\x60)\s*(?:sudo\s+(?:-\S+\s+)*)?`

var guardRules = []guardRule{
	{regexp.MustCompile(cmdStart + `rm\s+(?:[^;&|\n]*\s)?(?:-[a-zA-Z]*[rRf][a-zA-Z]*|--recursive|--force)\b`), "recursive or forced rm"},
	{regexp.MustCompile(cmdStart + `git\s+(?:-\S+\s+)*reset\s+(?:[^;&|\n]*\s)?--hard\b`), "git reset --hard discards work"},
	{regexp.MustCompile(cmdStart + `git\s+(?:-\S+\s+)*clean\s+(?:[^;&|\n]*\s)?-[a-zA-Z]*f`), "git clean -f deletes untracked files"},
	{regexp.MustCompile(cmdStart + `git\s+(?:-\S+\s+)*push\b[^;&|\n]*\s(?:--force(?:-with-lease)?(?:=\S*)?|-[a-zA-Z]*f[a-zA-Z]*)(?:\s|$)`), "force push rewrites shared history"},
	{regexp.MustCompile(cmdStart + `git\s+(?:-\S+\s+)*branch\s+(?:[^;&|\n]*\s)?-D\b`), "git branch -D deletes unmerged work"},
	{regexp.MustCompile(`(?i)\b(?:drop|truncate)\s+(?:table|database|schema)\b`), "destructive SQL"},
	{regexp.MustCompile(cmdStart + `mkfs(?:\.\w+)?\b`), "formats a filesystem"},
	{regexp.MustCompile(cmdStart + `dd\s+[^;&|\n]*\bof=/dev/`), "dd onto a device"},
	{regexp.MustCompile(`>\s*/dev/(?:sd|nvme|disk|hd|xvd|vd)\w*`), "writes onto a disk device"},
	{regexp.MustCompile(cmdStart + `chmod\s+(?:-\S+\s+)*0?777\b`), "chmod 777 opens files to everyone"},
	{regexp.MustCompile(cmdStart + `(?:shutdown|reboot|halt|poweroff)\b`), "shuts the machine down"},
	{regexp.MustCompile(`:\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:`), "fork bomb"},
	{regexp.MustCompile(`\b(?:curl|wget)\b[^|\n]*\|\s*(?:sudo\s+)?(?:sh|bash|zsh|ksh|dash)\b`), "pipes a download into a shell"},
}

// GuardReason returns why the guard refuses a bash command, or "".
func GuardReason(command string) string {
	for _, r := range guardRules {
		if r.re.MatchString(command) {
			shown := command
			if utf8.RuneCountInString(shown) > 120 {
				shown = string([]rune(shown)[:120])
			}
			return fmt.Sprintf("refusing %q (%s). Ask the user to run it themselves if it is really needed.", shown, r.why)
		}
	}
	return ""
}

// GuardPlugin refuses destructive bash commands. --yolo does not reach it.
func GuardPlugin() Plugin {
	return Plugin{
		Name:        PluginGuard,
		Description: "refuses destructive shell commands (rm -rf, force pushes, disk writes, fork bombs, curl | sh)",
		BeforeToolCall: func(_ context.Context, call ToolCall) (string, error) {
			if call.Name != "bash" {
				return "", nil
			}
			var in struct {
				Command string `json:"command"`
			}
			if err := json.Unmarshal(call.Input, &in); err != nil || in.Command == "" {
				return "", nil
			}
			return GuardReason(in.Command), nil
		},
		Appendix: "The guard plugin refuses destructive shell commands. When it refuses one, do not work around it (other spellings, scripts, other tools): tell the user what you wanted to run and why, and let them decide.",
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
