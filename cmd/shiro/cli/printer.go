package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/orchestrator/workcopy"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
	"github.com/shiroagent/shiro/tools/jobs"
)

// headlessPrinter renders agent events for `shiro -p`: the assistant's text
// on stdout and one bracketed line per tool event on stderr, or (asJSON)
// every event as one JSON line on stdout. It reports whether an error event
// was seen through sawError.
type headlessPrinter struct {
	// mu orders the agent's events and the proxy's network records, which
	// arrive from other goroutines.
	mu          sync.Mutex
	out, errOut io.Writer
	asJSON      bool
	enc         *json.Encoder
	inputs      map[string]json.RawMessage
	shown       map[string]bool // calls whose [tool] line is printed
	sawError    bool
	midLine     bool
	// held are the notices that came before the turn's first event;
	// turning is set once it came.
	held    []string
	turning bool
	// version is shiro's, for the session line.
	version string
	// holdText keeps the assistant's text off stdout (--output-schema:
	// stdout gets the checked answer alone, see answer); output is that
	// answer, for the result line.
	holdText bool
	output   json.RawMessage
}

// answer prints the final answer --output-schema checked: on stdout in
// text, in the result line in JSON.
func (p *headlessPrinter) answer(v json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.output = v
	if !p.asJSON {
		fmt.Fprintf(p.out, "%s\n", v)
	}
}

func newHeadlessPrinter(out, errOut io.Writer, asJSON bool) *headlessPrinter {
	enc := json.NewEncoder(termsafe.JSON(out))
	enc.SetEscapeHTML(false) // a script reads "a > b && c", as the model wrote it
	return &headlessPrinter{out: out, errOut: errOut, asJSON: asJSON, enc: enc, inputs: map[string]json.RawMessage{}, shown: map[string]bool{}}
}

// network prints one connection of the sandbox: a "network" JSON event,
// or a [network] line on stderr.
func (p *headlessPrinter) network(r egress.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		_ = p.enc.Encode(struct {
			Type string `json:"type"`
			egress.Record
		}{"network", r})
		return
	}
	line := fmt.Sprintf("[network] %s %s:%d (%s)", r.Decision, termsafe.Name(r.Host), r.Port, r.Rule)
	if r.Decision == egress.DecisionAllow {
		line += fmt.Sprintf(" %d bytes sent, %d received", r.Sent, r.Received)
	}
	fmt.Fprintln(p.errOut, line)
}

