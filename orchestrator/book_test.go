package orchestrator

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/local"
)

// billedModel answers every request with a text and reports usage.
type billedModel struct {
	id    string
	usage llm.Usage
}

func (m billedModel) Info() llm.ModelInfo { return llm.ModelInfo{Provider: "anthropic", Model: m.id} }
func (m billedModel) Stream(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		if !yield(llm.Event{Type: llm.EventText, Text: "ok"}, nil) {
			return
		}
		yield(llm.Event{Type: llm.EventFinish, Message: llm.Text(llm.RoleAssistant, "ok"), Usage: m.usage}, nil)
	}
}

func TestSessionOwnsItsRecordAndLedger(t *testing.T) {
	st := &store.Store{Dir: t.TempDir()}
	ws := t.TempDir()
	model := billedModel{id: "claude-sonnet-4-5", usage: llm.Usage{InputTokens: 1000, OutputTokens: 100}}
	rec := store.NewRecord(ws, "anthropic", model.id)
	s, err := NewSession(SessionOptions{Workspace: ws, Model: model, Sandbox: SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: ws}, Store: st, Record: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(t.Context(), "hello"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := llm.Usage{InputTokens: 2000, OutputTokens: 200}
	usd, _ := Cost(model.id, want)
	if u := s.Usage(); u.Usage != want || u.CostUSD != usd || u.Unpriced {
		t.Errorf("usage %+v, want %+v at %v", u, want, usd)
	}
	id, err := s.Save()
	if err != nil || id != rec.ID {
		t.Fatalf("save: %q %v", id, err)
	}
	saved, err := st.Load(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if saved.InputTokens != 2000 || saved.OutputTokens != 200 || saved.CostUSD == nil || *saved.CostUSD != usd || len(saved.Messages) != 1 || saved.Title != "hello" {
		t.Errorf("record %+v", saved)
	}
	list, _ := st.List(0)
	if len(list) != 1 || list[0].MessageCount != 1 {
		t.Errorf("listed %+v", list)
	}

	// A switch of model is recorded; its requests are priced at its price.
	s.SetModel(billedModel{id: "made-up-model", usage: llm.Usage{InputTokens: 5, OutputTokens: 5}})
	if err := s.Send(t.Context(), "again"); err != nil {
		t.Fatal(err)
	}
	if u := s.Usage(); !u.Unpriced || u.CostUSD != usd || u.InputTokens != 2005 {
		t.Errorf("after an unpriced model: %+v", u)
	}

	// Clear starts a new, empty record; the old one is complete on disk.
	newID, err := s.Clear()
	if err != nil || newID == rec.ID {
		t.Fatalf("clear: %q %v", newID, err)
	}
	if u := s.Usage(); u != (Usage{}) || len(s.Messages()) != 0 || s.Saved().ID != newID {
		t.Errorf("after /clear: %+v, %d messages, id %s", u, len(s.Messages()), s.Saved().ID)
	}
	old, _ := st.Load(rec.ID)
	if old.Model != "made-up-model" || old.InputTokens != 2005 || old.CostUSD != nil || len(old.Messages) != 3 {
		t.Errorf("the old record: model %s, %d in, cost %v, %d messages", old.Model, old.InputTokens, old.CostUSD, len(old.Messages))
	}

	// Resume brings the history, the task list and the totals back.
	back, err := s.Resume(rec.ID[:8])
	if err != nil || back.ID != rec.ID {
		t.Fatalf("resume: %v", err)
	}
	if u := s.Usage(); u.InputTokens != 2005 || !u.Unpriced || len(s.Messages()) != 3 || s.Saved().ID != rec.ID {
		t.Errorf("after /resume: %+v, %d messages", u, len(s.Messages()))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The cleared session had no messages: it left no file.
	if _, err := st.Load(newID); err == nil {
		t.Error("an empty session was saved")
	}
}

// pinnedBackend opens a host sandbox that says it runs a pinned image.
type pinnedBackend struct{ sandbox.Backend }

const pinnedDigest = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

func (pinnedBackend) Name() string                                 { return "orchestrator-pinned-test" }
func (pinnedBackend) DefaultWorkspaceMode(sandbox.Settings) string { return sandbox.WorkspaceMount }
func (pinnedBackend) Open(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := local.New(spec.Workspace)
	return pinnedSandbox{sb}, err
}

type pinnedSandbox struct{ sandbox.Sandbox }

func (p pinnedSandbox) Info() sandbox.Info {
	info := p.Sandbox.Info()
	info.Image, info.ImageDigest = "registry.test/team/dev:1", pinnedDigest
	return info
}

var registerPinned sync.Once

func TestSessionRecordsTheImageDigest(t *testing.T) {
	t.Parallel()
	registerPinned.Do(func() { sandbox.Register(pinnedBackend{}) })
	st := &store.Store{Dir: t.TempDir()}
	ws := t.TempDir()
	model := billedModel{id: "claude-sonnet-4-5"}
	rec := store.NewRecord(ws, "anthropic", model.id)
	settings := sandbox.Settings{Backend: pinnedBackend{}.Name(), Network: sandbox.NetworkNone}
	s, err := NewSession(SessionOptions{Workspace: ws, Model: model, Sandbox: SandboxConfig{Settings: settings, Workspace: ws}, Store: st, Record: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.StartSandbox(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(t.Context(), "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(); err != nil {
		t.Fatal(err)
	}
	saved, err := st.Load(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Image != "registry.test/team/dev:1" || saved.ImageDigest != pinnedDigest {
		t.Errorf("the record holds image %q digest %q, want the sandbox's", saved.Image, saved.ImageDigest)
	}
}

// movedBackend reports a moved tag as it opens, and records each open's
// --pull.
type movedBackend struct {
	sandbox.Backend
	mu    sync.Mutex
	pulls []bool
}

func (*movedBackend) Name() string                                 { return "orchestrator-moved-test" }
func (*movedBackend) DefaultWorkspaceMode(sandbox.Settings) string { return sandbox.WorkspaceMount }
func (b *movedBackend) Open(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	b.mu.Lock()
	b.pulls = append(b.pulls, spec.Pull)
	b.mu.Unlock()
	if spec.TagMoved != nil && !spec.Pull {
		spec.TagMoved(sandbox.TagMove{Ref: "registry.test/team/dev:1", Old: pinnedDigest, New: "sha256:bbbbbbbbbbbbbbbb"})
	}
	return local.New(spec.Workspace)
}

var (
	moved         = &movedBackend{}
	registerMoved sync.Once
)

func TestSessionTakesTheImageAMovedTagNames(t *testing.T) {
	t.Parallel()
	registerMoved.Do(func() { sandbox.Register(moved) })
	ws := t.TempDir()
	rec := &recorder{}
	settings := sandbox.Settings{Backend: moved.Name(), Network: sandbox.NetworkNone}
	s, err := NewSession(SessionOptions{Workspace: ws, Model: billedModel{id: "m"}, Sandbox: SandboxConfig{Settings: settings, Workspace: ws}, Events: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.StartSandbox(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []ImageMovedEvent
	for _, e := range rec.all() {
		if m, ok := e.(ImageMovedEvent); ok {
			got = append(got, m)
		}
	}
	if len(got) != 1 || got[0].Ref != "registry.test/team/dev:1" || !strings.Contains(got[0].Notice(), "--pull") {
		t.Fatalf("moved events %+v", got)
	}
	if _, err := s.TakeNewImage(t.Context()); err != nil {
		t.Fatal(err)
	}
	moved.mu.Lock()
	pulls := slices.Clone(moved.pulls)
	moved.mu.Unlock()
	if !slices.Equal(pulls, []bool{false, true}) {
		t.Errorf("opens pulled %v, want the first not, the one after the yes with --pull", pulls)
	}
}
