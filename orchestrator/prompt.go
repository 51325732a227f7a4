package orchestrator

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// toolGuidance is one line of advice per tool, shown only while the tool is
// offered (a prompt naming an absent tool teaches calls that cannot work).
var toolGuidance = map[string]string{
	"read_file":       "read_file: read a file (numbered lines) before you edit it; use offset/limit for large files.",
	"read_many_files": "read_many_files: read up to 20 files in one call instead of several read_file calls.",
	"glob":            "glob: find files by pattern (src/**/*.go); it honours .gitignore.",
	"grep":            "grep: search file contents by regex; narrow with include.",
	"list_dir":        "list_dir: see the shape of a directory tree before diving in.",
	"edit_file":       "edit_file: replace an exact, unique oldString; include surrounding lines to make it unique.",
	"multi_edit":      "multi_edit: several edits to one file in one call; all or nothing.",
	"write_file":      "write_file: new files or complete rewrites only.",
	"bash":            "bash: builds, tests, scripts; it runs in a sandbox container with the workspace at the same path.",
	"current_time":    "current_time: the current date and time.",
	"task":            "task: hand a self-contained read-only search or review to a subagent; it sees none of this conversation.",
	"todo_write":      "todo_write: keep a task list for multi-step work; one task in_progress at a time.",
	"remember":        "remember: record a durable fact, decision, gotcha or command about this project.",
	"recall":          "recall: search the notes recorded about this project in earlier sessions.",
	"forget":          "forget: delete notes that turned out wrong or stale.",
	"skill":           "skill: load the instructions of a skill listed below when the task matches it.",
	"ask":             "ask: put a question to the user, with suggested answers, when a decision is theirs.",
}

// gitTools fold into one line.
var gitTools = []string{"git_status", "git_diff", "git_log", "git_show", "git_blame"}

// PromptInput is the live state the system prompt is built from.
type PromptInput struct {
	Workspace string
	// Offered are the names of the tools offered on this step.
	Offered []string
	// Gated names the offered tools that need approval.
	Gated []string
	// Sandboxed says commands run in a container.
	Sandboxed bool
	// Interactive says a person can answer questions and approvals.
	Interactive bool
	// Instructions is the project instructions block ("" for none).
	Instructions string
	// Memory is the memory block ("" for none).
	Memory string
	// Skills is the skills catalogue ("" for none).
	Skills string
	// Variant is the agent variant's appendix ("" for none).
	Variant string
	// Appendices are the plugins' additions to the prompt.
	Appendices []string
	// Todos is the task list block ("" for none); it comes last.
	Todos string
}

// SystemPrompt assembles the prompt of one step.
func SystemPrompt(in PromptInput) string {
	var b strings.Builder
	b.WriteString("You are shiro, a coding agent working in the user's terminal on their project.\n\n")
	fmt.Fprintf(&b, "Environment: workspace %s (%s/%s). Paths you pass to tools are relative to the workspace root; nothing outside it can be read or written.", in.Workspace, runtime.GOOS, runtime.GOARCH)
	if in.Sandboxed {
		b.WriteString(" Commands run in a sandbox container where the workspace is mounted at the same path.")
	}
	b.WriteString("\n\n")

	offered := map[string]bool{}
	for _, n := range in.Offered {
		offered[n] = true
	}
	if len(in.Offered) > 0 {
		b.WriteString("Tools available to you now:\n")
		var git []string
		var mcp, other []string
		for _, n := range in.Offered {
			switch {
			case toolGuidance[n] != "":
				fmt.Fprintf(&b, "- %s\n", toolGuidance[n])
			case slices.Contains(gitTools, n):
				git = append(git, n)
			case strings.HasPrefix(n, "mcp__"):
				mcp = append(mcp, n)
			default:
				other = append(other, n)
			}
		}
		if len(git) > 0 {
			fmt.Fprintf(&b, "- %s: read-only git, no approval needed; prefer them to git in bash.\n", strings.Join(git, ", "))
		}
		if len(mcp) > 0 {
			b.WriteString("- mcp__<server>__<tool>: tools from MCP servers; each call needs approval.\n")
		}
		for _, n := range other {
			fmt.Fprintf(&b, "- %s: see its description.\n", n)
		}
		b.WriteString("\n")
	}

	b.WriteString("How to work:\n")
	if gated := foldMCP(in.Gated); len(gated) > 0 {
		fmt.Fprintf(&b, "- %s need the user's approval. If a call is denied, stop and ask what to do instead; do not retry it another way.\n", strings.Join(gated, ", "))
	} else {
		b.WriteString("- No tool that changes files or runs commands is available: say what should be changed or run.\n")
	}
	if offered["bash"] {
		b.WriteString("- Verify changes with the project's own build and tests.\n")
	} else {
		b.WriteString("- You cannot run commands: say which commands the user should run to verify.\n")
	}
	b.WriteString("- If an approach fails twice, step back and rethink instead of retrying it.\n")
	if in.Interactive && offered["ask"] {
		b.WriteString("- When a decision is the user's, ask with the ask tool rather than guess.\n")
	} else {
		b.WriteString("- Nobody can answer questions in this run: decide, and state the assumption you made.\n")
	}
	b.WriteString("\nReplies: lead with the outcome, no preamble; markdown is rendered; report failures as they are.\n")
	// Appended sections, each only when non-empty; the task list last.
	sections := append([]string{in.Instructions, in.Memory, in.Skills, in.Variant}, in.Appendices...)
	for _, section := range append(sections, in.Todos) {
		if section != "" {
			b.WriteString("\n")
			b.WriteString(section)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// foldMCP replaces the MCP tools among names by one "mcp__*" (a server can
// bring dozens).
func foldMCP(names []string) []string {
	var out []string
	mcp := false
	for _, n := range names {
		if strings.HasPrefix(n, "mcp__") {
			mcp = true
			continue
		}
		out = append(out, n)
	}
	if mcp {
		out = append(out, "mcp__*")
	}
	return out
}
