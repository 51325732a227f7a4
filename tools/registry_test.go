package tools

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
)

// fakeTool is a Tool with fixed answers, for registry tests that must not
// depend on which tools exist.
type fakeTool struct {
	name  string
	set   Set
	gated bool
}

func (f fakeTool) Name() string        { return f.name }
func (f fakeTool) Set() Set            { return f.set }
func (f fakeTool) Gated() bool         { return f.gated }
func (f fakeTool) Description() string { return "fake" }
func (f fakeTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{},"required":[]}`)
}
func (f fakeTool) Run(context.Context, *Env, json.RawMessage) (Result, error) {
	return Text(f.name), nil
}

// The 14 built-in tools of the spec (§4.15) and the job tools: set and
// gating.
var specTools = map[string]struct {
	set   Set
	gated bool
}{
	"read_file": {SetCore, false}, "write_file": {SetCore, true}, "edit_file": {SetCore, true},
	"glob": {SetCore, false}, "grep": {SetCore, false}, "bash": {SetCore, true},
	"multi_edit": {SetEditPlus, true}, "list_dir": {SetEditPlus, false}, "read_many_files": {SetEditPlus, false},
	"git_status": {SetGit, false}, "git_diff": {SetGit, false}, "git_log": {SetGit, false},
	"git_show": {SetGit, false}, "git_blame": {SetGit, false},
	// issue 29: background jobs. job_input feeds a REPL, so it asks.
	"job_output": {SetCore, false}, "job_kill": {SetCore, false}, "job_input": {SetCore, true},
}

func TestBuiltinsFollowTheSpec(t *testing.T) {
	t.Parallel()
	var names []string
	for _, tool := range Builtins() {
		names = append(names, tool.Name())
		t.Run(tool.Name(), func(t *testing.T) {
			t.Parallel()
			want, ok := specTools[tool.Name()]
			if !ok {
				t.Fatalf("%s is not a built-in tool of the spec", tool.Name())
			}
			if tool.Set() != want.set || tool.Gated() != want.gated || IsGated(tool) != want.gated {
				t.Errorf("set %q gated %v, want %q %v", tool.Set(), tool.Gated(), want.set, want.gated)
			}
			if tool.Description() == "" {
				t.Error("no description")
			}
		})
	}
	for _, mine := range []string{"read_file", "write_file", "edit_file", "glob", "multi_edit", "list_dir", "read_many_files"} {
		if !slices.Contains(names, mine) {
			t.Errorf("Builtins lacks %s", mine)
		}
	}
	if sorted := slices.Sorted(slices.Values(names)); len(slices.Compact(sorted)) != len(names) {
		t.Errorf("duplicate names: %v", names)
	}
}

func TestParseToolSets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		names    []string
		present  bool
		want     []Set
		warnings int
	}{
		{"key omitted: every set", nil, false, []Set{SetCore, SetEditPlus, SetGit}, 0},
		{"empty list: core only", []string{}, true, []Set{SetCore}, 0},
		{"listed sets on top of core", []string{"git"}, true, []Set{SetCore, SetGit}, 0},
		{"core named explicitly", []string{"core", "edit-plus"}, true, []Set{SetCore, SetEditPlus}, 0},
		{"duplicates are harmless", []string{"git", "git"}, true, []Set{SetCore, SetGit}, 0},
		{"unknown names are dropped with a warning each", []string{"gti", "git", "net"}, true, []Set{SetCore, SetGit}, 2},
		{"names are case-sensitive", []string{"Git"}, true, []Set{SetCore}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sets, warnings := ParseToolSets(tt.names, tt.present)
			if got := sets.List(); !slices.Equal(got, tt.want) || len(warnings) != tt.warnings {
				t.Errorf("sets %v warnings %q, want %v and %d warnings", got, warnings, tt.want, tt.warnings)
			}
		})
	}
	if _, w := ParseToolSets([]string{"gti"}, true); len(w) != 1 || w[0] != `unknown tool set "gti" ignored (known sets: core, edit-plus, git)` {
		t.Errorf("warning = %q", w)
	}
}

func TestOffered(t *testing.T) {
	t.Parallel()
	all := []Tool{
		fakeTool{name: "read_file", set: SetCore},
		fakeTool{name: "bash", set: SetCore, gated: true},
		fakeTool{name: "list_dir", set: SetEditPlus},
		fakeTool{name: "git_log", set: SetGit},
		fakeTool{name: "todo_write", set: SetNone},
		fakeTool{name: "mcp__srv__x", set: SetNone},
	}
	tests := []struct {
		name    string
		names   []string
		present bool
		want    []string
	}{
		{"everything when the key is omitted", nil, false, []string{"read_file", "bash", "list_dir", "git_log", "todo_write", "mcp__srv__x"}},
		{"core and no-set tools for []", []string{}, true, []string{"read_file", "bash", "todo_write", "mcp__srv__x"}},
		{"one extra set", []string{"git"}, true, []string{"read_file", "bash", "git_log", "todo_write", "mcp__srv__x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sets, _ := ParseToolSets(tt.names, tt.present)
			var got []string
			for _, tool := range Offered(all, sets) {
				got = append(got, tool.Name())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("offered %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsGated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		tool Tool
		want bool
	}{
		{"a tool that says so", fakeTool{name: "write_file", gated: true}, true},
		{"a free tool", fakeTool{name: "glob"}, false},
		{"every MCP tool, whatever it says", fakeTool{name: "mcp__fs__read"}, true},
		{"mcp without the double underscore is not MCP", fakeTool{name: "mcp_read"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsGated(tt.tool); got != tt.want {
				t.Errorf("IsGated = %v", got)
			}
		})
	}
}

func TestFind(t *testing.T) {
	t.Parallel()
	all := []Tool{fakeTool{name: "a"}, fakeTool{name: "b"}}
	tests := []struct {
		name string
		want Tool
	}{
		{"a", all[0]},
		{"b", all[1]},
		{"c", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Find(all, tt.name); got != tt.want {
				t.Errorf("Find(%q) = %v", tt.name, got)
			}
		})
	}
}
