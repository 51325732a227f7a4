// Package store keeps session records: one pretty-printed JSON file per
// session, <dir>/<id>.json, replaced atomically on every save so that a
// crash never leaves half a record. Ids are UUIDv7. Records are listed
// newest first, looked up by directory (shiro -c) or by id prefix
// (shiro -r), and saved in the background by a Saver.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/sandbox/egress"
)

// Record is one saved session.
type Record struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is stamped by every save.
	UpdatedAt time.Time `json:"updatedAt"`
	Cwd       string    `json:"cwd"`
	// Worktree and Branch name the worktree agent the session ran as
	// (shiro --worktree NAME) and its branch; Cwd is then its worktree.
	Worktree     string `json:"worktree,omitempty"`
	Branch       string `json:"branch,omitempty"`
	Provider     string `json:"provider"`
	Model        string `json:"model"`
	Title        string `json:"title"`
	InputTokens  int    `json:"inputTokens"`
	OutputTokens int    `json:"outputTokens"`
	// CostUSD is what every request of the session cost, when its models
	// are priced.
	CostUSD *float64 `json:"costUsd,omitempty"`
	// TokensEstimated says the token counts hold shiro's estimate of
	// requests cut before the provider counted them (aborts, cuts).
	TokensEstimated bool `json:"tokensEstimated,omitempty"`
	// MessageCount is the number of messages of a listed record (List
	// leaves Messages out); it is not saved.
	MessageCount int `json:"-"`
	// Todos is the session's task list, kept as the todo tool wrote it.
	Todos    json.RawMessage `json:"todos,omitempty"`
	Messages []llm.Message   `json:"messages"`
	// Image is the image the session's sandbox ran, as set (a reference,
	// or the local image shiro built), and ImageDigest the image exactly
	// (sandbox.Info.ImageDigest): the registry's digest, or the local
	// image id of a build. A resumed session's record holds its last run's.
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"imageDigest,omitempty"`
	// Network lists every connection the sandbox made through the egress
	// proxy (ask mode), across the runs of the session.
	Network []egress.Record `json:"network,omitempty"`
}

// NewRecord starts the record of a new session.
func NewRecord(cwd, provider, model string) Record {
	return Record{ID: NewID(), CreatedAt: time.Now().UTC(), Cwd: cwd, Provider: provider, Model: model}
}

// Untitled is the title of a session without a user message.
const Untitled = "untitled"

// titleLen is where a title is cut (then "..." is added).
const titleLen = 60

// Title names a session after its first user message with text: the text
// with runs of white space made single spaces, cut at 60 characters plus
// "...". Without one it is "untitled".
func Title(messages []llm.Message) string {
	for _, m := range messages {
		if m.Role != llm.RoleUser {
			continue
		}
		var texts []string
		for _, p := range m.Parts {
			if p.Type == llm.PartText {
				texts = append(texts, p.Text)
			}
		}
		t := strings.Join(strings.Fields(strings.Join(texts, " ")), " ")
		if t == "" {
			continue
		}
		if utf8.RuneCountInString(t) > titleLen {
			t = string([]rune(t)[:titleLen]) + "..."
		}
		return t
	}
	return Untitled
}

// Store reads and writes records in Dir (Paths.SessionsDir()).
type Store struct {
	Dir string
}

// recent is how many of the newest records Latest and Resolve search.
const recent = 100

var (
	// ErrNoSessionHere is Latest's error when no recent session ran in the
	// directory.
	ErrNoSessionHere = errors.New("no saved session for this directory")
	// ErrBadID is the error of an id that is not a UUID (it could name a
	// file outside the store).
	ErrBadID = errors.New("not a session id")
)

// NoMatchError is Resolve's error when no session matches.
type NoMatchError struct {
	Query string
}

func (e *NoMatchError) Error() string { return fmt.Sprintf("no session matching %q", e.Query) }

// AmbiguousError is Resolve's error when the prefix begins more than one
// session's id: Candidates are those sessions (newest first, without
// messages), Short their ids as shown.
type AmbiguousError struct {
	Query      string
	Candidates []Record
	Short      map[string]string
}

// Error lists the candidates, one a line, each with the id that names it.
func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session id %q is ambiguous: %d sessions match", e.Query, len(e.Candidates))
	for _, r := range e.Candidates {
		id := e.Short[r.ID]
		if id == "" {
			id = r.ID
		}
		fmt.Fprintf(&b, "\n  %s  %s  %s", id, r.UpdatedAt.Local().Format("2006-01-02 15:04"), termsafe.Name(r.Title))
	}
	return b.String()
}

func (s *Store) path(id string) string { return filepath.Join(s.Dir, id+".json") }

// Save writes rec: it gives rec an id and a creation time when it has
// none, a title when it is untitled, and stamps UpdatedAt. The file is
// replaced atomically (a temporary file in the same directory, fsync,
// rename), mode 0600 in a 0700 directory.
func (s *Store) Save(rec *Record) error {
	if rec.ID == "" {
		rec.ID = NewID()
	}
	if !validID(rec.ID) {
		return fmt.Errorf("save session %q: %w", rec.ID, ErrBadID)
	}
	now := time.Now().UTC()
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	rec.UpdatedAt = now
	// A title stays once given: compaction may replace the first message.
	if rec.Title == "" || rec.Title == Untitled {
		rec.Title = Title(rec.Messages)
	}
	out := *rec
	out.Messages = storable(rec.Messages)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("save session %s: %w", rec.ID, err)
	}
	if err := atomicfile.WriteFile(s.path(rec.ID), buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("save session %s: %w", rec.ID, err)
	}
	return nil
}

// Load reads the record with exactly this id.
func (s *Store) Load(id string) (Record, error) {
	if !validID(id) {
		return Record{}, fmt.Errorf("load session %q: %w", id, ErrBadID)
	}
	data, err := os.ReadFile(s.path(id))
	if err != nil {
		return Record{}, fmt.Errorf("load session %s: %w", id, err)
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return Record{}, fmt.Errorf("load session %s: %w", id, err)
	}
	restore(&rec)
	return rec, nil
}

// storable returns messages ready for encoding/json: a tool call's input
// that is not valid JSON (a model may send that; the agent answers it with
// a tool error) is stored as a JSON string, which restore turns back into
// the raw bytes. Valid inputs are objects, so a string cannot be mistaken.
// The messages are copied only where they change.
func storable(msgs []llm.Message) []llm.Message {
	if msgs == nil {
		return []llm.Message{}
	}
	invalid := func(p llm.Part) bool { return len(p.Input) > 0 && !json.Valid(p.Input) }
	out := msgs
	for i, m := range msgs {
		if !slices.ContainsFunc(m.Parts, invalid) {
			continue
		}
		if &out[0] == &msgs[0] {
			out = slices.Clone(msgs)
		}
		parts := slices.Clone(m.Parts)
		for j, p := range parts {
			if invalid(p) {
				parts[j].Input, _ = json.Marshal(string(p.Input)) // a string always encodes
			}
		}
		out[i].Parts = parts
	}
	return out
}

// restore undoes storable, and compacts inputs and todos that the
// pretty-printer indented, so a round trip gives back the bytes a model sent
// (providers that echo arguments as text then see them unchanged).
func restore(rec *Record) {
	compact := func(raw json.RawMessage) json.RawMessage {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) != nil {
			return raw
		}
		return buf.Bytes()
	}
	if len(rec.Todos) > 0 {
		rec.Todos = compact(rec.Todos)
	}
	for i := range rec.Messages {
		for j := range rec.Messages[i].Parts {
			p := &rec.Messages[i].Parts[j]
			if len(p.Input) == 0 {
				continue
			}
			var s string
			if p.Input[0] == '"' && json.Unmarshal(p.Input, &s) == nil {
				p.Input = json.RawMessage(s)
				continue
			}
			p.Input = compact(p.Input)
		}
	}
}

// counted reads past a JSON array, counting its elements without keeping
// them.
type counted struct{ n int }

func (c *counted) UnmarshalJSON(b []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return err
	}
	c.n = len(items)
	return nil
}

// summary is a record without its messages, for listing.
type summary struct {
	Record
	Messages counted `json:"messages"`
}

// List returns the records, newest update first, at most limit of them
// (limit <= 0: all). Listed records carry no messages; Load reads one
// whole. Files that do not parse are skipped; a missing directory is an
// empty list.
func (s *Store) List(limit int) ([]Record, error) {
	ids, err := s.IDs()
	if err != nil {
		return nil, err
	}
	var recs []Record
	for _, id := range ids {
		if rec, ok := s.summary(id); ok {
			recs = append(recs, rec)
		}
	}
	sortNewest(recs)
	if limit > 0 && len(recs) > limit {
		recs = recs[:limit]
	}
	return recs, nil
}

// IDs returns the ids of the saved sessions, in no order, from the file
// names alone (nothing is read). A missing directory has none.
func (s *Store) IDs() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var ids []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !validID(id) || !e.Type().IsRegular() {
			continue // temporary files start with a dot
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// summary reads the record id without its messages; false when it cannot
// be read or does not parse (removed meanwhile, unreadable: not a session
// that can be resumed).
func (s *Store) summary(id string) (Record, bool) {
	data, err := os.ReadFile(s.path(id))
	if err != nil {
		return Record{}, false
	}
	var sum summary
	if json.Unmarshal(data, &sum) != nil || sum.ID != id {
		return Record{}, false
	}
	sum.Record.MessageCount = sum.Messages.n
	return sum.Record, true
}

func sortNewest(recs []Record) {
	slices.SortFunc(recs, func(a, b Record) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// Latest returns the newest session that ran in cwd, among the 100 newest.
func (s *Store) Latest(cwd string) (Record, error) {
	recs, err := s.List(recent)
	if err != nil {
		return Record{}, err
	}
	for _, r := range recs {
		if r.Cwd == cwd {
			return s.Load(r.ID)
		}
	}
	return Record{}, ErrNoSessionHere
}

// Resolve finds a session by its exact id, else by a prefix of exactly
// one saved session's id (any length, all sessions searched: the names of
// the files, nothing read). Case and surrounding space do not matter. No
// match is a *NoMatchError; more than one an *AmbiguousError naming them.
func (s *Store) Resolve(query string) (Record, error) {
	q := strings.ToLower(strings.TrimSpace(query))
	if validID(q) {
		rec, err := s.Load(q)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return rec, err
		}
	}
	if q == "" || strings.Trim(q, "0123456789abcdef-") != "" {
		return Record{}, &NoMatchError{Query: query}
	}
	ids, err := s.IDs()
	if err != nil {
		return Record{}, err
	}
	var matches []string
	for _, id := range ids {
		if strings.HasPrefix(id, q) {
			matches = append(matches, id)
		}
	}
	switch len(matches) {
	case 0:
		return Record{}, &NoMatchError{Query: query}
	case 1:
		return s.Load(matches[0])
	}
	amb := &AmbiguousError{Query: query, Short: Abbrev(ids)}
	for _, id := range matches {
		rec, ok := s.summary(id)
		if !ok {
			rec = Record{ID: id, Title: "(unreadable)"}
		}
		amb.Candidates = append(amb.Candidates, rec)
	}
	sortNewest(amb.Candidates)
	return Record{}, amb
}

// MinAbbrev is the fewest characters of a shown session id.
const MinAbbrev = 8

// Abbrev returns, for each of ids, the shortest prefix of it that is a
// prefix of no other of ids, and at least MinAbbrev characters long, as
// git abbreviates hashes. Ids are time-ordered, so sessions started
// within the same minute share their first 8 characters and show more.
func Abbrev(ids []string) map[string]string {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	common := func(a, b string) int {
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		return n
	}
	out := make(map[string]string, len(sorted))
	for i, id := range sorted {
		n := 0
		if i > 0 {
			n = max(n, common(sorted[i-1], id))
		}
		if i+1 < len(sorted) {
			n = max(n, common(sorted[i+1], id))
		}
		n = min(max(n+1, MinAbbrev), len(id))
		out[id] = id[:n]
	}
	return out
}

// Short is id as shown: its abbreviation among the saved sessions (id
// itself counted though not saved yet). When the store cannot be listed
// (or s is nil) it is the first MinAbbrev characters.
func (s *Store) Short(id string) string {
	if s == nil {
		return id[:min(len(id), MinAbbrev)]
	}
	ids, err := s.IDs()
	if err != nil {
		return id[:min(len(id), MinAbbrev)]
	}
	return Abbrev(append(ids, id))[id]
}
