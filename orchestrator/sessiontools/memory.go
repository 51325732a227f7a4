package sessiontools

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/tools"
)

// Memory limits.
const (
	// MaxMemoryText is where a note's text is cut, in characters.
	MaxMemoryText = 400
	// MaxMemories is the size of the store; the oldest go first.
	MaxMemories = 300
	// recallLimit is how many matches recall returns.
	recallLimit = 15
	// bootLimit is how many notes the system prompt carries.
	bootLimit = 20
)

// MemoryKinds are the kinds of note, in the order the schema lists them.
var MemoryKinds = []string{"fact", "decision", "gotcha", "command"}

// MemoryEntry is one note.
type MemoryEntry struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Text      string    `json:"text"`
	CreatedAt time.Time `json:"createdAt"`
	Hits      int       `json:"hits"`
}

func (e MemoryEntry) valid() bool {
	return e.ID != "" && slices.Contains(MemoryKinds, e.Kind) && strings.TrimSpace(e.Text) != ""
}

// Memory is a project's notes, kept in one JSON file (an array of
// entries, oldest first) replaced atomically on every change. Another
// process may write the same file; each operation reads it afresh.
type Memory struct {
	// Path is the JSON file: <DataDir>/memory/<ProjectKey>.json.
	Path string
	mu   sync.Mutex
}

// NewMemory returns the memory kept at <dataDir>/memory/<key>.json.
func NewMemory(dataDir, key string) *Memory {
	return &Memory{Path: filepath.Join(dataDir, "memory", key+".json")}
}

// Entries reads the store, oldest first: invalid entries are dropped and a
// missing or corrupt file reads as empty.
func (m *Memory) Entries() []MemoryEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.load()
}

func (m *Memory) load() []MemoryEntry {
	b, err := os.ReadFile(m.Path)
	if err != nil {
		return nil
	}
	var raw []json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return nil
	}
	var out []MemoryEntry
	for _, r := range raw {
		var e MemoryEntry
		if json.Unmarshal(r, &e) == nil && e.valid() {
			out = append(out, e)
		}
	}
	return out
}

func (m *Memory) save(entries []MemoryEntry) error {
	if len(entries) > MaxMemories {
		entries = entries[len(entries)-MaxMemories:]
	}
	if entries == nil {
		entries = []MemoryEntry{}
	}
	b, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return fmt.Errorf("encode memory: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(m.Path), 0o700); err != nil {
		return fmt.Errorf("create the memory directory: %w", err)
	}
	if err := atomicfile.WriteFile(m.Path, b, 0o600); err != nil {
		return fmt.Errorf("save memory: %w", err)
	}
	return nil
}

// inputError is a bad call the model can fix; other errors are the
// store's.
type inputError string

func (e inputError) Error() string { return string(e) }

// Bad calls of the memory tools.
const (
	errEmptyText  inputError = "memory text is empty"
	errEmptyQuery inputError = "query is empty"
)

// Remember records a note; the text is trimmed and cut at MaxMemoryText
// characters. An exact duplicate is not recorded again.
func (m *Memory) Remember(kind, text string) (string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return "", errEmptyText
	}
	if !slices.Contains(MemoryKinds, kind) {
		return "", inputError(fmt.Sprintf("kind %q is not one of %s", kind, strings.Join(MemoryKinds, ", ")))
	}
	if utf8.RuneCountInString(text) > MaxMemoryText {
		text = strings.TrimSpace(string([]rune(text)[:MaxMemoryText]))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := m.load()
	for _, e := range entries {
		if e.Text == text {
			return "Already recorded: " + text, nil
		}
	}
	entries = append(entries, MemoryEntry{ID: store.NewID(), Kind: kind, Text: text, CreatedAt: time.Now().UTC()})
	if err := m.save(entries); err != nil {
		return "", err
	}
	return fmt.Sprintf("Remembered as %s (%d stored): %s", kind, min(len(entries), MaxMemories), text), nil
}

