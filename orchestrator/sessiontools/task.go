package sessiontools

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/tools"
)

// SubagentMaxSteps is the step cap of a task subagent.
const SubagentMaxSteps = 20

// SubagentTools names the only tools a subagent may be offered, when the
// session offers them: all of them read (job_output reads the session's
// background jobs; a subagent starts, kills and feeds none).
var SubagentTools = []string{"read_file", "glob", "grep", "list_dir", "read_many_files", "job_output"}

// NoFindings is the report of a subagent that said nothing.
const NoFindings = "Subagent returned no findings."

// Subagent kinds.
const (
	KindExplore = "explore"
	KindReview  = "review"
)

var kindPrompts = map[string]string{
	KindExplore: "You are an exploration subagent of shiro, a coding agent. You have a fresh context and read-only tools. " +
		"Do the search the prompt asks for, then report: paths with line numbers, only what you actually read (never guess), " +
		"no preamble, aim for fewer than 30 lines.",
	KindReview: "You are a review subagent of shiro, a coding agent. You have a fresh context and read-only tools. " +
		"Review what the prompt names and report findings in order of severity: file and line, what breaks and when, and the fix. " +
		"If the code is correct, say so. No preamble.",
}

//go:embed task.md
var taskDoc string

var taskGuidance, taskDescription = tools.SplitDoc(taskDoc)

// Task is the task tool: it runs a subagent on the session's model with
// only the read tools, no approver (nothing it holds is gated) and no
// plugins, and returns the subagent's text as the report.
type Task struct {
	// Model is the model of the next step (the session's current one).
	Model func() llm.Model
	// Tools returns the tools the session offers now; the subagent gets
	// those named in SubagentTools.
	Tools func() []agent.Tool
	// Reasoning is passed to the subagent's model; Level, when set, is
	// asked instead on every call (the session's current level).
	Reasoning llm.Reasoning
	Level     func() llm.Reasoning
	// Usage, when set, receives the tokens of every subagent run, however
	// it ended (the session's ledger).
	Usage func(llm.Usage)
	// Progress, when set, receives each subagent's start, steps and end
	// (the TUI's subagent panel). It must not block.
	Progress func(SubagentEvent)

	seq atomic.Int64 // numbers the subagents: sub1, sub2, ...
}

// Subagent progress kinds.
const (
	SubagentStart = "start"
	SubagentStep  = "step"
	SubagentEnd   = "end"
	SubagentError = "error"
)

// SubagentEvent is one piece of a subagent's progress. Fields apply by
// Type: Kind and Description on start; Tool and Summary on step; OK (the
// report is not empty) and Steps on end; Error on error.
type SubagentEvent struct {
	Type        string
	ID          string
	Kind        string
	Description string
	Tool        string
	Summary     string
	OK          bool
	Steps       int
	Error       string
}

var taskSchema = objectSchema([]string{"description", "prompt"},
	prop{name: "description", typ: "string", desc: "A label, 3 to 6 words."},
	prop{name: "prompt", typ: "string", desc: "What to find or check, where, what to report."},
	prop{name: "kind", typ: "string", desc: "explore (default): findings with paths and lines; review: problems by severity.", enum: []string{KindExplore, KindReview}},
)

func (*Task) Name() string            { return "task" }
func (*Task) Description() string     { return taskDescription }
func (*Task) Guidance() string        { return taskGuidance }
func (*Task) Schema() json.RawMessage { return taskSchema }
func (*Task) Gated() bool             { return false }

// readTools filters the session's tools down to the subagent's.
func (t *Task) readTools() []agent.Tool {
	var out []agent.Tool
	for _, tool := range t.Tools() {
		if slices.Contains(SubagentTools, tool.Name()) {
			out = append(out, tool)
		}
	}
	return out
}

// Run runs the subagent to its end and returns its report.
func (t *Task) Run(ctx context.Context, input json.RawMessage, output func(string)) (agent.Result, error) {
	var p struct {
		Description string `json:"description"`
		Prompt      string `json:"prompt"`
		Kind        string `json:"kind"`
	}
	if err := decode(input, &p); err != nil {
		return agent.Result{Output: err.Error(), IsError: true}, nil
	}
	if p.Kind == "" {
		p.Kind = KindExplore
	}
	system, ok := kindPrompts[p.Kind]
	if !ok {
		return agent.Result{Output: fmt.Sprintf("kind %q is not explore or review", p.Kind), IsError: true}, nil
	}
	if strings.TrimSpace(p.Prompt) == "" {
		return agent.Result{Output: "prompt is empty", IsError: true}, nil
	}
	tools := t.readTools()
	reasoning := t.Reasoning
	if t.Level != nil {
		reasoning = t.Level()
	}
	sub, err := agent.New(agent.Config{
		Model:     t.Model(),
		Tools:     func() []agent.Tool { return tools },
		System:    func([]agent.Tool) string { return system },
		MaxSteps:  SubagentMaxSteps,
		Reasoning: reasoning,
	})
	if err != nil {
		return agent.Result{}, fmt.Errorf("start the subagent: %w", err)
	}
	if t.Usage != nil {
		defer func() { t.Usage(sub.Usage()) }()
	}
	id := fmt.Sprintf("sub%d", t.seq.Add(1))
	t.report(SubagentEvent{Type: SubagentStart, ID: id, Kind: p.Kind, Description: strings.TrimSpace(p.Description)})
	var (
		report  strings.Builder
		failure string
		capped  bool
		steps   int
	)
	err = sub.Send(ctx, p.Prompt, func(ev agent.Event) {
		switch ev.Type {
		case agent.EventText:
			report.WriteString(ev.Text)
		case agent.EventToolCall:
			steps++
			summary := summarize(ev.Input)
			t.report(SubagentEvent{Type: SubagentStep, ID: id, Tool: ev.Name, Summary: summary})
			if output != nil {
				output(fmt.Sprintf("[%s] %s %s\n", p.Kind, ev.Name, summary))
			}
		case agent.EventNotice:
			capped = strings.Contains(ev.Text, "step limit")
		case agent.EventError:
			failure = ev.Error
		}
	})
	if failure != "" || err != nil {
		msg := cmp.Or(failure, fmt.Sprint(err))
		t.report(SubagentEvent{Type: SubagentError, ID: id, Error: msg})
		return agent.Result{Output: "The subagent failed: " + msg, IsError: true}, nil
	}
	if ctx.Err() != nil {
		t.report(SubagentEvent{Type: SubagentError, ID: id, Error: "interrupted"})
		return agent.Result{}, context.Cause(ctx)
	}
	out := strings.TrimSpace(report.String())
	t.report(SubagentEvent{Type: SubagentEnd, ID: id, OK: out != "", Steps: steps})
	if out == "" {
		out = NoFindings
	}
	if capped {
		out += fmt.Sprintf("\n\n(The subagent stopped at its limit of %d steps.)", SubagentMaxSteps)
	}
	return agent.Result{Output: out}, nil
}

func (t *Task) report(ev SubagentEvent) {
	if t.Progress != nil {
		t.Progress(ev)
	}
}

// summarize names a subagent step by its input's pattern, path or include,
// else the first 80 characters of its JSON.
func summarize(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) == nil {
		for _, k := range []string{"pattern", "path", "include"} {
			if s, ok := m[k].(string); ok && s != "" {
				return s
			}
		}
	}
	s := string(input)
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
