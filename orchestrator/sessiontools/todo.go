package sessiontools

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/tools"
)

// Todo statuses.
const (
	StatusPending    = "pending"
	StatusInProgress = "in_progress"
	StatusDone       = "done"
	StatusBlocked    = "blocked"
)

var markers = map[string]string{StatusPending: "[ ]", StatusInProgress: "[~]", StatusDone: "[x]", StatusBlocked: "[!]"}

// Todo is one task of the list.
type Todo struct {
	Content string `json:"content"`
	Status  string `json:"status"`
	Note    string `json:"note,omitempty"`
}

// Line renders the task: "<marker> <content>[  (<note>)]".
func (t Todo) Line() string {
	s := markers[t.Status] + " " + t.Content
	if t.Note != "" {
		s += "  (" + t.Note + ")"
	}
	return s
}

func (t Todo) valid() bool { return strings.TrimSpace(t.Content) != "" && markers[t.Status] != "" }

// TodoList is a session's task list. It is safe for concurrent use.
type TodoList struct {
	mu    sync.Mutex
	items []Todo
	// OnChange, when set, is called with the new list after every change
	// (autosave, the TUI's task panel).
	OnChange func([]Todo)
}

// Items returns a copy of the list.
func (l *TodoList) Items() []Todo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Todo(nil), l.items...)
}

// Set replaces the list.
func (l *TodoList) Set(items []Todo) {
	l.mu.Lock()
	l.items = append([]Todo(nil), items...)
	onChange := l.OnChange
	l.mu.Unlock()
	if onChange != nil {
		onChange(append([]Todo(nil), items...))
	}
}

// JSON is the list as saved in the session record (nil when empty).
func (l *TodoList) JSON() json.RawMessage {
	items := l.Items()
	if len(items) == 0 {
		return nil
	}
	b, _ := json.Marshal(items) // plain strings: cannot fail
	return b
}

// Restore loads a saved list, dropping malformed entries and unknown
// statuses. It does not call OnChange.
func (l *TodoList) Restore(raw json.RawMessage) {
	var entries []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &entries) != nil {
		return
	}
	var items []Todo
	for _, e := range entries {
		var t Todo
		if json.Unmarshal(e, &t) == nil && t.valid() {
			items = append(items, t)
		}
	}
	l.mu.Lock()
	l.items = items
	l.mu.Unlock()
}

// Counts returns the done, blocked, in-progress and pending tasks of items.
func Counts(items []Todo) (done, blocked, inProgress, pending int) {
	for _, t := range items {
		switch t.Status {
		case StatusDone:
			done++
		case StatusBlocked:
			blocked++
		case StatusInProgress:
			inProgress++
		case StatusPending:
			pending++
		}
	}
	return
}

// Block is the task list section of the system prompt ("" when empty).
func (l *TodoList) Block() string {
	items := l.Items()
	if len(items) == 0 {
		return ""
	}
	done, blocked, _, _ := Counts(items)
	var b strings.Builder
	fmt.Fprintf(&b, "Your task list (%d/%d done", done, len(items))
	if blocked > 0 {
		fmt.Fprintf(&b, ", %d blocked", blocked)
	}
	b.WriteString("). Keep it current with todo_write:\n")
	for _, t := range items {
		b.WriteString(t.Line())
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

//go:embed todo_write.md
var todoWriteDoc string

var todoWriteGuidance, todoWriteDescription = tools.SplitDoc(todoWriteDoc)

// TodoWrite is the todo_write tool.
type TodoWrite struct{ List *TodoList }

type todoParams struct {
	Todos []Todo `json:"todos"`
}

var todoSchema = objectSchema([]string{"todos"}, prop{
	name: "todos", typ: "array", desc: "The whole list, in order.",
	items: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"content": map[string]any{"type": "string", "description": "Short, imperative."},
			"status":  map[string]any{"type": "string", "enum": []string{StatusPending, StatusInProgress, StatusDone, StatusBlocked}},
			"note":    map[string]any{"type": "string", "description": "Why it is blocked."},
		},
		"required": []string{"content", "status"},
	},
})

func (TodoWrite) Name() string            { return "todo_write" }
func (TodoWrite) Description() string     { return todoWriteDescription }
func (TodoWrite) Guidance() string        { return todoWriteGuidance }
func (TodoWrite) Schema() json.RawMessage { return todoSchema }
func (TodoWrite) Gated() bool             { return false }

// Run replaces the list and reports it, with warnings.
func (t TodoWrite) Run(_ context.Context, input json.RawMessage, _ func(string)) (agent.Result, error) {
	var p todoParams
	if err := decode(input, &p); err != nil {
		return agent.Result{Output: err.Error(), IsError: true}, nil
	}
	for i := range p.Todos {
		td := &p.Todos[i]
		td.Content, td.Note = strings.TrimSpace(td.Content), strings.TrimSpace(td.Note)
		if td.Content == "" {
			return agent.Result{Output: fmt.Sprintf("task %d has no content", i+1), IsError: true}, nil
		}
		if markers[td.Status] == "" {
			return agent.Result{Output: fmt.Sprintf("task %q has status %q; use pending, in_progress, done or blocked", td.Content, td.Status), IsError: true}, nil
		}
	}
	t.List.Set(p.Todos)
	return agent.Result{Output: todoReport(p.Todos)}, nil
}

// todoReport is the result text of todo_write.
func todoReport(items []Todo) string {
	done, _, inProgress, pending := Counts(items)
	var b strings.Builder
	fmt.Fprintf(&b, "Task list updated: %d/%d done.", done, len(items))
	for _, t := range items {
		b.WriteString("\n")
		b.WriteString(t.Line())
	}
	var warnings []string
	if inProgress > 1 {
		warnings = append(warnings, fmt.Sprintf("%d tasks are in_progress; keep it to one.", inProgress))
	}
	if inProgress == 0 && pending > 0 {
		warnings = append(warnings, "nothing is in_progress; mark what you are working on.")
	}
	for _, t := range items {
		if t.Status == StatusBlocked && t.Note == "" {
			warnings = append(warnings, `"`+t.Content+`" is blocked with no note saying why.`)
		}
	}
	if len(warnings) > 0 {
		b.WriteString("\nWarning: " + strings.Join(warnings, " "))
	}
	return b.String()
}
