package agent_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
)

func TestVariantTable(t *testing.T) {
	vs := agent.Variants()
	if got := agent.VariantNames(); !slices.Equal(got, []string{"default", "quick", "deep", "plan", "review"}) {
		t.Fatalf("names = %v", got)
	}
	seen := map[string]bool{}
	for _, v := range vs {
		if v.Name == "" || v.Summary == "" || !slices.Contains(agent.ThinkingLevels, v.Thinking) {
			t.Errorf("variant %+v lacks a name, a summary or a valid level", v)
		}
		if seen[v.Name] {
			t.Errorf("variant %q twice", v.Name)
		}
		seen[v.Name] = true
	}
	get := func(name string) agent.Variant {
		v, err := agent.ResolveVariant(name, "")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	def := get("default")
	if def.Thinking != llm.ReasoningMedium || def.Allow != nil || def.Appendix != "" || def.MaxSteps != 0 {
		t.Errorf("default = %+v, want medium, unrestricted, no appendix, the session's cap", def)
	}
	if q := get("quick"); q.Thinking != llm.ReasoningOff || q.MaxSteps != 12 || q.MaxSteps >= 20 {
		t.Errorf("quick = %+v, want off and 12 steps", q)
	}
	if d := get("deep"); d.Thinking != llm.ReasoningMax || d.MaxSteps != 80 {
		t.Errorf("deep = %+v, want max and 80 steps", d)
	}
	for _, name := range []string{"plan", "review"} {
		v := get(name)
		if v.Thinking != llm.ReasoningHigh || v.Appendix == "" {
			t.Errorf("%s = %+v, want high with an appendix", name, v)
		}
		for _, w := range []string{"write_file", "edit_file", "multi_edit", "bash", "forget", "ask", "current_time", "mcp__srv__x"} {
			if v.Allows(w) {
				t.Errorf("%s offers %s", name, w)
			}
		}
		for _, r := range []string{"read_file", "read_many_files", "grep", "glob", "list_dir", "git_diff", "task", "todo_write", "remember", "recall", "skill"} {
			if !v.Allows(r) {
				t.Errorf("%s withholds %s", name, r)
			}
		}
	}
}

func TestThinkingLevels(t *testing.T) {
	// (Each provider maps the levels to its own values, max to "xhigh"
	// where the model has it: see the providers' tests.)
	for _, level := range []string{"off", "low", "medium", "high", "max"} {
		if got, err := agent.ParseThinking(level); err != nil || string(got) != level {
			t.Errorf("%s: %q %v", level, got, err)
		}
	}
	for _, bad := range []string{"", "none", "xhigh", "MAX", "extreme"} {
		if _, err := agent.ParseThinking(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	_, err := agent.ParseThinking("lots")
	if want := `Unknown thinking level "lots". Available: off, low, medium, high, max`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func TestResolveVariant(t *testing.T) {
	v, err := agent.ResolveVariant("", "")
	if err != nil || v.Name != "default" || v.Thinking != llm.ReasoningMedium {
		t.Fatalf("default: %+v %v", v, err)
	}
	v, err = agent.ResolveVariant("plan", "low")
	if err != nil || v.Name != "plan" || v.Thinking != llm.ReasoningLow {
		t.Fatalf("plan+low: %+v %v", v, err)
	}
	v.Allow[0] = "bash" // the copy is the caller's
	if again, _ := agent.ResolveVariant("plan", ""); again.Thinking != llm.ReasoningHigh || again.Allows("bash") {
		t.Errorf("the preset changed: %+v", again)
	}
	_, err = agent.ResolveVariant("fast", "")
	if want := `Unknown agent "fast". Available: default, quick, deep, plan, review`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	if _, err = agent.ResolveVariant("deep", "huge"); err == nil || err.Error() != `Unknown thinking level "huge". Available: off, low, medium, high, max` {
		t.Errorf("err = %v", err)
	}
}

func TestBellPluginRingsAfterEveryTurn(t *testing.T) {
	var buf strings.Builder
	p := agent.BellPlugin(&buf)
	if p.Name != "bell" || p.AfterTurn == nil {
		t.Fatalf("bell = %+v", p)
	}
	for range 2 {
		if err := p.AfterTurn(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if buf.String() != "\a\a" {
		t.Errorf("wrote %q, want two BEL bytes", buf.String())
	}
	if got, unknown := agent.Builtins([]string{"guard", "bell"}); len(got) != 2 || got[1].Name != "bell" || len(unknown) != 0 {
		t.Errorf("Builtins(guard, bell) = %v, %v", got, unknown)
	}
}
