package tui

import (
	"encoding/json"
	"sync"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox/egress"
)

// recorder saves the session as its history changes, like headless mode,
// and follows /resume and /clear to another record. OnChange calls it from
// the agent's goroutine; the UI from its commands.
type recorder struct {
	saver *store.Saver

	mu    sync.Mutex
	agent *agent.Agent
	todos func() json.RawMessage // the session's task list, saved with the history
	// network lists the session's connections, saved with the history.
	network func() []egress.Record
	rec     store.Record // the current record, without messages
	offset  llm.Usage    // the agent's usage when this record became current
	count   int
	title   string
}

func newRecorder(st *store.Store, rec store.Record, onError func(error)) *recorder {
	if rec.ID == "" {
		rec.ID = store.NewID()
	}
	r := &recorder{saver: store.NewSaver(st, 0, onError), count: len(rec.Messages), title: rec.Title}
	rec.Messages = nil
	r.rec = rec
	return r
}

// bind attaches the session's agent (for its token counts).
func (r *recorder) bind(a *agent.Agent) {
	r.mu.Lock()
	r.agent = a
	if a != nil {
		r.offset = a.Usage()
	}
	r.mu.Unlock()
}

// change saves msgs as the current record's history.
func (r *recorder) change(msgs []llm.Message) {
	r.mu.Lock()
	rec := r.rec
	if r.agent != nil {
		u := r.agent.Usage()
		rec.InputTokens += u.InputTokens - r.offset.InputTokens
		rec.OutputTokens += u.OutputTokens - r.offset.OutputTokens
	}
	rec.Messages = msgs
	rec.Title = store.Title(msgs)
	if r.todos != nil {
		rec.Todos = r.todos()
	}
	if r.network != nil {
		rec.Network = append(rec.Network[:len(rec.Network):len(rec.Network)], r.network()...)
	}
	r.count, r.title = len(msgs), rec.Title
	r.mu.Unlock()
	r.saver.Update(rec)
}

// switchTo makes rec the current record (its messages are the session's
// now) and saves it.
func (r *recorder) switchTo(rec store.Record, msgs []llm.Message) {
	r.mu.Lock()
	rec.Messages = nil
	r.rec = rec
	if r.agent != nil {
		r.offset = r.agent.Usage()
	}
	r.count, r.title = len(msgs), rec.Title
	r.mu.Unlock()
	if len(msgs) > 0 {
		r.change(msgs)
	}
}

// setModel records a model switch.
func (r *recorder) setModel(provider, model string) {
	r.mu.Lock()
	r.rec.Provider, r.rec.Model = provider, model
	r.mu.Unlock()
}

func (r *recorder) id() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec.ID
}

func (r *recorder) record() store.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec
}

func (r *recorder) summary() (id string, messages int, title string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec.ID, r.count, r.title
}

func (r *recorder) flush() error { return r.saver.Flush() }
func (r *recorder) close() error { return r.saver.Close() }
