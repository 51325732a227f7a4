package tui

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// cut shortens a single line of plain text to width cells with "...".
func cut(s string, width int) string {
	if width <= 0 || ansi.StringWidth(s) <= width {
		return s
	}
	return ansi.Truncate(s, width, "...")
}

// clip shortens s to n runes plus "...".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}

// firstLine is the first line of s, with " ..." when more follow.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// toolSummary names what a call works on: the first string among command,
// path, pattern, description, question, name (cut at 90 characters), else
// "<n> task(s)" for a todo list, else the first three keys.
func toolSummary(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) != nil {
		return ""
	}
	for _, k := range []string{"command", "path", "pattern", "description", "question", "name"} {
		if s, ok := m[k].(string); ok && s != "" {
			return clip(strings.Join(strings.Fields(s), " "), 90)
		}
	}
	if todos, ok := m["todos"].([]any); ok {
		return fmt.Sprintf("%d task(s)", len(todos))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > 3 {
		keys = keys[:3]
	}
	return strings.Join(keys, ", ")
}

// trailingBlank matches the padding glamour leaves at the end of a line.
var trailingBlank = regexp.MustCompile(`(?:\x1b\[[0-9;]*m| )+$`)

// tidyLines removes trailing padding from each line (keeping a reset when
// the padding held escape codes) and blank lines at both ends.
func tidyLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = trailingBlank.ReplaceAllStringFunc(l, func(m string) string {
			if strings.Contains(m, "\x1b") {
				return "\x1b[0m"
			}
			return ""
		})
	}
	blank := func(l string) bool { return strings.TrimSpace(ansi.Strip(l)) == "" }
	for len(lines) > 0 && blank(lines[0]) {
		lines = lines[1:]
	}
	for len(lines) > 0 && blank(lines[len(lines)-1]) {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

// lastLines keeps the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// humanTokens shows a token count: 950, 1.2k, 12k, 1.5M.
func humanTokens(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d", n)
	case n < 10_000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	case n < 1_000_000:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprintf("%.1fM", float64(n)/1e6)
}
