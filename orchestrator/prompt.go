package orchestrator

import (
	"cmp"
	"fmt"
	"runtime"
	"strings"

	"github.com/shiroagent/shiro/tools"
)

// PromptInput is the live state the system prompt is built from.
type PromptInput struct {
	Workspace string
	// Offered are the names of the tools offered on this step.
	Offered []string
	// Guidance is each offered tool's line of advice, as the tool itself
	// gives it (tools.Guided) or else the first sentence of its
	// description. Tools with the same line share it.
	Guidance map[string]string
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
		// One line per piece of guidance, in the order of the first tool
		// that gives it; MCP tools fold into one line of their own.
		var lines []string
		names := map[string][]string{}
		mcp := false
		for _, n := range in.Offered {
			if strings.HasPrefix(n, "mcp__") {
				mcp = true
				continue
			}
			g := cmp.Or(in.Guidance[n], "see its description.")
			if _, ok := names[g]; !ok {
				lines = append(lines, g)
			}
			names[g] = append(names[g], n)
		}
		for _, g := range lines {
			fmt.Fprintf(&b, "- %s: %s\n", strings.Join(names[g], ", "), g)
		}
		if mcp {
			b.WriteString("- mcp__<server>__<tool>: tools from MCP servers; each call needs approval.\n")
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

// guidanceOf is a tool's line for the system prompt: its own guidance, else
// the first sentence of its description (MCP and plugin tools), lower-cased
// at the start like the others.
func guidanceOf(t interface{ Description() string }) string {
	if g, ok := t.(tools.Guided); ok && g.Guidance() != "" {
		return g.Guidance()
	}
	d := strings.TrimSpace(t.Description())
	if i := strings.Index(d, ". "); i >= 0 {
		d = d[:i+1]
	}
	if line, _, ok := strings.Cut(d, "\n"); ok {
		d = strings.TrimSpace(line)
	}
	if d == "" {
		return ""
	}
	return strings.ToLower(d[:1]) + d[1:]
}
