package orchestrator

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/tools"
)

func TestSystemPromptSectionsInOrderTaskListLast(t *testing.T) {
	t.Parallel()
	in := PromptInput{
		Workspace:    "/home/dev/p",
		Offered:      []string{"read_file", "bash", "ask", "todo_write", "mcp__docs__search"},
		Gated:        []string{"bash", "mcp__docs__search"},
		Guidance:     map[string]string{"ask": "put a question to the user."},
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
	in := PromptInput{Workspace: "/home/dev/p", Gated: []string{"bash"}, Interactive: true, Sandboxed: true, Guidance: map[string]string{}}
	for _, tool := range everyTool(t) {
		in.Offered = append(in.Offered, tool.Name())
		in.Guidance[tool.Name()] = guidanceOf(tool)
	}
	got := SystemPrompt(in)
	if len(got) > 4000 {
		t.Errorf("the prompt with every tool is %d characters, want at most 4,000:\n%s", len(got), got)
	}
	for _, n := range in.Offered {
		if !strings.Contains(got, n) {
			t.Errorf("the prompt does not list %s:\n%s", n, got)
		}
	}
	if strings.Contains(got, "see its description") {
		t.Errorf("a built-in or session tool has no guidance:\n%s", got)
	}
	if !strings.Contains(got, "- git_status, git_diff, git_log, git_show, git_blame: read-only git") {
		t.Errorf("the git tools do not share their line:\n%s", got)
	}
}

// everyTool is every built-in and session tool, and the time plugin's.
func everyTool(t *testing.T) []interface {
	Name() string
	Description() string
} {
	var out []interface {
		Name() string
		Description() string
	}
	for _, b := range tools.Builtins() {
		out = append(out, b)
	}
	mem := sessiontools.NewMemory(t.TempDir(), "p")
	for _, m := range sessiontools.MemoryTools(mem) {
		out = append(out, m)
	}
	out = append(out, sessiontools.TodoWrite{}, sessiontools.SkillTool{}, sessiontools.Ask{}, &sessiontools.Task{})
	plugins, _ := agent.BuiltinsIn(t.TempDir(), []string{"time"})
	for _, p := range plugins {
		for _, tool := range p.Tools {
			out = append(out, tool)
		}
	}
	return out
}

// englishNames are tool names that are also words ("ask what to do"): for
// them only a mention as a tool counts.
var englishNames = map[string]bool{"ask": true, "task": true, "skill": true, "remember": true, "recall": true, "forget": true}

// mentions reports whether text names the tool called name.
func mentions(text, name string) bool {
	if !englishNames[name] {
		return regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(text)
	}
	q := regexp.QuoteMeta(name)
	return regexp.MustCompile("(?m)(^- ([a-z_]+, )*" + q + "\\b|`" + q + "`|\\b(the|with) " + q + "\\b( tool)?)").MatchString(text)
}

// TestWithheldToolsAreNeverMentioned: whatever withholds a tool (a
// variant, the tool sets, a switch), neither the system prompt nor the
// spec of an offered tool names it.
func TestWithheldToolsAreNeverMentioned(t *testing.T) {
	t.Parallel()
	var all []string
	for _, tool := range everyTool(t) {
		all = append(all, tool.Name())
	}
	cases := []struct {
		name string
		opts SessionOptions
	}{
		{"plan variant", SessionOptions{Variant: "plan"}},
		{"review variant", SessionOptions{Variant: "review"}},
		{"core tools only", SessionOptions{ToolSets: tools.EnabledSets{tools.SetCore: true}}},
		{"no memory, no subagent, no skills", SessionOptions{NoMemory: true, NoSubagent: true, NoSkills: true}},
		{"quick variant without plugins", SessionOptions{Variant: "quick", Plugins: []string{}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := &mcpModel{}
			c.opts.MCPServers = map[string]json.RawMessage{}
			if c.opts.Plugins == nil {
				c.opts.Plugins = []string{"guard", "time"}
			}
			s := mcpSession(t, m, c.opts)
			send(t, s, "hi")
			req := m.requests()[0]
			offered := specNames(req)
			texts := map[string]string{"the system prompt": req.System}
			for _, spec := range req.Tools {
				texts["the spec of "+spec.Name] = spec.Description + string(spec.Schema)
			}
			withheld := 0
			for _, n := range all {
				if slices.Contains(offered, n) {
					continue
				}
				withheld++
				for where, text := range texts {
					if mentions(text, n) {
						t.Errorf("%s names the withheld %s:\n%s", where, n, text)
					}
				}
			}
			if withheld == 0 {
				t.Fatalf("nothing was withheld: %v", offered)
			}
			for _, n := range offered {
				if !mentions(req.System, n) {
					t.Errorf("the system prompt does not list the offered %s:\n%s", n, req.System)
				}
			}
		})
	}
}
