package store

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/agent/llm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newStore(t *testing.T) *Store {
	t.Helper()
	return &Store{Dir: filepath.Join(t.TempDir(), "sessions")}
}

// put writes a record as a file, with the timestamps it carries.
func put(t *testing.T, s *Store, rec Record) {
	t.Helper()
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path(rec.ID), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func conversation() []llm.Message {
	return []llm.Message{
		llm.Text(llm.RoleUser, "fix the <build> & run the tests"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Type: llm.PartReasoning, Text: "think", Signature: "sig", Provider: "anthropic"},
			{Type: llm.PartToolCall, CallID: "c1", Name: "bash", Input: json.RawMessage(`{"command":"go test ./..."}`)},
		}},
		{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, CallID: "c1", Name: "bash", Output: "ok", IsError: true}}},
		llm.Text(llm.RoleAssistant, "done"),
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	rec := NewRecord("/home/dev/p", "anthropic", "claude-sonnet-4-5")
	rec.InputTokens, rec.OutputTokens = 1200, 340
	rec.Todos = json.RawMessage(`[{"content":"x","status":"pending"}]`)
	rec.Messages = conversation()
	before := time.Now()
	if err := s.Save(&rec); err != nil {
		t.Fatal(err)
	}
	if rec.UpdatedAt.Before(before) || rec.CreatedAt.After(rec.UpdatedAt) {
		t.Errorf("stamps: created %v updated %v", rec.CreatedAt, rec.UpdatedAt)
	}
	if rec.Title != "fix the <build> & run the tests" {
		t.Errorf("title %q", rec.Title)
	}
	got, err := s.Load(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, rec)
	}

	data, err := os.ReadFile(s.path(rec.ID))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{"{\n  \"id\": \"" + rec.ID + "\",\n  \"createdAt\": ", `"title": "fix the <build> & run the tests"`, `"inputTokens": 1200`, "\n}\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("file lacks %q:\n%s", want, text)
		}
	}
	assertMode(t, s.path(rec.ID), 0o600)
	assertMode(t, s.Dir, 0o700)
}

func TestSaveStampsUpdatedAtAndKeepsTheRest(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	rec := Record{Cwd: "/p", Title: "kept", CreatedAt: t0, UpdatedAt: t0, Messages: conversation()}
	if err := s.Save(&rec); err != nil {
		t.Fatal(err)
	}
	if !validID(rec.ID) {
		t.Errorf("Save gave the id %q", rec.ID)
	}
	if !rec.CreatedAt.Equal(t0) || !rec.UpdatedAt.After(t0) || rec.Title != "kept" {
		t.Errorf("got created %v updated %v title %q", rec.CreatedAt, rec.UpdatedAt, rec.Title)
	}
	empty := Record{}
	if err := s.Save(&empty); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(s.path(empty.ID))
	if !strings.Contains(string(data), `"messages": []`) || empty.Title != Untitled {
		t.Errorf("empty record: title %q\n%s", empty.Title, data)
	}
}

func TestSaveRefusesBadIDs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	for _, id := range []string{"../../etc/passwd", "0197A3C2-0000-7000-8000-000000000000", "x"} {
		rec := Record{ID: id}
		if err := s.Save(&rec); !errors.Is(err, ErrBadID) {
			t.Errorf("Save(%q) = %v, want ErrBadID", id, err)
		}
		if _, err := s.Load(id); !errors.Is(err, ErrBadID) {
			t.Errorf("Load(%q) = %v, want ErrBadID", id, err)
		}
	}
}

func TestTitle(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 59) + "é" + "tail"
	tests := []struct {
		name string
		msgs []llm.Message
		want string
	}{
		{name: "no messages", want: "untitled"},
		{name: "no user message", msgs: []llm.Message{llm.Text(llm.RoleAssistant, "hi")}, want: "untitled"},
		{name: "first user message", msgs: []llm.Message{llm.Text(llm.RoleUser, "one"), llm.Text(llm.RoleUser, "two")}, want: "one"},
		{name: "exactly 60 characters stay whole", msgs: []llm.Message{llm.Text(llm.RoleUser, strings.Repeat("b", 60))}, want: strings.Repeat("b", 60)},
		{name: "longer is cut at 60 characters plus dots", msgs: []llm.Message{llm.Text(llm.RoleUser, long)}, want: strings.Repeat("a", 59) + "é..."},
		{name: "white space collapses", msgs: []llm.Message{llm.Text(llm.RoleUser, "  fix\n\tthe   bug \n")}, want: "fix the bug"},
		{
			name: "a blank user message is skipped",
			msgs: []llm.Message{llm.Text(llm.RoleUser, " \n"), llm.Text(llm.RoleUser, "real")},
			want: "real",
		},
		{
			name: "text parts join; other parts do not count",
			msgs: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: "a"}, {Type: llm.PartReasoning, Text: "r"}, {Type: llm.PartText, Text: "b"}}}},
			want: "a b",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Title(tt.msgs); got != tt.want {
				t.Errorf("Title = %q, want %q", got, tt.want)
			}
		})
	}
	if n := len([]rune(Title([]llm.Message{llm.Text(llm.RoleUser, long)}))); n != 63 {
		t.Errorf("a cut title has %d characters, want 63", n)
	}
}

