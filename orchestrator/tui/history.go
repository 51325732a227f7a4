package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/shiroagent/shiro/orchestrator/config"
)

// historyLimit is how many prompts a project's history keeps.
const historyLimit = 200

// historyFile is where a project's prompt history lives.
func historyFile(p config.Paths, workspace string) string {
	return filepath.Join(p.DataDir, "history", config.ProjectKey(workspace)+".json")
}

// addHistory appends a prompt: trimmed, blank ignored, an immediate repeat
// not stored, at most historyLimit kept (the oldest go).
func addHistory(h []string, prompt string) []string {
	prompt = strings.TrimSpace(prompt)
	if prompt == "" || (len(h) > 0 && h[len(h)-1] == prompt) {
		return h
	}
	h = append(h, prompt)
	if len(h) > historyLimit {
		h = append([]string(nil), h[len(h)-historyLimit:]...)
	}
	return h
}

// loadHistory reads a history file. A missing or corrupt file, or entries
// that are not strings, give what can be used: nothing, or the strings.
func loadHistory(file string) []string {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var raw []any
	if json.Unmarshal(data, &raw) != nil {
		return nil
	}
	var h []string
	for _, v := range raw {
		if s, ok := v.(string); ok {
			h = addHistory(h, s)
		}
	}
	return h
}

// saveHistory writes the history (newest last), replacing the file
// atomically.
func saveHistory(file string, h []string) error {
	if h == nil {
		h = []string{}
	}
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("save prompt history: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".history-*")
	if err != nil {
		return fmt.Errorf("save prompt history: %w", err)
	}
	_, werr := tmp.Write(append(data, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save prompt history: %w", err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("save prompt history: %w", err)
	}
	return nil
}

// historyNav walks the history from the input: Up goes back, Down forward,
// and Down past the newest restores the draft the user was typing.
type historyNav struct {
	entries []string
	pos     int // len(entries) when not walking
	draft   string
}

func (h *historyNav) reset() { h.pos = len(h.entries) }

// up returns the older entry, or false at the oldest.
func (h *historyNav) up(current string) (string, bool) {
	if h.pos == 0 || len(h.entries) == 0 {
		return "", false
	}
	if h.pos >= len(h.entries) {
		h.pos = len(h.entries)
		h.draft = current
	}
	h.pos--
	return h.entries[h.pos], true
}

// down returns the newer entry, the draft past the newest, or false when
// not walking.
func (h *historyNav) down() (string, bool) {
	if h.pos >= len(h.entries) {
		return "", false
	}
	h.pos++
	if h.pos == len(h.entries) {
		return h.draft, true
	}
	return h.entries[h.pos], true
}
