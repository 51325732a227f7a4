// Package agent is shiro's model loop: it streams a step from the model,
// decides every tool call (guard, --yolo, gated set, session allow-list,
// approver), runs the allowed ones, feeds the results back, and repeats
// until the model answers without calling a tool or the step cap is
// reached. It emits an event stream that the TUI, headless mode and tests
// consume alike. It declares what it needs — Tool, Approver, Plugin — and
// talks to models through agent/llm.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/shiroagent/shiro/agent/llm"
)

// Defaults of a Config.
const (
	DefaultMaxSteps       = 50
	DefaultPruneThreshold = 120_000
)

// Result is a tool's answer to one call.
type Result struct {
	Output  string
	IsError bool
	// Exit says how a command ended, for tools that run one (nil for the
	// others). The model reads Output; Exit is for the user's display.
	Exit *Exit
}

// Exit is how a command ended.
type Exit struct {
	Code int `json:"code"`
	// TimedOut: the command's timeout killed it.
	TimedOut bool `json:"timedOut,omitempty"`
	// Interrupted: the user interrupted it (ctrl-c).
	Interrupted bool `json:"interrupted,omitempty"`
	// Killed: a signal (Signal, when known) ended it otherwise (the memory
	// limit, a kill from elsewhere).
	Killed bool   `json:"killed,omitempty"`
	Signal string `json:"signal,omitempty"`
}

// Checker is a Tool that can tell before the user is asked that a call
// cannot succeed (an edit whose text is not in the file): the call then
// fails with the problem, and no one is asked.
type Checker interface {
	Check(ctx context.Context, input json.RawMessage) (problem string)
}

// Tool is a capability the model can call.
type Tool interface {
	Name() string
	Description() string
	Schema() json.RawMessage
	// Gated tools ask for approval before every call.
	Gated() bool
	// Run executes one call; output receives live output (bash). A Go
	// error means the turn cannot go on; everything the model can act on
	// is a Result.
	Run(ctx context.Context, input json.RawMessage, output func(chunk string)) (Result, error)
}

// Config is what an Agent is made of. Funcs are evaluated on every step, so
// the offered tools and the prompt always reflect live state.
type Config struct {
	Model llm.Model
	// Tools returns the tools offered on this step (already filtered by tool
	// sets and variants). Plugin tools are added by the agent.
	Tools func() []Tool
	// System builds the whole system prompt from the offered tools,
	// plugin appendices included (see Appendices): where they go among the
	// prompt's sections is the caller's choice.
	System func(offered []Tool) string
	// Approver decides gated calls; nil denies them (headless fails closed).
	Approver Approver
	// Yolo allows every call the guard lets through.
	Yolo bool
	// Plugins are consulted in order.
	Plugins []Plugin
	// AutoApprove names tools that never ask (session tools, task).
	AutoApprove []string
	MaxSteps    int
	// PruneThreshold is the estimated token count above which what is sent
	// is pruned (the history itself is never changed).
	PruneThreshold int
	Reasoning      llm.Reasoning
	MaxTokens      int
	// OnChange is called after every change of the history (for saving).
	OnChange func(messages []llm.Message)
	// OnUsage is called with the tokens of every request, whatever became
	// of its turn (the session's ledger), and of those AddUsage counts.
	OnUsage func(llm.Usage)
}

// Agent holds one conversation.
type Agent struct {
	cfg Config

	mu       sync.Mutex
	messages []llm.Message
	size     int                   // JSON length of messages, kept as they are appended
	allowed  map[string]bool       // tools allowed for the rest of the session
	prefixes map[string][][]string // command prefixes allowed for the rest of the session, by tool
	usage    llm.Usage
	running  map[string]context.CancelCauseFunc // tool calls in flight, by call id
	names    map[string]string                  // their tool names
	overhead int                                // estimated tokens of the last request's system prompt and tools
}

// New returns an agent with an empty history.
func New(cfg Config) (*Agent, error) {
	if cfg.Model == nil {
		return nil, errors.New("agent needs a model")
	}
	if cfg.Tools == nil {
		cfg.Tools = func() []Tool { return nil }
	}
	if cfg.System == nil {
		cfg.System = func([]Tool) string { return "" }
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.PruneThreshold <= 0 {
		cfg.PruneThreshold = DefaultPruneThreshold
	}
	a := &Agent{cfg: cfg, allowed: map[string]bool{}, prefixes: map[string][][]string{}, running: map[string]context.CancelCauseFunc{}, names: map[string]string{}}
	for _, n := range cfg.AutoApprove {
		a.allowed[n] = true
	}
	for _, p := range cfg.Plugins {
		for _, n := range p.AutoApprove {
			a.allowed[n] = true
		}
	}
	return a, nil
}

// Messages returns a copy of the history.
func (a *Agent) Messages() []llm.Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]llm.Message(nil), a.messages...)
}