// Recall returns the newest notes containing every term of the query and
// counts a hit on each match.
func (m *Memory) Recall(query string) (string, error) {
	terms := strings.Fields(strings.ToLower(query))
	if len(terms) == 0 {
		return "", errEmptyQuery
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := m.load()
	var matched []int
	for i, e := range entries {
		text := strings.ToLower(e.Text)
		if !slices.ContainsFunc(terms, func(t string) bool { return !strings.Contains(text, t) }) {
			matched = append(matched, i)
		}
	}
	if len(matched) == 0 {
		return `Nothing recorded about "` + strings.TrimSpace(query) + `".`, nil
	}
	for _, i := range matched {
		entries[i].Hits++
	}
	if err := m.save(entries); err != nil {
		return "", err
	}
	var lines []string
	for k := len(matched) - 1; k >= 0 && len(lines) < recallLimit; k-- {
		e := entries[matched[k]]
		lines = append(lines, fmt.Sprintf("(%s) %s", e.Kind, e.Text))
	}
	return strings.Join(lines, "\n"), nil
}

// Forget removes every note whose text contains needle, case-insensitively.
func (m *Memory) Forget(needle string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(needle))
	if n == "" {
		return "", errEmptyText
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := m.load()
	kept := slices.DeleteFunc(slices.Clone(entries), func(e MemoryEntry) bool { return strings.Contains(strings.ToLower(e.Text), n) })
	removed := len(entries) - len(kept)
	if removed == 0 {
		return `No memory matches "` + strings.TrimSpace(needle) + `".`, nil
	}
	if err := m.save(kept); err != nil {
		return "", err
	}
	if removed == 1 {
		return "Forgot 1 memory.", nil
	}
	return fmt.Sprintf("Forgot %d memories.", removed), nil
}

// Block is the memory section of the system prompt: the 20 most recalled
// notes, newest first among equals ("" when there are none).
func (m *Memory) Block() string {
	entries := m.Entries()
	if len(entries) == 0 {
		return ""
	}
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ea, eb := entries[a], entries[b]
		return cmp.Or(cmp.Compare(eb.Hits, ea.Hits), eb.CreatedAt.Compare(ea.CreatedAt), cmp.Compare(b, a))
	})
	var b strings.Builder
	b.WriteString("Notes about this project, learned in earlier sessions (recall finds more). They may be stale: if one contradicts the code, trust the code and forget the note.\n")
	for k, i := range order {
		if k == bootLimit {
			break
		}
		fmt.Fprintf(&b, "- (%s) %s\n", entries[i].Kind, entries[i].Text)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

//go:embed remember.md
var rememberDoc string

var rememberGuidance, rememberDescription = tools.SplitDoc(rememberDoc)

//go:embed recall.md
var recallDoc string

var recallGuidance, recallDescription = tools.SplitDoc(recallDoc)

//go:embed forget.md
var forgetDoc string

var forgetGuidance, forgetDescription = tools.SplitDoc(forgetDoc)

// memoryTool is remember, recall or forget.
type memoryTool struct {
	name, guidance, desc string
	schema               json.RawMessage
	run                  func(m *Memory, input json.RawMessage) (string, error)
	mem                  *Memory
}

func (t memoryTool) Name() string            { return t.name }
func (t memoryTool) Description() string     { return t.desc }
func (t memoryTool) Guidance() string        { return t.guidance }
func (t memoryTool) Schema() json.RawMessage { return t.schema }
func (memoryTool) Gated() bool               { return false }

func (t memoryTool) Run(_ context.Context, input json.RawMessage, _ func(string)) (agent.Result, error) {
	out, err := t.run(t.mem, input)
	if err != nil {
		var ie inputError
		if errors.As(err, &ie) {
			return agent.Result{Output: err.Error(), IsError: true}, nil
		}
		return agent.Result{}, err // the store cannot be written: not the model's to fix
	}
	return agent.Result{Output: out}, nil
}

// MemoryTools returns remember, recall and forget over m.
func MemoryTools(m *Memory) []agent.Tool {
	return []agent.Tool{
		memoryTool{
			name: "remember", guidance: rememberGuidance, desc: rememberDescription, mem: m,
			schema: objectSchema([]string{"kind", "text"},
				prop{name: "kind", typ: "string", desc: "Kind of note.", enum: MemoryKinds},
				prop{name: "text", typ: "string", desc: "At most 400 characters."}),
			run: func(m *Memory, input json.RawMessage) (string, error) {
				var p struct{ Kind, Text string }
				if err := decode(input, &p); err != nil {
					return "", err
				}
				return m.Remember(p.Kind, p.Text)
			},
		},
		memoryTool{
			name: "recall", guidance: recallGuidance, desc: recallDescription, mem: m,
			schema: objectSchema([]string{"query"}, prop{name: "query", typ: "string", desc: "Words that must all appear."}),
			run: func(m *Memory, input json.RawMessage) (string, error) {
				var p struct{ Query string }
				if err := decode(input, &p); err != nil {
					return "", err
				}
				return m.Recall(p.Query)
			},
		},
		memoryTool{
			name: "forget", guidance: forgetGuidance, desc: forgetDescription, mem: m,
			schema: objectSchema([]string{"text"}, prop{name: "text", typ: "string", desc: "Text the notes to delete contain."}),
			run: func(m *Memory, input json.RawMessage) (string, error) {
				var p struct{ Text string }
				if err := decode(input, &p); err != nil {
					return "", err
				}
				return m.Forget(p.Text)
			},
		},
	}
}

// CrowdedMemory is the number of notes from which /memory is suggested.
const CrowdedMemory = 60

// MinCompactable is how many never-recalled notes /memory needs before it
// asks the model to merge them.
const MinCompactable = 2

// ErrNoModel is Compact's error without a model to summarise with.
var ErrNoModel = errors.New("no model available to summarize memory")

// MemoryCompaction is what /memory did.
type MemoryCompaction struct {
	// Before and After count the notes.
	Before, After int
	// Changed is false when the store was left as it was; Reason says why.
	Changed bool
	Reason  string
}

// Summarizer answers one prompt with text (the session's model).
type Summarizer func(ctx context.Context, prompt string) (string, error)

// compactPrompt asks the model to merge the notes that were never recalled.
const compactPrompt = `Below are notes about a software project, one per line as "[kind] text". Merge duplicates and near-duplicates, drop notes that are trivial or superseded by another, and keep every distinct fact. Answer with the resulting notes only, one per line, in the same "[kind] text" form; kind is one of fact, decision, gotcha, command.

`

// Compact asks summarize to merge the notes that were never recalled;
// recalled notes are kept verbatim. An answer with no parseable line, or
// an error, leaves the store as it was. Notes written by another process
// meanwhile are kept.
func (m *Memory) Compact(ctx context.Context, summarize Summarizer) (MemoryCompaction, error) {
	if summarize == nil {
		return MemoryCompaction{}, ErrNoModel
	}
	entries := m.Entries()
	var unused []MemoryEntry
	for _, e := range entries {
		if e.Hits == 0 {
			unused = append(unused, e)
		}
	}
	res := MemoryCompaction{Before: len(entries), After: len(entries)}
	if len(unused) < MinCompactable {
		res.Reason = fmt.Sprintf("fewer than %d notes were never recalled", MinCompactable)
		return res, nil
	}
	var b strings.Builder
	b.WriteString(compactPrompt)
	for _, e := range unused {
		fmt.Fprintf(&b, "[%s] %s\n", e.Kind, e.Text)
	}
	answer, err := summarize(ctx, b.String())
	if err != nil {
		return res, fmt.Errorf("summarize memory: %w", err)
	}
	merged := parseNotes(answer)
	if len(merged) == 0 {
		res.Reason = "the model's answer held no notes"
		return res, nil
	}
	newest := unused[0].CreatedAt
	replaced := map[string]bool{}
	for _, e := range unused {
		replaced[e.ID] = true
		if e.CreatedAt.After(newest) {
			newest = e.CreatedAt
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	current := m.load()
	kept := slices.DeleteFunc(slices.Clone(current), func(e MemoryEntry) bool { return replaced[e.ID] })
	seen := map[string]bool{}
	for _, e := range kept {
		seen[e.Text] = true
	}
	for _, n := range merged {
		if seen[n.Text] {
			continue
		}
		seen[n.Text] = true
		n.ID, n.CreatedAt = store.NewID(), newest
		kept = append(kept, n)
	}
	if err := m.save(kept); err != nil {
		return res, err
	}
	return MemoryCompaction{Before: len(current), After: min(len(kept), MaxMemories), Changed: true}, nil
}

// parseNotes reads "[kind] text" lines (a list marker before them is
// allowed); other lines are ignored.
func parseNotes(answer string) []MemoryEntry {
	var out []MemoryEntry
	for _, line := range strings.Split(answer, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimSpace(strings.TrimLeft(line, "-*"))
		if !strings.HasPrefix(line, "[") {
			continue
		}
		kind, text, ok := strings.Cut(line[1:], "]")
		kind, text = strings.ToLower(strings.TrimSpace(kind)), strings.TrimSpace(text)
		if !ok || !slices.Contains(MemoryKinds, kind) || text == "" {
			continue
		}
		if utf8.RuneCountInString(text) > MaxMemoryText {
			text = strings.TrimSpace(string([]rune(text)[:MaxMemoryText]))
		}
		out = append(out, MemoryEntry{Kind: kind, Text: text})
	}
	return out
}
