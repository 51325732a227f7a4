package orchestrator

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox/egress"
)

// Usage is what a session has spent: the tokens of every request it made
// (turns that ended, turns that were aborted, compaction, subagents,
// memory compaction), and their price.
type Usage struct {
	llm.Usage
	// CostUSD is the price of the priced requests; Unpriced says some
	// request went to a model without a price.
	CostUSD  float64
	Unpriced bool
}

// book is a session's record, its saver and its usage ledger. The
// session is their only owner: every change of the history, every
// request's tokens and every switch of record goes through it.
type book struct {
	st      *store.Store // nil: nothing is saved
	onError func(error)
	todos   func() json.RawMessage // the task list, saved with the history
	network func() []egress.Record // this session's connections (ask mode)

	mu  sync.Mutex
	rec store.Record // the current record, its Messages the history last saved
	// priorNetwork are the connections the record held when it became
	// current (a resumed session's); this session's follow them.
	priorNetwork []egress.Record
	saver        *store.Saver
	usage        Usage
	// run is what this process spent, over every record it kept, and
	// requests the number of requests it made.
	run      Usage
	requests int
}

func newBook(st *store.Store, rec store.Record, onError func(error), todos func() json.RawMessage, network func() []egress.Record) *book {
	b := &book{st: st, onError: onError, todos: todos, network: network}
	b.switchTo(rec)
	return b
}

// switchTo makes rec current, its totals the ledger's (the old saver is
// closed first, so that the old record is complete).
func (b *book) switchTo(rec store.Record) error {
	if rec.ID == "" {
		rec.ID = store.NewID()
	}
	var err error
	b.mu.Lock()
	old := b.saver
	b.saver = nil
	b.mu.Unlock()
	if old != nil {
		err = old.Close()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rec = rec
	b.priorNetwork = rec.Network
	b.usage = Usage{Usage: llm.Usage{InputTokens: rec.InputTokens, OutputTokens: rec.OutputTokens, Estimated: rec.TokensEstimated}}
	if rec.CostUSD != nil {
		b.usage.CostUSD = *rec.CostUSD
	} else if rec.InputTokens+rec.OutputTokens > 0 {
		b.usage.Unpriced = true
	}
	if b.st != nil {
		b.saver = store.NewSaver(b.st, 0, b.onError)
	}
	return err
}

// add counts one request's tokens, priced at the model that served it,
// and returns the ledger's totals after it.
func (b *book) add(model string, u llm.Usage) Usage {
	b.mu.Lock()
	b.usage.Usage = b.usage.Usage.Add(u)
	b.run.Usage = b.run.Usage.Add(u)
	b.requests++
	if usd, ok := Cost(model, u); ok {
		b.usage.CostUSD += usd
		b.run.CostUSD += usd
	} else {
		b.usage.Unpriced, b.run.Unpriced = true, true
	}
	total := b.usage
	b.mu.Unlock()
	b.save(nil, false)
	return total
}

// save hands the saver the record with msgs as its history (when set;
// else the history last saved), the task list and the ledger's totals.
func (b *book) save(msgs []llm.Message, set bool) {
	b.mu.Lock()
	if set {
		b.rec.Messages = msgs
		if b.rec.Title == "" || b.rec.Title == store.Untitled {
			b.rec.Title = store.Title(msgs)
		}
	}
	if b.todos != nil {
		b.rec.Todos = b.todos()
	}
	if b.network != nil {
		if net := b.network(); len(net) > 0 {
			b.rec.Network = append(slices.Clip(b.priorNetwork), net...)
		}
	}
	rec := b.current()
	saver := b.saver
	b.mu.Unlock()
	if saver != nil {
		saver.Update(rec)
	}
}

// current is the record with the ledger's totals; b.mu is held.
func (b *book) current() store.Record {
	rec := b.rec
	rec.InputTokens, rec.OutputTokens, rec.TokensEstimated = b.usage.InputTokens, b.usage.OutputTokens, b.usage.Estimated
	rec.CostUSD = nil
	if !b.usage.Unpriced {
		usd := b.usage.CostUSD
		rec.CostUSD = &usd
	}
	return rec
}

func (b *book) setModel(provider, model string) {
	b.mu.Lock()
	b.rec.Provider, b.rec.Model = provider, model
	b.mu.Unlock()
	b.save(nil, false)
}

// setImage records the image the sandbox opened on.
func (b *book) setImage(ref, digest string) {
	b.mu.Lock()
	b.rec.Image, b.rec.ImageDigest = ref, digest
	b.mu.Unlock()
	b.save(nil, false)
}

// spent is what this process spent and the number of its requests.
func (b *book) spent() (Usage, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.run, b.requests
}

// snapshot is the current record (its messages those last saved).
func (b *book) snapshot() store.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.current()
}