// Replace sets the history (resume, /compact, /clear).
func (a *Agent) Replace(messages []llm.Message) {
	a.mu.Lock()
	a.messages = append([]llm.Message(nil), messages...)
	a.size = jsonLen(a.messages)
	a.mu.Unlock()
}

// AddUsage counts requests made outside the loop (compaction, subagents).
func (a *Agent) AddUsage(u llm.Usage) {
	a.mu.Lock()
	a.usage = a.usage.Add(u)
	onUsage := a.cfg.OnUsage
	a.mu.Unlock()
	if onUsage != nil && u != (llm.Usage{}) {
		onUsage(u)
	}
}

// SetUsage sets the total (a resumed session starts from its record's).
func (a *Agent) SetUsage(u llm.Usage) {
	a.mu.Lock()
	a.usage = u
	a.mu.Unlock()
}

// Usage is the session's token total: every request's, however its turn
// ended.
func (a *Agent) Usage() llm.Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage
}

// SetModel switches the model for the next step.
func (a *Agent) SetModel(m llm.Model) {
	a.mu.Lock()
	a.cfg.Model = m
	a.mu.Unlock()
}

// SetReasoning sets the thinking level of the next step.
func (a *Agent) SetReasoning(r llm.Reasoning) {
	a.mu.Lock()
	a.cfg.Reasoning = r
	a.mu.Unlock()
}

// SetMaxSteps sets the step cap of the next turn (0 or less: the default).
func (a *Agent) SetMaxSteps(n int) {
	if n <= 0 {
		n = DefaultMaxSteps
	}
	a.mu.Lock()
	a.cfg.MaxSteps = n
	a.mu.Unlock()
}

// Model is the current model.
func (a *Agent) Model() llm.Model {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.Model
}

// Allowed reports whether a tool is allowed for the rest of the session.
func (a *Agent) Allowed(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allowed[name]
}

// ErrInterrupted is the cause a tool call's context carries when the user
// interrupted it (ctrl-c): the command dies, the turn goes on.
var ErrInterrupted = errors.New("interrupted by the user")

// InterruptTools cancels the tool calls in flight (their commands' process
// trees are killed) and returns their tool names. The turn continues.
func (a *Agent) InterruptTools() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var names []string
	for id, cancel := range a.running {
		cancel(ErrInterrupted)
		names = append(names, a.names[id])
	}
	return names
}

// EstimatedTokens is the size estimate used for pruning: JSON length / 4.
// It is kept up to date as messages are added, not recomputed.
func (a *Agent) EstimatedTokens() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return (a.size + 2) / 4
}

// ContextTokens estimates what the next request carries: the history plus
// the system prompt and the tool schemas of the last request (or of
// MeasureOverhead before the first).
func (a *Agent) ContextTokens() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return (a.size+2)/4 + a.overhead
}

// MeasureOverhead estimates the system prompt and the tool schemas a
// request would carry now, for ContextTokens before the first step. It
// builds the system prompt, so it may read files: call it off the UI's
// update path.
func (a *Agent) MeasureOverhead() {
	system, specs := a.prompt()
	a.setOverhead(system, specs)
}

func (a *Agent) setOverhead(system string, specs []llm.ToolSpec) {
	b, _ := json.Marshal(specs)
	a.mu.Lock()
	a.overhead = (len(system) + len(b) + 3) / 4
	a.mu.Unlock()
}

// prompt builds this step's system prompt and tool specs.
func (a *Agent) prompt() (string, []llm.ToolSpec) {
	offered := a.offered()
	specs := make([]llm.ToolSpec, len(offered))
	for i, t := range offered {
		specs[i] = llm.ToolSpec{Name: t.Name(), Description: t.Description(), Schema: t.Schema()}
	}
	return a.cfg.System(offered), specs
}

// Unsend removes the last message when it is the user's text with nothing
// after it: a turn that failed before the model answered. Sending the text
// again then does not repeat it. It reports whether it removed one.
func (a *Agent) Unsend(text string) bool {
	a.mu.Lock()
	n := len(a.messages)
	if n == 0 {
		a.mu.Unlock()
		return false
	}
	last := a.messages[n-1]
	if last.Role != llm.RoleUser || len(last.Parts) != 1 || last.Parts[0].Type != llm.PartText || last.Parts[0].Text != text {
		a.mu.Unlock()
		return false
	}
	a.messages = a.messages[:n-1]
	a.size = jsonLen(a.messages)
	msgs := append([]llm.Message(nil), a.messages...)
	onChange := a.cfg.OnChange
	a.mu.Unlock()
	if onChange != nil {
		onChange(msgs)
	}
	return true
}