// sessionEvent prints what the session publishes: its turn's events, its
// notices, the sandbox's progress (as written, on stderr), failed saves
// and connections. A notice that comes before the turn's first event (an
// MCP server that failed while the session started) waits for it, so that
// it prints where the turn's own notices do.
func (p *headlessPrinter) sessionEvent(e orchestrator.Event) {
	switch e := e.(type) {
	case orchestrator.TurnEvent:
		p.flushNotices()
		p.event(e.Event)
	case orchestrator.NoticeEvent:
		p.mu.Lock()
		if !p.turning {
			p.held = append(p.held, e.Text)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.event(agent.Event{Type: agent.EventNotice, Text: e.Text})
	case orchestrator.ProgressEvent:
		p.mu.Lock()
		fmt.Fprint(p.errOut, e.Text)
		p.mu.Unlock()
	case orchestrator.ImageMovedEvent:
		p.mu.Lock()
		fmt.Fprintf(p.errOut, "[notice] %s\n", e.Notice())
		p.mu.Unlock()
	case orchestrator.SaveErrorEvent:
		p.mu.Lock()
		fmt.Fprintf(p.errOut, "[notice] saving the session failed: %v\n", e.Err)
		p.mu.Unlock()
	case orchestrator.NetworkEvent:
		p.network(e.Record)
	case orchestrator.JobEvent:
		p.job(e.Event)
	case orchestrator.StartEvent:
		p.start(e)
	case orchestrator.ResultEvent:
		p.result(e)
	}
}

// jsonSandbox is the sandbox of the session and result lines.
type jsonSandbox struct {
	Kind        string `json:"kind"`
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"imageDigest,omitempty"`
}

func sandboxJSON(i sandbox.Info) jsonSandbox {
	return jsonSandbox{Kind: i.Kind, Image: i.Image, ImageDigest: i.ImageDigest}
}

// start prints the run's "session" line (--json; nothing in text).
func (p *headlessPrinter) start(e orchestrator.StartEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.asJSON {
		return
	}
	_ = p.enc.Encode(struct {
		Type      string      `json:"type"`
		SessionID string      `json:"sessionId"`
		Version   string      `json:"version"`
		Model     string      `json:"model"`
		Provider  string      `json:"provider"`
		Workspace string      `json:"workspace"`
		Sandbox   jsonSandbox `json:"sandbox"`
	}{"session", e.SessionID, p.version, e.Model.Model, e.Model.Provider, e.Workspace, sandboxJSON(e.Sandbox)})
}

// result prints the run's "result" line (--json; nothing in text).
func (p *headlessPrinter) result(e orchestrator.ResultEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.asJSON {
		return
	}
	var cost *float64
	if !e.Usage.Unpriced {
		usd := e.Usage.CostUSD
		cost = &usd
	}
	_ = p.enc.Encode(struct {
		Type            string          `json:"type"`
		SessionID       string          `json:"sessionId"`
		ExitStatus      int             `json:"exitStatus"`
		DurationMs      int64           `json:"durationMs"`
		Turns           int             `json:"turns"`
		Requests        int             `json:"requests"`
		InputTokens     int             `json:"inputTokens"`
		OutputTokens    int             `json:"outputTokens"`
		TokensEstimated bool            `json:"tokensEstimated,omitempty"`
		CostUSD         *float64        `json:"costUsd"`
		Sandbox         jsonSandbox     `json:"sandbox"`
		Output          json.RawMessage `json:"output,omitempty"`
	}{"result", e.SessionID, e.ExitStatus, e.Duration.Milliseconds(), e.Turns, e.Requests, e.Usage.InputTokens, e.Usage.OutputTokens, e.Usage.Estimated, cost, sandboxJSON(e.Sandbox), p.output})
}

// job prints a background job's start and end: a "job" JSON event each,
// or one [job] line on stderr when it ends.
func (p *headlessPrinter) job(e jobs.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		_ = p.enc.Encode(struct {
			Type  string `json:"type"`
			Event string `json:"event"`
			jobs.Status
		}{"job", e.Kind, e.Status})
		return
	}
	if e.Kind == jobs.EventStarted {
		return // its bash call's [tool] line said it
	}
	fmt.Fprintf(p.errOut, "[job] %s %s after %s: %s\n", e.ID, e.Ending(), e.Uptime(e.Ended), termsafe.Name(e.Command))
}

// flushNotices prints the notices still held: at the turn's first event,
// or after a turn that produced none.
func (p *headlessPrinter) flushNotices() {
	p.mu.Lock()
	held := p.held
	p.held, p.turning = nil, true
	p.mu.Unlock()
	for _, n := range held {
		p.event(agent.Event{Type: agent.EventNotice, Text: n})
	}
}

func (p *headlessPrinter) event(e agent.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Type == agent.EventError {
		p.sawError = true
	}
	if p.asJSON {
		_ = p.enc.Encode(e)
		return
	}
	if e.Type != agent.EventText && e.Type != agent.EventReasoning && e.Type != agent.EventDone {
		p.endBlock()
	}
	switch e.Type {
	case agent.EventText:
		if e.Text != "" && !p.holdText {
			fmt.Fprint(p.out, e.Text)
			p.midLine = e.Text[len(e.Text)-1] != '\n'
		}
	case agent.EventToolCall:
		p.toolLine(e)
	case agent.EventToolDenied:
		// A denied call never ran: its [tool] line comes now.
		p.toolLine(e)
		fmt.Fprintf(p.errOut, "[denied] %s (%s)\n", e.Name, deniedWhy(e.Reason))
	case agent.EventToolError:
		p.toolLine(e) // a call that failed its check before it ran
		fmt.Fprintf(p.errOut, "[tool-error] %s: %s\n", e.Name, e.Error)
	case agent.EventNotice:
		fmt.Fprintf(p.errOut, "[notice] %s\n", e.Text)
	case agent.EventRetry:
		fmt.Fprintf(p.errOut, "[retry] attempt %d of %d in %dms: %s\n", e.Attempt, e.Attempts, e.DelayMs, e.Text)
	case agent.EventCompacted:
		fmt.Fprintf(p.errOut, "[compacted] %d messages pruned to %d\n", e.Before, e.After)
	case agent.EventError:
		fmt.Fprintf(p.errOut, "[error] %s\n", e.Error)
	case agent.EventDone:
		if !p.holdText {
			fmt.Fprintln(p.out)
		}
		p.midLine = false
	}
}

// endBlock ends the assistant's text block on stdout with a line break
// when it stopped mid-line: the next block, and the stderr lines between
// (which share the terminal), start on a line of their own.
func (p *headlessPrinter) endBlock() {
	if p.midLine {
		fmt.Fprintln(p.out)
		p.midLine = false
	}
}

// deniedWhy is the reason of a [denied] line: the --yolo hint when no one
// could approve the call, else who refused it and why (a guard).
func deniedWhy(reason string) string {
	switch {
	case reason == agent.NoApprover || reason == "":
		return "run with --yolo to allow tool use in headless mode"
	case strings.HasPrefix(reason, "Blocked by the "):
		who, why, ok := strings.Cut(strings.TrimPrefix(reason, "Blocked by the "), ": ")
		if ok {
			return fmt.Sprintf("refused by the %s, not an approval: %s; --yolo does not change it", who, why)
		}
	}
	return termsafe.Name(reason)
}

// toolLine prints a call's "[tool] name input" line, once per call.
func (p *headlessPrinter) toolLine(e agent.Event) {
	if e.ID != "" {
		if p.shown[e.ID] {
			return
		}
		p.shown[e.ID] = true
	}
	fmt.Fprintf(p.errOut, "[tool] %s %s\n", e.Name, compactJSON(e.Input))
}

func compactJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return termsafe.Name(string(raw))
	}
	// The command as written: no HTML escaping of <, > and &.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return string(termsafe.EscapeJSON(bytes.TrimSuffix(b.Bytes(), []byte("\n"))))
}

// copyChanges reports the sandbox's changes at the end of a copy-mode
// run: applied (res set) or waiting. JSON: one "changes" event.
func (p *headlessPrinter) copyChanges(ch workcopy.Changes, res *workcopy.Applied) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asJSON {
		ev := struct {
			Type      string                  `json:"type"`
			Applied   bool                    `json:"applied"`
			Files     []checkpoint.FileChange `json:"files"`
			Skipped   map[string]string       `json:"skipped,omitempty"`
			Conflicts []string                `json:"conflicts,omitempty"`
			TooLarge  []string                `json:"tooLarge,omitempty"`
		}{Type: "changes", Files: ch.Files, Conflicts: ch.Conflicts, TooLarge: ch.TooLarge}
		if res != nil {
			ev.Applied, ev.Files, ev.Skipped = true, res.Files, res.Skipped
		}
		_ = p.enc.Encode(ev)
		return
	}
	if p.midLine {
		fmt.Fprintln(p.out)
		p.midLine = false
	}
	if ch.Empty() {
		fmt.Fprintln(p.errOut, "[changes] the sandbox changed nothing in its copy of the workspace")
		return
	}
	if res == nil {
		fmt.Fprintf(p.errOut, "[changes] %s in the sandbox's copy, not applied (run with --apply, or /apply in the chat UI)\n", ch.Stat())
		for _, f := range ch.Files {
			fmt.Fprintf(p.errOut, "  %-8s %s\n", f.Action, termsafe.Name(f.Path))
		}
	} else {
		applied := workcopy.Changes{Files: res.Files}
		fmt.Fprintf(p.errOut, "[applied] %s\n", applied.Stat())
		for _, f := range res.Files {
			fmt.Fprintf(p.errOut, "  %-8s %s\n", f.Action, termsafe.Name(f.Path))
		}
		for _, path := range sortedKeys(res.Skipped) {
			fmt.Fprintf(p.errOut, "  skipped  %s: %s\n", termsafe.Name(path), res.Skipped[path])
		}
	}
	for _, path := range ch.TooLarge {
		fmt.Fprintf(p.errOut, "  too large to apply: %s\n", termsafe.Name(path))
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
