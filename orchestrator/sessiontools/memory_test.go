package sessiontools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func callMemory(t *testing.T, m *Memory, name, input string) (string, bool) {
	t.Helper()
	for _, tool := range MemoryTools(m) {
		if tool.Name() == name {
			res, err := tool.Run(t.Context(), json.RawMessage(input), nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return res.Output, res.IsError
		}
	}
	t.Fatalf("no tool %s", name)
	return "", false
}

func TestRememberRecallForget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := NewMemory(dir, "abc")
	if m.Path != filepath.Join(dir, "memory", "abc.json") {
		t.Errorf("path %s", m.Path)
	}
	steps := []struct {
		name, tool, input, want string
		isError                 bool
	}{
		{"remember a fact", "remember", `{"kind":"fact","text":"  Tests run with make check  "}`, "Remembered as fact (1 stored): Tests run with make check", false},
		{"an exact duplicate is refused", "remember", `{"kind":"fact","text":"Tests run with make check"}`, "Already recorded: Tests run with make check", false},
		{"remember a gotcha", "remember", `{"kind":"gotcha","text":"The fake server serves replies in order"}`, "Remembered as gotcha (2 stored): The fake server serves replies in order", false},
		{"empty text is an error", "remember", `{"kind":"fact","text":"   "}`, "memory text is empty", true},
		{"an unknown kind is an error", "remember", `{"kind":"wish","text":"x"}`, `kind "wish" is not one of fact, decision, gotcha, command`, true},
		{"every term must match", "recall", `{"query":"MAKE tests"}`, "(fact) Tests run with make check", false},
		{"no match", "recall", `{"query":"make server"}`, `Nothing recorded about "make server".`, false},
		{"empty query is an error", "recall", `{"query":" "}`, "query is empty", true},
		{"forget no match", "forget", `{"text":"docker"}`, `No memory matches "docker".`, false},
		{"forget one, case-insensitive", "forget", `{"text":"FAKE SERVER"}`, "Forgot 1 memory.", false},
	}
	for _, s := range steps {
		got, isErr := callMemory(t, m, s.tool, s.input)
		if got != s.want || isErr != s.isError {
			t.Errorf("%s: got %q (error %v), want %q", s.name, got, isErr, s.want)
		}
	}
	// A recall counts a hit, saved to the file.
	if e := m.Entries(); len(e) != 1 || e[0].Hits != 1 {
		t.Errorf("entries %+v", e)
	}
	// Another Memory on the same file (another process) sees the notes.
	if got := NewMemory(dir, "abc").Block(); !strings.Contains(got, "- (fact) Tests run with make check") {
		t.Errorf("block %q", got)
	}
	m.Remember("decision", "use atomic writes")
	m.Remember("command", "go test -race ./...")
	if got, _ := callMemory(t, m, "forget", `{"text":"e"}`); got != "Forgot 3 memories." {
		t.Errorf("forget many: %q", got)
	}
}

