package orchestrator

import (
	"testing"

	"github.com/shiroagent/shiro/agent/llm"
)

func TestRewind(t *testing.T) {
	t.Parallel()
	msgs := []llm.Message{
		llm.Text(llm.RoleUser, "first"),
		llm.Text(llm.RoleAssistant, "answer"),
		llm.Text(llm.RoleUser, "edit   the\nfiles"),
		llm.Text(llm.RoleAssistant, "edited"),
	}
	tests := []struct {
		name    string
		plan    UndoPlan
		wantLen int
		wantOK  bool
	}{
		{"cut before the turn", UndoPlan{History: 2, Prompt: clip("edit   the\nfiles", 200)}, 2, true},
		{"the first turn empties the conversation", UndoPlan{History: 0, Prompt: "first"}, 0, true},
		{"a history that moved (compacted) is left", UndoPlan{History: 2, Prompt: "something else"}, 4, false},
		{"past the end is left", UndoPlan{History: 4, Prompt: "x"}, 4, false},
		{"not a user message is left", UndoPlan{History: 1, Prompt: "answer"}, 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Rewind(msgs, &tt.plan)
			if len(got) != tt.wantLen || ok != tt.wantOK {
				t.Errorf("Rewind = %d messages, %v; want %d, %v", len(got), ok, tt.wantLen, tt.wantOK)
			}
		})
	}
}
