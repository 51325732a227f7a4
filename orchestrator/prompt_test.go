package orchestrator

import (
	"strings"
	"testing"
)

func TestSystemPromptSectionsInOrderTaskListLast(t *testing.T) {
	t.Parallel()
	in := PromptInput{
		Workspace:    "/home/dev/p",
		Offered:      []string{"read_file", "bash", "ask", "todo_write", "mcp__docs__search"},
		Gated:        []string{"bash", "mcp__docs__search"},
		Interactive:  true,
		Instructions: "INSTRUCTIONS",
		Memory:       "MEMORY",
		Skills:       "SKILLS",
		Appendices:   []string{"APPENDIX-1", "APPENDIX-2"},
		Todos:        "TODOS",
	}
	got := SystemPrompt(in)
	last := -1
	for _, section := range []string{"INSTRUCTIONS", "MEMORY", "SKILLS", "APPENDIX-1", "APPENDIX-2", "TODOS"} {
		i := strings.Index(got, section)
		if i <= last {
			t.Fatalf("%s is out of order:\n%s", section, got)
		}
		last = i
	}
	if !strings.HasSuffix(strings.TrimSpace(got), "TODOS") {
		t.Errorf("the task list is not last:\n%s", got)
	}
	for _, want := range []string{"- ask: ", "ask with the ask tool rather than guess", "mcp__<server>__<tool>", "- bash, mcp__* need the user's approval"} {
		if !strings.Contains(got, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, got)
		}
	}

	in.Interactive, in.Offered = false, []string{"read_file"}
	if got := SystemPrompt(in); strings.Contains(got, "ask tool") || !strings.Contains(got, "Nobody can answer questions in this run") {
		t.Errorf("a headless prompt mentions asking:\n%s", got)
	}
}

func TestSystemPromptWithEveryToolStaysShort(t *testing.T) {
	t.Parallel()
	var offered []string
	for name := range toolGuidance {
		offered = append(offered, name)
	}
	offered = append(offered, gitTools...)
	got := SystemPrompt(PromptInput{Workspace: "/home/dev/p", Offered: offered, Gated: []string{"bash"}, Interactive: true, Sandboxed: true})
	if len(got) > 4000 {
		t.Errorf("the prompt with every tool is %d characters, want at most 4,000:\n%s", len(got), got)
	}
}