func TestRememberCapsTextAndStore(t *testing.T) {
	t.Parallel()
	m := NewMemory(t.TempDir(), "k")
	got, _ := callMemory(t, m, "remember", fmt.Sprintf(`{"kind":"fact","text":%q}`, strings.Repeat("é", 500)))
	if e := m.Entries(); len(e) != 1 || len([]rune(e[0].Text)) != MaxMemoryText {
		t.Fatalf("the text was not cut at %d characters: %q", MaxMemoryText, got)
	}
	for i := range MaxMemories + 5 {
		if _, err := m.Remember("fact", fmt.Sprintf("note %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	e := m.Entries()
	if len(e) != MaxMemories || e[0].Text != "note 5" || e[len(e)-1].Text != fmt.Sprintf("note %d", MaxMemories+4) {
		t.Errorf("%d entries, first %q: the oldest were not the ones dropped", len(e), e[0].Text)
	}
}

func TestRecallReturnsFifteenNewestFirst(t *testing.T) {
	t.Parallel()
	m := NewMemory(t.TempDir(), "k")
	for i := range 20 {
		m.Remember("fact", fmt.Sprintf("build step %02d", i))
	}
	got, _ := m.Recall("build")
	lines := strings.Split(got, "\n")
	if len(lines) != 15 || lines[0] != "(fact) build step 19" || lines[14] != "(fact) build step 05" {
		t.Errorf("recall: %q", lines)
	}
}

func TestMemoryBlockTopTwentyByHits(t *testing.T) {
	t.Parallel()
	m := NewMemory(t.TempDir(), "k")
	if m.Block() != "" {
		t.Error("an empty store renders a block")
	}
	for i := range 25 {
		m.Remember("fact", fmt.Sprintf("note %02d", i))
	}
	m.Recall("note 03") // one hit: first, despite being old
	block := m.Block()
	lines := strings.Split(block, "\n")
	if len(lines) != 21 { // header + 20
		t.Fatalf("%d lines:\n%s", len(lines), block)
	}
	if lines[1] != "- (fact) note 03" || lines[2] != "- (fact) note 24" || strings.Contains(block, "note 04") {
		t.Errorf("order wrong:\n%s", block)
	}
}

func TestCorruptAndInvalidEntriesReadAsEmpty(t *testing.T) {
	t.Parallel()
	m := NewMemory(t.TempDir(), "k")
	os.MkdirAll(filepath.Dir(m.Path), 0o700)
	os.WriteFile(m.Path, []byte("{not json"), 0o600)
	if len(m.Entries()) != 0 {
		t.Error("a corrupt file gave entries")
	}
	os.WriteFile(m.Path, []byte(`[{"id":"1","kind":"fact","text":"ok"},{"id":"2","kind":"bogus","text":"x"},{"kind":"fact","text":"no id"},42]`), 0o600)
	if e := m.Entries(); len(e) != 1 || e[0].Text != "ok" {
		t.Errorf("entries %+v", e)
	}
	if got, _ := m.Remember("fact", "second"); got != "Remembered as fact (2 stored): second" {
		t.Errorf("remember after filtering: %q", got)
	}
}

func TestMemoryCompact(t *testing.T) {
	t.Parallel()
	seed := func(t *testing.T) *Memory {
		m := NewMemory(t.TempDir(), "k")
		for _, n := range []string{"uses make check", "tests need docker", "make check runs the tests", "the API is v2"} {
			if _, err := m.Remember("fact", n); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.Recall("API"); err != nil { // recalled: kept verbatim
			t.Fatal(err)
		}
		return m
	}
	texts := func(m *Memory) []string {
		var out []string
		for _, e := range m.Entries() {
			out = append(out, fmt.Sprintf("[%s] %s (%d)", e.Kind, e.Text, e.Hits))
		}
		return out
	}

	t.Run("merges the unused notes and keeps recalled ones", func(t *testing.T) {
		t.Parallel()
		m := seed(t)
		var prompt string
		res, err := m.Compact(t.Context(), func(_ context.Context, p string) (string, error) {
			prompt = p
			// A note written by another process while the model thinks.
			if _, err := NewMemory(filepath.Dir(filepath.Dir(m.Path)), "k").Remember("gotcha", "written meanwhile"); err != nil {
				t.Fatal(err)
			}
			return "Here you go:\n- [command] make check runs the tests (needs docker)\n[FACT] the API is v2\n[bogus] nope\n", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(prompt, "the API is v2") || !strings.Contains(prompt, "[fact] tests need docker") {
			t.Errorf("prompt sent recalled notes or missed unused ones:\n%s", prompt)
		}
		want := []string{"[fact] the API is v2 (1)", "[gotcha] written meanwhile (0)", "[command] make check runs the tests (needs docker) (0)"}
		if got := texts(m); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("store\n got %q\nwant %q", got, want)
		}
		if !res.Changed || res.Before != 5 || res.After != 3 {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("an unparseable answer or a failure leaves the store alone", func(t *testing.T) {
		t.Parallel()
		for _, answer := range []func(context.Context, string) (string, error){
			func(context.Context, string) (string, error) { return "I merged them all for you.", nil },
			func(context.Context, string) (string, error) { return "", errors.New("overloaded") },
		} {
			m := seed(t)
			before := texts(m)
			res, err := m.Compact(t.Context(), answer)
			if res.Changed || strings.Join(texts(m), "|") != strings.Join(before, "|") {
				t.Errorf("store changed: %+v %v %q", res, err, texts(m))
			}
		}
	})
	t.Run("too few unused notes, or no model", func(t *testing.T) {
		t.Parallel()
		m := NewMemory(t.TempDir(), "k")
		_, _ = m.Remember("fact", "only one")
		called := false
		res, err := m.Compact(t.Context(), func(context.Context, string) (string, error) { called = true; return "", nil })
		if err != nil || res.Changed || called || res.Reason == "" {
			t.Errorf("%+v %v called=%v", res, err, called)
		}
		if _, err := m.Compact(t.Context(), nil); !errors.Is(err, ErrNoModel) || err.Error() != "no model available to summarize memory" {
			t.Errorf("no model: %v", err)
		}
	})
}