func (b *book) flush() error {
	b.mu.Lock()
	saver := b.saver
	b.mu.Unlock()
	if saver == nil {
		return nil
	}
	return saver.Flush()
}

func (b *book) close() error {
	b.mu.Lock()
	saver := b.saver
	b.saver = nil
	b.mu.Unlock()
	if saver == nil {
		return nil
	}
	return saver.Close()
}

// Saved describes the session's record.
type Saved struct {
	ID       string
	Title    string
	Messages int
}

// Saved is the current record's id, title and message count.
func (s *Session) Saved() Saved {
	s.book.mu.Lock()
	defer s.book.mu.Unlock()
	return Saved{ID: s.book.rec.ID, Title: s.book.rec.Title, Messages: len(s.book.rec.Messages)}
}

// Usage is what the session has spent so far (a resumed session starts
// from its record's totals).
func (s *Session) Usage() Usage {
	s.book.mu.Lock()
	defer s.book.mu.Unlock()
	return s.book.usage
}

// Save writes the record now; it returns "" when there is nothing to save
// (no messages).
func (s *Session) Save() (string, error) {
	if err := s.book.flush(); err != nil {
		return "", err
	}
	if sv := s.Saved(); sv.Messages > 0 {
		return sv.ID, nil
	}
	return "", nil
}

// ErrNoStore is returned by Resume in a session that saves nothing.
var ErrNoStore = errors.New("this session keeps no records")

// Resume makes the session that query names (an id or a unique prefix)
// this one: its history, task list and totals. The current record is
// saved first.
func (s *Session) Resume(query string) (store.Record, error) {
	if s.book.st == nil {
		return store.Record{}, ErrNoStore
	}
	if err := s.book.flush(); err != nil {
		return store.Record{}, err
	}
	rec, err := s.book.st.Resolve(query)
	if err != nil {
		return store.Record{}, err
	}
	if err := s.book.switchTo(rec); err != nil {
		return store.Record{}, err
	}
	s.SetSessionID(rec.ID) // its turns' checkpoints are the resumed record's
	s.agent.Replace(rec.Messages)
	s.agent.SetUsage(llm.Usage{InputTokens: rec.InputTokens, OutputTokens: rec.OutputTokens})
	s.todos.Restore(rec.Todos)
	return rec, nil
}

// Clear starts a new, empty record: no history, no task list, no spend.
// It returns the new record's id.
func (s *Session) Clear() (string, error) {
	s.book.mu.Lock()
	old := s.book.rec
	s.book.mu.Unlock()
	rec := store.NewRecord(old.Cwd, old.Provider, old.Model)
	rec.Worktree, rec.Branch = old.Worktree, old.Branch // a worktree agent's new record is still its own
	err := s.book.switchTo(rec)
	s.SetSessionID(rec.ID) // the new record's turns start at 1
	s.agent.Replace(nil)
	s.agent.SetUsage(llm.Usage{})
	s.todos.Set(nil)
	return rec.ID, err
}

// SetModel switches the model from the next request, and records it.
func (s *Session) SetModel(m llm.Model) {
	s.agent.SetModel(m)
	info := m.Info()
	s.book.setModel(info.Provider, info.Model)
}

// Model is the model of the next request.
func (s *Session) Model() llm.Model { return s.agent.Model() }

// Messages is a copy of the history.
func (s *Session) Messages() []llm.Message { return s.agent.Messages() }

// ContextTokens estimates what the next request carries.
func (s *Session) ContextTokens() int { return s.agent.ContextTokens() }

// MeasureOverhead counts the system prompt and the tool schemas into
// ContextTokens before the first request (it reads files).
func (s *Session) MeasureOverhead() { s.agent.MeasureOverhead() }

// InterruptTools kills the commands in flight; the turn goes on.
func (s *Session) InterruptTools() []string { return s.agent.InterruptTools() }

// Allowed reports whether a tool is allowed for the rest of the session.
func (s *Session) Allowed(name string) bool { return s.agent.Allowed(name) }

// AllowedPrefixes are the command prefixes allowed for a tool.
func (s *Session) AllowedPrefixes(name string) [][]string { return s.agent.AllowedPrefixes(name) }

// Unsend takes back a prompt the model never answered.
func (s *Session) Unsend(text string) bool { return s.agent.Unsend(text) }
