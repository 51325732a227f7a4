package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shiroagent/shiro/agent/llm"
)

// Decision is the user's answer to an approval request.
type Decision int

// The answers.
const (
	Deny   Decision = iota // the model is told and the turn goes on
	Once                   // run this call
	Always                 // run this call and every later call of this tool
	// AlwaysPrefix runs this call and every later one whose commands all
	// start with one of the request's Prefixes.
	AlwaysPrefix
)

// ApprovalRequest is a gated call waiting for the user.
type ApprovalRequest struct {
	ID    string
	Tool  string
	Input json.RawMessage
	// Prefixes, for a bash call, are the command prefixes that AlwaysPrefix
	// would allow from now on ("go test"), one per command in the line;
	// none when a command cannot be named before it runs.
	Prefixes [][]string
}

// Approver asks the user about gated calls.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Decision, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (Decision, error)

// Approve implements Approver.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	return f(ctx, req)
}

// Texts the model receives.
const (
	DeniedByUser = "User denied this tool call."
	NoApprover   = "User denied this tool call. (No one can approve tool calls in this run; run with --yolo to allow them.)"
)

// IsGated reports the tools that ask before every call: the built-in write
// tools and bash (through Tool.Gated) and every MCP tool.
func IsGated(t Tool) bool { return t.Gated() || strings.HasPrefix(t.Name(), "mcp__") }

// decide applies the order of checks: guard, --yolo, not gated, allowed for
// the session, ask. It returns whether to run the call and, if not, why.
func (a *Agent) decide(ctx context.Context, t Tool, call llm.Part, emit func(Event)) (bool, string) {
	tc := ToolCall{Name: call.Name, Input: call.Input}
	unattended := a.cfg.Yolo || !IsGated(t) || a.Allowed(call.Name) || a.prefixAllowed(tc)
	if reason := a.guard(ctx, call, unattended); reason != "" {
		emit(Event{Type: EventNotice, Text: reason})
		emit(Event{Type: EventToolDenied, ID: call.CallID, Name: call.Name, Input: call.Input, Reason: reason})
		return false, reason
	}
	if unattended {
		return true, ""
	}
	if a.cfg.Approver == nil {
		emit(Event{Type: EventToolDenied, ID: call.CallID, Name: call.Name, Input: call.Input, Reason: NoApprover})
		return false, NoApprover
	}
	if c, ok := t.(Checker); ok {
		if problem := c.Check(ctx, call.Input); problem != "" {
			emit(Event{Type: EventToolError, ID: call.CallID, Name: call.Name, Input: call.Input, Error: problem})
			return false, problem
		}
	}
	req := ApprovalRequest{ID: call.CallID, Tool: call.Name, Input: call.Input}
	if cmd := commandOf(tc); cmd != "" {
		req.Prefixes = Prefixes(cmd)
	}
	d, err := a.cfg.Approver.Approve(ctx, req)
	if err != nil {
		reason := DeniedByUser
		if !errors.Is(err, context.Canceled) {
			reason = fmt.Sprintf("%s (the approval failed: %v)", DeniedByUser, err)
		}
		emit(Event{Type: EventToolDenied, ID: call.CallID, Name: call.Name, Input: call.Input, Reason: reason})
		return false, reason
	}
	switch d {
	case Always:
		a.mu.Lock()
		a.allowed[call.Name] = true
		a.mu.Unlock()
		return true, ""
	case AlwaysPrefix:
		a.mu.Lock()
		for _, p := range req.Prefixes {
			if !slices.ContainsFunc(a.prefixes[call.Name], func(q []string) bool { return slices.Equal(p, q) }) {
				a.prefixes[call.Name] = append(a.prefixes[call.Name], p)
			}
		}
		a.mu.Unlock()
		return true, ""
	case Once:
		return true, ""
	}
	emit(Event{Type: EventToolDenied, ID: call.CallID, Name: call.Name, Input: call.Input, Reason: DeniedByUser})
	return false, DeniedByUser
}

// guard runs the plugins' guards in order; the first block wins and a
// failing guard blocks (fail closed). unattended tells them no one will
// approve the call.
func (a *Agent) guard(ctx context.Context, call llm.Part, unattended bool) string {
	for _, p := range a.cfg.Plugins {
		if p.BeforeToolCall == nil {
			continue
		}
		reason, err := p.BeforeToolCall(ctx, ToolCall{Name: call.Name, Input: call.Input, Unattended: unattended})
		if err != nil {
			return fmt.Sprintf("The %s plugin failed while checking this call: %v", p.Name, err)
		}
		if reason != "" {
			return fmt.Sprintf("Blocked by the %s plugin: %s", p.Name, reason)
		}
	}
	return ""
}