// The marks of a prompt the user interrupted before the model answered
// it: a note added to the prompt, and an assistant message in place of
// the answer, so that the next prompt is a message of its own (the
// Anthropic API merges consecutive user messages) and is answered alone.
const (
	InterruptedPrompt = "[The user interrupted this request before it was answered.]"
	InterruptedReply  = "[No answer: the user interrupted the request.]"
)

// markInterrupted marks the last message when it is the user's prompt
// with no answer after it (the turn was aborted before the model
// answered): see InterruptedPrompt.
func (a *Agent) markInterrupted() {
	a.mu.Lock()
	n := len(a.messages)
	if n == 0 || a.messages[n-1].Role != llm.RoleUser {
		a.mu.Unlock()
		return
	}
	last := a.messages[n-1]
	for _, p := range last.Parts {
		if p.Type != llm.PartText {
			a.mu.Unlock()
			return
		}
	}
	marked := llm.Message{Role: llm.RoleUser, Parts: append(slices.Clip(last.Parts), llm.Part{Type: llm.PartText, Text: InterruptedPrompt})}
	a.messages = append(a.messages[:n-1], marked)
	a.size = jsonLen(a.messages)
	a.mu.Unlock()
	a.append(llm.Text(llm.RoleAssistant, InterruptedReply))
}

// EstimateTokens estimates the tokens of messages (JSON length / 4).
func EstimateTokens(messages []llm.Message) int {
	return (jsonLen(messages) + 2) / 4
}

// jsonLen is the length of messages as a JSON array.
func jsonLen(messages []llm.Message) int {
	n := 2 // []
	for i, m := range messages {
		if i > 0 {
			n++ // ,
		}
		n += messageLen(m)
	}
	return n
}

func messageLen(m llm.Message) int {
	b, _ := json.Marshal(m)
	return len(b)
}

func (a *Agent) append(m llm.Message) {
	size := messageLen(m)
	a.mu.Lock()
	if len(a.messages) > 0 {
		a.size++
	} else {
		a.size = 2
	}
	a.size += size
	a.messages = append(a.messages, m)
	msgs := append([]llm.Message(nil), a.messages...)
	onChange := a.cfg.OnChange
	a.mu.Unlock()
	if onChange != nil {
		onChange(msgs)
	}
}

