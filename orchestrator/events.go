package orchestrator

import (
	"context"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator/sessiontools"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/egress"
	"github.com/shiroagent/shiro/tools/jobs"
)

// Event is one thing a session tells its front end (the chat UI, headless
// text, --json), through the one sink of SessionOptions.Events. The set is
// closed: a front end switches on the types below.
//
// The sink is called from the goroutines named on each type, some at the
// same time: it must be safe for concurrent use and must not block (hand
// the event to a queue, print it, drop it).
type Event interface{ sessionEvent() }

// TurnEvent is one event of a turn, as Send produced it. The events of one
// Send arrive in order, one at a time, before Send returns: from the
// goroutine calling Send, or a tool's goroutine (live output) while Send
// waits for it.
type TurnEvent struct{ agent.Event }

// NoticeEvent is a line from outside any turn: an MCP server that failed
// to start, from the goroutine that started it, possibly while a turn
// runs. A turn's own notices are TurnEvents.
type NoticeEvent struct{ Text string }

// ProgressEvent is the sandbox's start-up progress (image builds,
// container creation): one write of the backend's progress output, as
// written, so that a line may come in pieces; or, with Text empty, Total:
// how far a pull (bytes) or a build (steps) has come as a whole. It comes
// from the goroutine that opens the sandbox (StartSandbox's, or a turn's
// first command).
type ProgressEvent struct {
	Text  string
	Total *sandbox.Total
}

// TodosEvent is the task list after a change, from the goroutine that
// changed it (a turn's todo_write call, Clear's).
type TodosEvent struct{ Items []sessiontools.Todo }

// SubagentEvent is a task subagent's start, step or end, from the turn's
// task call.
type SubagentEvent struct{ sessiontools.SubagentEvent }

// SaveErrorEvent is a failed save of the session's record, from the
// store's saving goroutine.
type SaveErrorEvent struct{ Err error }

// UsageEvent follows every billed request (a turn's step, compaction, a
// subagent's step, memory compaction), from the goroutine that made it:
// Request is that request's tokens and Total what the session has spent
// since (the ledger).
type UsageEvent struct {
	Request llm.Usage
	Total   Usage
}

// HistoryEvent is the history after each message a turn adds, after
// Unsend and after an Undo that rewinds it, from the goroutine calling
// them (a copy the sink may keep). Resume, Clear and Compact, which
// replace it whole, publish none.
type HistoryEvent struct{ Messages []llm.Message }

// NetworkEvent is the record of one connection of the sandbox (ask mode),
// decided or closed, from the egress proxy's goroutine.
type NetworkEvent struct{ egress.Record }

// ImageMovedEvent says the image's tag moved on its registry since the
// workspace's container was made, from the sandbox's background check
// (its own goroutine, possibly while a turn runs). The sandbox keeps its
// image; Session.TakeNewImage takes the new one.
type ImageMovedEvent struct{ sandbox.TagMove }

// JobEvent is a background job that started, ended by itself (Kind
// "exited") or was killed (job_kill, /jobs, an undo's stop, the session's
// end), from the goroutine of the tool call that started it or of the
// job's own end.
type JobEvent struct{ jobs.Event }

// StartEvent describes the session as a run begins, before its first
// turn (headless --json: the "session" line), from the goroutine calling
// Session.Announce.
type StartEvent struct {
	// SessionID is the record's id (what -r takes).
	SessionID string
	Model     llm.ModelInfo
	Workspace string
	// Sandbox is the sandbox as configured (its kind, its image); the
	// image's digest is set when it is known before the first command
	// (a resumed session's record, an image given by digest).
	Sandbox sandbox.Info
}

// ResultEvent sums up a run as it ends (headless --json: the "result"
// line), from the goroutine calling Session.Report.
type ResultEvent struct {
	SessionID string
	// Usage is what this run spent (not the resumed session's earlier
	// runs): every request's tokens, aborted ones included, and their
	// price.
	Usage Usage
	// Turns counts the prompts this run sent, Requests the model requests
	// it made (steps, compaction, subagents).
	Turns, Requests int
	Duration        time.Duration
	// ExitStatus is the process's exit status.
	ExitStatus int
	// Sandbox is the sandbox as it ran: with the image's digest once it
	// was opened.
	Sandbox sandbox.Info
}

func (StartEvent) sessionEvent()      {}
func (ResultEvent) sessionEvent()     {}
func (TurnEvent) sessionEvent()       {}
func (JobEvent) sessionEvent()        {}
func (ImageMovedEvent) sessionEvent() {}
func (NoticeEvent) sessionEvent()     {}
func (ProgressEvent) sessionEvent()   {}
func (TodosEvent) sessionEvent()      {}
func (SubagentEvent) sessionEvent()   {}
func (SaveErrorEvent) sessionEvent()  {}
func (UsageEvent) sessionEvent()      {}
func (HistoryEvent) sessionEvent()    {}
func (NetworkEvent) sessionEvent()    {}

// Asker is the person at the front end: the three questions a session
// puts to them, each blocking its caller until the answer, ctx's end or
// the front end's. A session without one (headless) denies gated calls
// (agent.NoApprover), offers no ask tool and denies the connections no
// rule decides.
type Asker interface {
	// Approve decides a gated tool call, from the turn's goroutine.
	Approve(ctx context.Context, req agent.ApprovalRequest) (agent.Decision, error)
	// Ask answers the ask tool, from the turn's goroutine.
	Ask(ctx context.Context, q sessiontools.Question) ([]string, error)
	// AskHost decides a connection no rule decides (ask mode), from the
	// egress proxy's goroutine.
	AskHost(ctx context.Context, req egress.Request) egress.Answer
}

// Announce publishes the StartEvent of a run, and starts its clock.
func (s *Session) Announce() {
	s.mu.Lock()
	s.runStart = time.Now()
	s.mu.Unlock()
	info := s.sandbox.Info()
	saved := s.book.snapshot()
	if info.ImageDigest == "" && saved.Image == info.Image {
		info.ImageDigest = saved.ImageDigest
	}
	s.publish(StartEvent{SessionID: saved.ID, Model: s.agent.Model().Info(), Workspace: s.ws, Sandbox: info})
}

// Report publishes the ResultEvent of a run that ends with exitStatus.
func (s *Session) Report(exitStatus int) {
	s.mu.Lock()
	start, turns := s.runStart, s.turns
	s.mu.Unlock()
	var took time.Duration
	if !start.IsZero() {
		took = time.Since(start)
	}
	run, requests := s.book.spent()
	info := s.sandbox.Info()
	if info.ImageDigest == "" {
		if rec := s.book.snapshot(); rec.Image == info.Image {
			info.ImageDigest = rec.ImageDigest
		}
	}
	s.publish(ResultEvent{SessionID: s.Saved().ID, Usage: run, Turns: turns, Requests: requests, Duration: took, ExitStatus: exitStatus, Sandbox: info})
}

// publish hands e to the session's sink (nil drops it).
func (s *Session) publish(e Event) {
	if s.events != nil {
		s.events(e)
	}
}

// progressWriter turns the sandbox's progress output into ProgressEvents.
type progressWriter struct{ s *Session }

func (w progressWriter) Write(p []byte) (int, error) {
	w.s.publish(ProgressEvent{Text: string(p)})
	return len(p), nil
}

// Total implements sandbox.TotalWriter.
func (w progressWriter) Total(t sandbox.Total) { w.s.publish(ProgressEvent{Total: &t}) }
