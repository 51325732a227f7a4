package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shiroagent/shiro/agent/llm"
)

// Variant is a preset of the agent: how hard it thinks, which tools it is
// offered, how many steps a turn may take, and what its system prompt adds.
type Variant struct {
	Name    string
	Summary string
	// Thinking is the variant's reasoning level.
	Thinking llm.Reasoning
	// Allow lists the only tools offered (nil: every tool).
	Allow []string
	// MaxSteps caps a turn's model calls (0: the session's cap).
	MaxSteps int
	// Appendix is added to the system prompt ("" for none).
	Appendix string
}

// Allows reports whether the variant offers the tool.
func (v Variant) Allows(name string) bool { return v.Allow == nil || slices.Contains(v.Allow, name) }

// ReadOnlyTools is the allow-list of the read-only variants (plan,
// review): reading, searching, git inspection, the subagent, the task list
// and memory without forget, and job_output (reading what a background job
// started earlier prints). No tool that writes, runs, kills or feeds a
// command, no ask.
var ReadOnlyTools = []string{
	"read_file", "read_many_files", "glob", "grep", "list_dir",
	"git_status", "git_diff", "git_log", "git_show", "git_blame", "job_output",
	"task", "todo_write", "remember", "recall", "skill",
}

// DefaultVariant is the variant of a session that names none.
const DefaultVariant = "default"

var variants = []Variant{
	{Name: "default", Summary: "balanced: thinks at medium, every tool", Thinking: llm.ReasoningMedium},
	{
		Name: "quick", Summary: "small scoped tasks: no thinking, at most 12 steps", Thinking: llm.ReasoningOff, MaxSteps: 12,
		Appendix: "Agent mode: quick. This is a small, scoped task: act directly without deliberating, keep no task list, and do not explore beyond what the task needs.",
	},
	{
		Name: "deep", Summary: "hard problems: thinks at max, up to 80 steps", Thinking: llm.ReasoningMax, MaxSteps: 80,
		Appendix: "Agent mode: deep. Weigh several hypotheses before settling on one, read enough of the code to be sure, record durable findings with remember, and end by saying which conclusions you verified and which you did not.",
	},
	{
		Name: "plan", Summary: "read-only: investigate, then write a plan", Thinking: llm.ReasoningHigh, Allow: ReadOnlyTools,
		Appendix: "Agent mode: plan. You are planning, not changing anything. Investigate the code first, then give a plan: the files to change, the changes in each, the order to make them in, and how to verify the result. Never describe an edit as made.",
	},
	{
		Name: "review", Summary: "read-only: review code and report findings", Thinking: llm.ReasoningHigh, Allow: ReadOnlyTools,
		Appendix: "Agent mode: review. Review in this order: incorrect behaviour, missing handling at trust boundaries, security, then clarity. For each finding give the file and line, why it is a problem and a fix. If the code is fine, say so.",
	},
}

// Variants lists the variants in their fixed order (a copy).
func Variants() []Variant {
	out := make([]Variant, len(variants))
	copy(out, variants)
	return out
}

// VariantNames are the variants' names in order.
func VariantNames() []string {
	names := make([]string, len(variants))
	for i, v := range variants {
		names[i] = v.Name
	}
	return names
}

// ThinkingLevels are the accepted thinking levels, in order.
var ThinkingLevels = []llm.Reasoning{llm.ReasoningOff, llm.ReasoningLow, llm.ReasoningMedium, llm.ReasoningHigh, llm.ReasoningMax}

// ParseThinking checks a thinking level.
func ParseThinking(level string) (llm.Reasoning, error) {
	if slices.Contains(ThinkingLevels, llm.Reasoning(level)) {
		return llm.Reasoning(level), nil
	}
	names := make([]string, len(ThinkingLevels))
	for i, l := range ThinkingLevels {
		names[i] = string(l)
	}
	return "", fmt.Errorf("Unknown thinking level %q. Available: %s", level, strings.Join(names, ", "))
}

// ResolveVariant returns the named variant ("" is the default) with its
// thinking level replaced by thinking when that is not empty. The table is
// never changed: the result is a copy.
func ResolveVariant(name, thinking string) (Variant, error) {
	if name == "" {
		name = DefaultVariant
	}
	i := slices.IndexFunc(variants, func(v Variant) bool { return v.Name == name })
	if i < 0 {
		return Variant{}, fmt.Errorf("Unknown agent %q. Available: %s", name, strings.Join(VariantNames(), ", "))
	}
	v := variants[i]
	v.Allow = slices.Clone(v.Allow)
	if thinking != "" {
		level, err := ParseThinking(thinking)
		if err != nil {
			return Variant{}, err
		}
		v.Thinking = level
	}
	return v, nil
}