// TurnEnder is a tool's Go error after which the turn cannot go on (the
// sandbox could not be opened: every later command would fail the same
// way). The turn ends with an error event naming it, rather than a tool
// error the model is asked to work around.
type TurnEnder interface {
	error
	EndsTurn() bool
}

// endsTurn returns the TurnEnder in err's chain, if any.
func endsTurn(err error) error {
	var te TurnEnder
	if errors.As(err, &te) && te.EndsTurn() {
		return err
	}
	return nil
}

// runCalls decides and runs the step's tool calls in order and returns
// their result parts; fatal is the error of a call that ends the turn
// (see TurnEnder), after which the step's other calls do not run.
func (a *Agent) runCalls(ctx context.Context, calls []llm.Part, emit func(Event)) (results []llm.Part, fatal error) {
	tools := map[string]Tool{}
	for _, t := range a.offered() {
		tools[t.Name()] = t
	}
	results = make([]llm.Part, 0, len(calls))
	for _, call := range calls {
		var res Result
		if fatal != nil {
			res = Result{Output: "The turn ended before this call ran.", IsError: true}
		} else {
			res, fatal = a.runCall(ctx, tools, call, emit)
		}
		results = append(results, llm.Part{Type: llm.PartToolResult, CallID: call.CallID, Name: call.Name, Output: res.Output, IsError: res.IsError})
	}
	return results, fatal
}

func (a *Agent) runCall(ctx context.Context, tools map[string]Tool, call llm.Part, emit func(Event)) (Result, error) {
	res, err := a.runOne(ctx, tools, call, emit)
	return res, endsTurn(err)
}

func (a *Agent) runOne(ctx context.Context, tools map[string]Tool, call llm.Part, emit func(Event)) (Result, error) {
	fail := func(msg string) (Result, error) {
		emit(Event{Type: EventToolError, ID: call.CallID, Name: call.Name, Error: msg})
		return Result{Output: msg, IsError: true}, nil
	}
	if ctx.Err() != nil {
		return fail("The turn was aborted before this call ran.")
	}
	t, ok := tools[call.Name]
	if !ok {
		names := make([]string, 0, len(tools))
		for n := range tools {
			names = append(names, n)
		}
		return fail(fmt.Sprintf("Unknown tool %q. Available tools: %s.", call.Name, strings.Join(sortedCopy(names), ", ")))
	}
	input := call.Input
	if call.Text != "" { // set by sanitizeCalls: the arguments were not JSON
		return fail(fmt.Sprintf("Invalid JSON arguments for %s: %s", call.Name, truncateForError(call.Text)))
	}
	if len(strings.TrimSpace(string(input))) == 0 {
		input = json.RawMessage("{}")
	}
	if run, reason := a.decide(ctx, t, call, emit); !run {
		return Result{Output: reason, IsError: true}, nil
	}
	emit(Event{Type: EventToolCall, ID: call.CallID, Name: call.Name, Input: input})

	callCtx, cancel := context.WithCancelCause(context.WithValue(ctx, callKey{}, CallInfo{ID: call.CallID, Name: call.Name}))
	a.mu.Lock()
	a.running[call.CallID], a.names[call.CallID] = cancel, call.Name
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.running, call.CallID)
		delete(a.names, call.CallID)
		a.mu.Unlock()
		cancel(nil)
	}()
	res, err := t.Run(callCtx, input, func(chunk string) {
		emit(Event{Type: EventToolOutput, ID: call.CallID, Name: call.Name, Chunk: chunk})
	})
	if err != nil {
		r, _ := fail(fmt.Sprintf("%s failed: %v", call.Name, err))
		return r, err
	}
	if res.IsError {
		emit(Event{Type: EventToolError, ID: call.CallID, Name: call.Name, Error: res.Output, Exit: res.Exit})
		return res, nil
	}
	emit(Event{Type: EventToolResult, ID: call.CallID, Name: call.Name, Output: res.Output, Exit: res.Exit})
	return res, nil
}

func truncateForError(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