// TestCrashMidWrite leaves what a crash during a save leaves behind (a
// temporary file with half a record) and checks that the record is still
// whole, that List ignores the leftover, and that the next save succeeds.
func TestCrashMidWrite(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	rec := NewRecord("/p", "anthropic", "m")
	rec.Messages = conversation()
	if err := s.Save(&rec); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(s.path(rec.ID))
	if err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(s.Dir, "."+rec.ID+".json.tmp-123")
	if err := os.WriteFile(leftover, full[:len(full)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load(rec.ID)
	if err != nil || got.ID != rec.ID || len(got.Messages) != len(rec.Messages) {
		t.Fatalf("Load after a crash: %+v, %v", got, err)
	}
	list, err := s.List(0)
	if err != nil || len(list) != 1 || list[0].ID != rec.ID {
		t.Fatalf("List after a crash: %+v, %v", list, err)
	}
	rec.Messages = append(rec.Messages, llm.Text(llm.RoleUser, "more"))
	if err := s.Save(&rec); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load(rec.ID); len(got.Messages) != 5 {
		t.Errorf("after the next save: %d messages", len(got.Messages))
	}
}

// TestSaveFailureKeepsTheOldRecord makes the rename fail (the target is a
// non-empty directory) after the temporary file was written.
func TestSaveFailureKeepsTheOldRecord(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	rec := NewRecord("/p", "anthropic", "m")
	if err := os.MkdirAll(filepath.Join(s.path(rec.ID), "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(&rec); err == nil {
		t.Fatal("save over a directory succeeded")
	}
	entries, _ := os.ReadDir(s.Dir)
	if len(entries) != 1 {
		t.Errorf("a temporary file was left behind: %v", entries)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := Record{ID: NewID(), Cwd: "/a", UpdatedAt: t0.Add(1 * time.Minute), Messages: conversation()}
	b := Record{ID: NewID(), Cwd: "/b", UpdatedAt: t0.Add(3 * time.Minute)}
	c := Record{ID: NewID(), Cwd: "/a", UpdatedAt: t0.Add(2 * time.Minute)}
	for _, r := range []Record{a, b, c} {
		put(t, s, r)
	}
	// Things that are not records.
	writeFile(t, filepath.Join(s.Dir, NewID()+".json"), `{"id": "trunc`)
	writeFile(t, filepath.Join(s.Dir, NewID()+".json"), `{"id": "`+NewID()+`"}`) // another record's id
	writeFile(t, filepath.Join(s.Dir, "notes.txt"), "hi")
	writeFile(t, filepath.Join(s.Dir, "."+NewID()+".json.tmp-1"), `{}`)
	if err := os.Mkdir(filepath.Join(s.Dir, NewID()+".json"), 0o700); err != nil {
		t.Fatal(err)
	}

	got, err := s.List(0)
	if err != nil {
		t.Fatal(err)
	}
	if ids := idsOf(got); !reflect.DeepEqual(ids, []string{b.ID, c.ID, a.ID}) {
		t.Errorf("order %v, want b c a", ids)
	}
	if got[2].Messages != nil {
		t.Error("List returned messages")
	}
	got, _ = s.List(2)
	if ids := idsOf(got); !reflect.DeepEqual(ids, []string{b.ID, c.ID}) {
		t.Errorf("limit 2: %v", ids)
	}
}

func TestListMissingDirectory(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	got, err := s.List(0)
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := s.Latest("/p"); !errors.Is(err, ErrNoSessionHere) {
		t.Errorf("Latest = %v", err)
	}
}

func TestLatest(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	old := Record{ID: NewID(), Cwd: "/p", UpdatedAt: t0, Messages: conversation()}
	newer := Record{ID: NewID(), Cwd: "/p", UpdatedAt: t0.Add(time.Hour), Messages: conversation()[:1]}
	other := Record{ID: NewID(), Cwd: "/q", UpdatedAt: t0.Add(2 * time.Hour)}
	for _, r := range []Record{old, newer, other} {
		put(t, s, r)
	}
	got, err := s.Latest("/p")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != newer.ID || len(got.Messages) != 1 {
		t.Errorf("Latest = %s with %d messages, want %s with 1", got.ID, len(got.Messages), newer.ID)
	}
	_, err = s.Latest("/elsewhere")
	if !errors.Is(err, ErrNoSessionHere) || err.Error() != "no saved session for this directory" {
		t.Errorf("Latest elsewhere = %v", err)
	}
}

func TestLatestSearchesOnlyTheHundredNewest(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	put(t, s, Record{ID: NewID(), Cwd: "/old", UpdatedAt: t0})
	for i := range 100 {
		put(t, s, Record{ID: NewID(), Cwd: "/busy", UpdatedAt: t0.Add(time.Duration(i+1) * time.Second)})
	}
	if _, err := s.Latest("/old"); !errors.Is(err, ErrNoSessionHere) {
		t.Errorf("Latest found the 101st newest session: %v", err)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ids := []string{
		"0197a3c2-1111-7000-8000-000000000001",
		"0197a3c2-1122-7000-8000-000000000002",
		"0197a3c2-2222-7000-8000-000000000003",
	}
	for i, id := range ids {
		put(t, s, Record{ID: id, UpdatedAt: t0.Add(time.Duration(i) * time.Minute), Messages: conversation()})
	}
	tests := []struct {
		query     string
		want      string   // "" means an error
		ambiguous []string // the candidates of an ambiguous prefix, newest first
	}{
		{query: ids[1], want: ids[1]},
		{query: "0197A3C2-2", want: ids[2]},
		{query: "0197a3c2-112", want: ids[1]},
		{query: " 0197a3c2-2222 ", want: ids[2]},
		{query: "0197a3c2-11", ambiguous: []string{ids[1], ids[0]}},
		{query: "0197a3c2", ambiguous: []string{ids[2], ids[1], ids[0]}},
		{query: "ffff"},          // none
		{query: ""},              // empty matches nothing
		{query: "../0197a3c2-2"}, // not an id
		{query: "0197a3c2-9999-7000-8000-000000000009"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			got, err := s.Resolve(tt.query)
			switch {
			case tt.want != "":
				if err != nil || got.ID != tt.want || len(got.Messages) != 4 {
					t.Errorf("Resolve(%q) = %s (%d messages), %v; want %s", tt.query, got.ID, len(got.Messages), err, tt.want)
				}
			case tt.ambiguous != nil:
				var amb *AmbiguousError
				if !errors.As(err, &amb) {
					t.Fatalf("Resolve(%q) = %s, %v; want ambiguous", tt.query, got.ID, err)
				}
				var cand []string
				for _, r := range amb.Candidates {
					cand = append(cand, r.ID)
				}
				if !slices.Equal(cand, tt.ambiguous) {
					t.Errorf("candidates %v, want %v", cand, tt.ambiguous)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, `session id "`+tt.query+`" is ambiguous`) {
					t.Errorf("error %q does not say the prefix is ambiguous", msg)
				}
				for _, id := range tt.ambiguous {
					if !strings.Contains(msg, "\n  "+amb.Short[id]+"  ") || amb.Short[id] == "" {
						t.Errorf("error %q does not list %s as %q", msg, id, amb.Short[id])
					}
				}
			default:
				var nm *NoMatchError
				if !errors.As(err, &nm) {
					t.Fatalf("Resolve(%q) = %s, %v; want no match", tt.query, got.ID, err)
				}
				if want := `no session matching "` + tt.query + `"`; err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
			}
		})
	}
}

func TestResolvePrefixBeyondTheHundredNewest(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	old := Record{ID: NewID(), UpdatedAt: t0}
	put(t, s, old)
	for i := range 100 {
		put(t, s, Record{ID: NewID(), UpdatedAt: t0.Add(time.Duration(i+1) * time.Second)})
	}
	if got, err := s.Resolve(old.ID); err != nil || got.ID != old.ID {
		t.Errorf("exact id: %s, %v", got.ID, err)
	}
	// The shown id is unique among all saved sessions, so it must resolve
	// however old the session is.
	short := s.Short(old.ID)
	if got, err := s.Resolve(short); err != nil || got.ID != old.ID {
		t.Errorf("shown id %s of the 101st newest: %s, %v", short, got.ID, err)
	}
}

func TestAbbrev(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ids  []string
		want map[string]string
	}{
		{"alone: 8 characters", []string{"0197a3c2-1111-7000-8000-000000000001"},
			map[string]string{"0197a3c2-1111-7000-8000-000000000001": "0197a3c2"}},
		{"different clocks: 8 characters", []string{"0197a3c2-1111-7000-8000-000000000001", "0197a3c3-1111-7000-8000-000000000001"},
			map[string]string{"0197a3c2-1111-7000-8000-000000000001": "0197a3c2", "0197a3c3-1111-7000-8000-000000000001": "0197a3c3"}},
		{"same first 8: past the dash", []string{
			"0197a3c2-1111-7000-8000-000000000001",
			"0197a3c2-1122-7000-8000-000000000002",
			"0197a3c2-2222-7000-8000-000000000003",
		}, map[string]string{
			"0197a3c2-1111-7000-8000-000000000001": "0197a3c2-111",
			"0197a3c2-1122-7000-8000-000000000002": "0197a3c2-112",
			"0197a3c2-2222-7000-8000-000000000003": "0197a3c2-2",
		}},
		{"same millisecond: into the random bits", []string{
			"0197a3c2-1111-7abc-8000-000000000001",
			"0197a3c2-1111-7abd-8000-000000000002",
		}, map[string]string{
			"0197a3c2-1111-7abc-8000-000000000001": "0197a3c2-1111-7abc",
			"0197a3c2-1111-7abd-8000-000000000002": "0197a3c2-1111-7abd",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Abbrev(tt.ids); !maps.Equal(got, tt.want) {
				t.Errorf("Abbrev = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestShortIDsOfSessionsMadeTogetherAreUniqueAndResolve(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	var ids []string
	for range 50 { // all within a few milliseconds: one clock prefix
		rec := Record{ID: NewID(), Messages: conversation()}
		put(t, s, rec)
		ids = append(ids, rec.ID)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		short := s.Short(id)
		if len(short) < MinAbbrev || !strings.HasPrefix(id, short) || seen[short] {
			t.Fatalf("Short(%s) = %q: not a unique prefix of at least %d", id, short, MinAbbrev)
		}
		seen[short] = true
		if got, err := s.Resolve(short); err != nil || got.ID != id {
			t.Errorf("Resolve(%s) = %s, %v; want %s", short, got.ID, err, id)
		}
	}
	// 50 ids in far less than the 65 s one 8-character clock prefix lasts:
	// at least two of a row share it.
	i := 1
	for i < len(ids) && ids[i][:8] != ids[i-1][:8] {
		i++
	}
	if _, err := s.Resolve(ids[i][:8]); !errors.As(err, new(*AmbiguousError)) {
		t.Errorf("the shared first 8 characters resolved: %v", err)
	}
}

func TestLoadMissing(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if _, err := s.Load(NewID()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load = %v, want not exist", err)
	}
}

func TestNewID(t *testing.T) {
	t.Parallel()
	before := time.Now().UnixMilli()
	id := NewID()
	after := time.Now().UnixMilli()
	if !validID(id) {
		t.Fatalf("%q is not a UUID", id)
	}
	if id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) {
		t.Errorf("%s: want version 7, variant 10", id)
	}
	var ms int64
	for _, c := range strings.ReplaceAll(id[:13], "-", "") {
		ms = ms<<4 | int64(strings.IndexRune("0123456789abcdef", c))
	}
	if ms < before || ms > after {
		t.Errorf("timestamp %d outside [%d, %d]", ms, before, after)
	}
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
}

func idsOf(recs []Record) []string {
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	return ids
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func assertMode(t *testing.T, name string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), want)
	}
}

func TestInvalidToolInputSurvives(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	bad := json.RawMessage(`{"command": "ls`) // a stream cut short
	msgs := []llm.Message{
		llm.Text(llm.RoleUser, "go"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Type: llm.PartToolCall, CallID: "c1", Name: "bash", Input: bad},
			{Type: llm.PartToolCall, CallID: "c2", Name: "bash", Input: json.RawMessage(`{"command":"pwd"}`)},
		}},
	}
	rec := Record{Messages: msgs}
	if err := s.Save(&rec); err != nil {
		t.Fatal(err)
	}
	if string(msgs[1].Parts[0].Input) != string(bad) {
		t.Error("Save changed the caller's messages")
	}
	got, err := s.Load(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Messages, msgs) {
		t.Errorf("got %s / %s", got.Messages[1].Parts[0].Input, got.Messages[1].Parts[1].Input)
	}
}
