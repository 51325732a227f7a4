package tools

import (
	"fmt"
	"slices"
	"strings"
)

// Builtins returns the built-in tools, one of each, in the order they are
// offered.
func Builtins() []Tool {
	return []Tool{
		NewReadFile(),
		NewWriteFile(),
		NewEditFile(),
		NewGlob(),
		NewBash(),
		NewJobOutput(),
		NewJobKill(),
		NewJobInput(),
		NewGrep(),
		NewGitStatus(),
		NewGitDiff(),
		NewGitLog(),
		NewGitShow(),
		NewGitBlame(),
		NewMultiEdit(),
		NewListDir(),
		NewReadManyFiles(),
	}
}

// knownSets lists the tool sets, core first.
var knownSets = []Set{SetCore, SetEditPlus, SetGit}

// KnownSets returns the names of the tool sets, core first.
func KnownSets() []Set { return slices.Clone(knownSets) }

// EnabledSets is the set of tool sets a session offers; core is always in it.
type EnabledSets map[Set]bool

// Has reports whether tools of set s are offered. Tools in no set are.
func (e EnabledSets) Has(s Set) bool { return s == SetNone || s == SetCore || e[s] }

// List returns the enabled sets in KnownSets order, core first (for the
// startup header: "tool sets: core, git").
func (e EnabledSets) List() []Set {
	var out []Set
	for _, s := range knownSets {
		if e.Has(s) {
			out = append(out, s)
		}
	}
	return out
}

// ParseToolSets reads the toolSets config key. present is false when the key
// is absent: then every set is on. When present, core is on plus the named
// sets ([] means core only). Unknown names are dropped, each with a warning.
func ParseToolSets(names []string, present bool) (EnabledSets, []string) {
	sets := EnabledSets{SetCore: true}
	if !present {
		for _, s := range knownSets {
			sets[s] = true
		}
		return sets, nil
	}
	var warnings []string
	for _, n := range names {
		if s := Set(n); slices.Contains(knownSets, s) {
			sets[s] = true
			continue
		}
		warnings = append(warnings, fmt.Sprintf("unknown tool set %q ignored (known sets: %s)", n, joinSets(knownSets)))
	}
	return sets, warnings
}

func joinSets(sets []Set) string {
	s := make([]string, len(sets))
	for i, set := range sets {
		s[i] = string(set)
	}
	return strings.Join(s, ", ")
}

// Offered returns the tools of all that the enabled sets allow, in order.
// It is the only place that decides which tools the model is offered:
// session, plugin and MCP tools (SetNone) always are.
func Offered(all []Tool, sets EnabledSets) []Tool {
	var out []Tool
	for _, t := range all {
		if sets.Has(t.Set()) {
			out = append(out, t)
		}
	}
	return out
}

// IsGated reports whether a call of t needs approval: the tool says so
// (write_file, edit_file, multi_edit, bash), or it is an MCP tool.
func IsGated(t Tool) bool { return t.Gated() || strings.HasPrefix(t.Name(), "mcp__") }

// A Guided tool has a one-line piece of advice for the system prompt's
// list of the tools offered. Tools with the same guidance share a line.
type Guided interface {
	Guidance() string
}

// guidancePrefix opens a description file's first line when it carries the
// tool's guidance: "Guidance: <line>", a blank line, then the description
// the model reads in the tool's spec.
const guidancePrefix = "Guidance: "

// SplitDoc splits a tool's description file into its guidance line ("" for
// none) and its description.
func SplitDoc(doc string) (guidance, description string) {
	rest, ok := strings.CutPrefix(doc, guidancePrefix)
	if !ok {
		return "", strings.TrimSpace(doc)
	}
	line, desc, _ := strings.Cut(rest, "\n")
	return strings.TrimSpace(line), strings.TrimSpace(desc)
}

// Find returns the tool called name in all, or nil.
func Find(all []Tool, name string) Tool {
	for _, t := range all {
		if t.Name() == name {
			return t
		}
	}
	return nil
}