// offered returns this step's tools: the configured ones plus plugin tools,
// first name wins.
func (a *Agent) offered() []Tool {
	tools := a.cfg.Tools()
	seen := map[string]bool{}
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		if !seen[t.Name()] {
			seen[t.Name()] = true
			out = append(out, t)
		}
	}
	for _, p := range a.cfg.Plugins {
		for _, t := range p.Tools {
			if !seen[t.Name()] {
				seen[t.Name()] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// Send runs one turn: the user's text, then model steps and tool calls
// until the model answers. Every event goes to emit, in order; calls never
// overlap (live tool output comes from the tool's goroutine). Cancelling ctx aborts the turn (esc): the turn ends
// with a done event and no error. The returned error is non-nil only when
// an error event was emitted.
func (a *Agent) Send(ctx context.Context, text string, emit func(Event)) error {
	var emitMu sync.Mutex // tool output arrives from the tool's goroutine
	emit = func(inner func(Event)) func(Event) {
		return func(e Event) {
			emitMu.Lock()
			defer emitMu.Unlock()
			inner(e)
		}
	}(emit)
	a.append(llm.Text(llm.RoleUser, text))
	defer a.afterTurn(ctx, emit)
	var turnUsage llm.Usage
	a.mu.Lock()
	maxSteps := a.cfg.MaxSteps
	a.mu.Unlock()
	for step := 0; ; step++ {
		if step >= maxSteps {
			emit(Event{Type: EventNotice, Text: fmt.Sprintf("stopped after %d steps (the step limit)", maxSteps)})
			emit(Event{Type: EventDone, InputTokens: turnUsage.InputTokens, OutputTokens: turnUsage.OutputTokens})
			return nil
		}
		msg, usage, err := a.step(ctx, emit)
		turnUsage = turnUsage.Add(usage)
		a.AddUsage(usage) // every billed request counts, however the turn ends
		if err != nil {
			if ctx.Err() != nil { // aborted: what was delivered stays delivered
				a.markInterrupted()
				emit(Event{Type: EventDone, InputTokens: turnUsage.InputTokens, OutputTokens: turnUsage.OutputTokens})
				return nil
			}
			emit(Event{Type: EventError, Error: err.Error()})
			return err
		}
		a.append(msg)
		calls := toolCalls(msg)
		if len(calls) == 0 {
			emit(Event{Type: EventDone, InputTokens: turnUsage.InputTokens, OutputTokens: turnUsage.OutputTokens})
			return nil
		}
		results, fatal := a.runCalls(ctx, calls, emit)
		a.append(llm.Message{Role: llm.RoleTool, Parts: results})
		if fatal != nil && ctx.Err() == nil { // the sandbox cannot open: the run fails
			emit(Event{Type: EventError, Error: fatal.Error()})
			return fatal
		}
		if ctx.Err() != nil {
			emit(Event{Type: EventDone, InputTokens: turnUsage.InputTokens, OutputTokens: turnUsage.OutputTokens})
			return nil
		}
	}
}

// step streams one model call and returns the assistant message.
func (a *Agent) step(ctx context.Context, emit func(Event)) (llm.Message, llm.Usage, error) {
	system, specs := a.prompt()
	a.setOverhead(system, specs)
	history := a.Messages()
	wire := history
	if a.EstimatedTokens() > a.cfg.PruneThreshold {
		wire = Prune(history, a.cfg.PruneThreshold)
		emit(Event{Type: EventCompacted, Before: len(history), After: len(wire)})
	}
	a.mu.Lock()
	reasoning := a.cfg.Reasoning
	a.mu.Unlock()
	req := llm.Request{System: system, Messages: wire, Tools: specs, MaxTokens: a.cfg.MaxTokens, Reasoning: reasoning}
	var (
		final    llm.Message
		usage    llm.Usage // what the provider reported so far
		received int       // characters streamed back
		started  bool      // the provider answered (an event came)
		finished bool
	)
	ctx = llm.WithRetryReport(ctx, func(r llm.Retry) {
		emit(Event{Type: EventRetry, Text: r.Reason, Attempt: r.Attempt, Attempts: r.Attempts, DelayMs: r.Delay.Milliseconds()})
	})
	for ev, err := range a.Model().Stream(ctx, req) {
		if err != nil {
			return llm.Message{}, cutUsage(usage, req, received, started || ctx.Err() != nil), err
		}
		started = true
		switch ev.Type {
		case llm.EventText:
			received += len(ev.Text)
			emit(Event{Type: EventText, Text: ev.Text})
		case llm.EventReasoning:
			received += len(ev.Text)
			emit(Event{Type: EventReasoning, Text: ev.Text})
		case llm.EventToolStart:
			received += len(ev.Call.Name)
			emit(Event{Type: EventToolStart, ID: ev.Call.CallID, Name: ev.Call.Name})
		case llm.EventToolCall:
			received += len(ev.Call.Input)
		case llm.EventUsage:
			usage = ev.Usage
		case llm.EventFinish:
			final, usage, finished = ev.Message, ev.Usage, true
		}
	}
	if !finished {
		usage = cutUsage(usage, req, received, true)
		if ctx.Err() != nil {
			return llm.Message{}, usage, ctx.Err()
		}
		return llm.Message{}, usage, llm.ErrNoFinish
	}
	final.Role = llm.RoleAssistant
	sanitizeCalls(&final)
	return final, usage, nil
}

// cutUsage is the usage of a request whose stream ended before the
// provider's final count (an abort, a cut): what the provider reported,
// and where it reported nothing (or less than was streamed back) an
// estimate at four characters a token, marked Estimated. The provider
// bills a request it started answering (billed), or one the user aborted
// while it waited, so it is never counted as 0; a request the provider
// refused (an error status before any event) costs nothing.
func cutUsage(reported llm.Usage, req llm.Request, received int, billed bool) llm.Usage {
	u := reported
	if !billed {
		return u
	}
	if u.InputTokens == 0 {
		b, _ := json.Marshal(req.Tools)
		u.InputTokens = (len(req.System) + len(b) + jsonLen(req.Messages) + 3) / 4
		u.Estimated = true
	}
	if out := (received + 3) / 4; out > u.OutputTokens {
		u.OutputTokens = out
		u.Estimated = true
	}
	return u
}

// sanitizeCalls keeps the history serialisable: a tool call whose arguments
// are not valid JSON keeps its raw text for the error the model gets, and
// goes into the history with empty arguments.
func sanitizeCalls(m *llm.Message) {
	for i, p := range m.Parts {
		if p.Type == llm.PartToolCall && len(p.Input) > 0 && !json.Valid(p.Input) {
			m.Parts[i].Input = json.RawMessage("{}")
			m.Parts[i].Text = string(p.Input) // runCall reports it
		}
	}
}

func toolCalls(m llm.Message) []llm.Part {
	var calls []llm.Part
	for _, p := range m.Parts {
		if p.Type == llm.PartToolCall {
			calls = append(calls, p)
		}
	}
	return calls
}

func (a *Agent) afterTurn(ctx context.Context, emit func(Event)) {
	ctx = context.WithoutCancel(ctx)
	for _, p := range a.cfg.Plugins {
		if p.AfterTurn != nil {
			_ = p.AfterTurn(ctx) // a failing hook is ignored and does not stop the rest
		}
	}
}
