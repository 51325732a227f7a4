package tui

import (
	"context"
	"fmt"
	"io"
	"iter"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/muesli/termenv"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/mcp"
)

// Bench drives the root model the way Bubble Tea does (Update, then View)
// without a terminal, for `make bench`. It measures the real model: the
// same Update and View, a real agent (with a model that is never called)
// and a transcript of the requested size.
type Bench struct {
	app *App
	m   *Model
}

// NewBench builds a model at the given size for workspace dir whose
// transcript already holds lines lines (printed as a session would print
// them: user prompts, markdown replies, tool lines).
func NewBench(dir string, lines, width, height int) (*Bench, error) {
	app, err := New(Options{
		Version: "bench", Workspace: dir, Paths: config.Paths{ConfigDir: dir, DataDir: dir},
		Config: config.Config{Provider: config.ProviderAnthropic, Model: "claude-sonnet-4-5"}, Configured: true,
		Record: store.Record{ID: "bench"}, SandboxImage: "bench", Output: io.Discard,
	})
	if err != nil {
		return nil, err
	}
	sess := benchSession{todos: &sessiontools.TodoList{}}
	rt := &runtime{app: app, sess: sess, ctx: context.Background()}
	m := newModel(rt, app.opts, newStyles(io.Discard, termenv.ANSI256, false))
	m.Update(tea.WindowSizeMsg{Width: width, Height: height})
	m.box.phase = "ready"
	for i := 0; m.lines() < lines; i++ {
		m.printLine(m.st.user.Render(fmt.Sprintf("> question %d about the code", i)))
		m.printLine(m.md.render(fmt.Sprintf("Answer %d: the function `f%d` reads **the file** and\nreturns its lines.\n\n- first point\n- second point\n\n```go\nfunc f%d() {}\n```", i, i, i), width))
		m.printLine(m.st.tool.Render(fmt.Sprintf("* read_file(src/file%d.go)", i)))
		m.out.take() // printed: the terminal's scrollback holds it now
	}
	return &Bench{app: app, m: m}, nil
}

// lines counts the transcript lines printed so far (bench only).
func (m *Model) lines() int { return m.printedLines }

// Type feeds one typed character and renders a frame; it returns the
// frame's size so the work cannot be optimised away.
func (b *Bench) Type(r rune) int {
	b.m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	return len(b.m.View())
}

// StartStreaming puts the model in a turn with a live reply of n lines.
func (b *Bench) StartStreaming(n int) {
	b.m.beginBusy()
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "Line %d of a long answer with `code` and **bold** words.\n", i)
	}
	b.m.Update(eventMsg{turn: b.m.turnID, ev: agent.Event{Type: agent.EventText, Text: sb.String()}})
	b.m.Update(flushMsg{turn: b.m.turnID})
	b.m.out.take()
}

// Stream feeds a text delta, the 60 ms flush that re-renders the live
// reply, and renders a frame.
func (b *Bench) Stream(text string) int {
	b.m.Update(eventMsg{turn: b.m.turnID, ev: agent.Event{Type: agent.EventText, Text: text}})
	b.m.Update(flushMsg{turn: b.m.turnID})
	b.m.out.take()
	return len(b.m.View())
}

// Close releases the bench's UI.
func (b *Bench) Close() { b.app.Close() }

// benchSession is a session that never runs anything.
type benchSession struct {
	plainSession
	todos *sessiontools.TodoList
}

func (s benchSession) Send(context.Context, string) error  { return nil }
func (s benchSession) Messages() []llm.Message             { return nil }
func (s benchSession) Model() llm.Model                    { return idleModel{} }
func (s benchSession) SetModel(llm.Model)                  {}
func (s benchSession) ContextTokens() int                  { return 0 }
func (s benchSession) MeasureOverhead()                    {}
func (s benchSession) InterruptTools() []string            { return nil }
func (s benchSession) Allowed(string) bool                 { return false }
func (s benchSession) AllowedPrefixes(string) [][]string   { return nil }
func (s benchSession) Unsend(string) bool                  { return false }
func (s benchSession) Usage() orchestrator.Usage           { return orchestrator.Usage{} }
func (s benchSession) Saved() orchestrator.Saved           { return orchestrator.Saved{ID: "bench"} }
func (s benchSession) Save() (string, error)               { return "", nil }
func (s benchSession) Resume(string) (store.Record, error) { return store.Record{}, nil }
func (s benchSession) Clear() (string, error)              { return "bench", nil }
func (s benchSession) Variant() agent.Variant {
	v, _ := agent.ResolveVariant("", "")
	return v
}
func (s benchSession) SetVariant(string) error  { return nil }
func (s benchSession) SetThinking(string) error { return nil }
func (s benchSession) Offered() []orchestrator.OfferedTool {
	return []orchestrator.OfferedTool{{Name: "read_file", Kind: "core"}, {Name: "bash", Kind: "core", Gated: true}}
}
func (s benchSession) StartSandbox(context.Context) (sandbox.Info, error) {
	return sandbox.Info{}, nil
}
func (s benchSession) Compact(context.Context) (int, int, error) { return 0, 0, nil }
func (s benchSession) Todos() *sessiontools.TodoList             { return s.todos }
func (s benchSession) Memory() *sessiontools.Memory              { return nil }
func (s benchSession) Skills() []sessiontools.Skill              { return nil }
func (s benchSession) Plugins() []agent.Plugin                   { return nil }
func (s benchSession) PluginErrors() []string                    { return nil }
func (s benchSession) MCPStatus() []mcp.ServerStatus             { return nil }
func (s benchSession) WaitMCP(context.Context) error             { return nil }
func (s benchSession) CompactMemory(context.Context) (sessiontools.MemoryCompaction, error) {
	return sessiontools.MemoryCompaction{}, nil
}

// idleModel is a model the bench never calls.
type idleModel struct{}

func (idleModel) Info() llm.ModelInfo {
	return llm.ModelInfo{Provider: "anthropic", Model: "claude-sonnet-4-5"}
}

func (idleModel) Stream(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
	return func(func(llm.Event, error) bool) {}
}
