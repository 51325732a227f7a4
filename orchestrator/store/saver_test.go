package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shiroagent/shiro/agent/llm"
)

// withMessages is rec holding the first n messages of a conversation.
func withMessages(rec Record, n int) Record {
	msgs := make([]llm.Message, n)
	for i := range msgs {
		msgs[i] = llm.Text(llm.RoleUser, fmt.Sprintf("message %d", i))
	}
	rec.Messages = msgs
	return rec
}

// saved reads rec's file; ok is false when there is none.
func saved(t *testing.T, s *Store, id string) (Record, bool) {
	t.Helper()
	rec, err := s.Load(id)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec, true
}

// The saver tests run in a synctest bubble: time is fake, so "400 ms
// later" is exact and takes no real time, and synctest.Wait (not a sleep)
// waits for the saver goroutine. The bubble also fails a test whose saver
// goroutine is still running at its end.

func TestSaverSavesABurstOnceAfterTheDelay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		sv := NewSaver(st, 400*time.Millisecond, nil)
		defer sv.Close()
		start := time.Now()
		base := NewRecord("/p", "anthropic", "m")

		sv.Update(withMessages(base, 1))
		time.Sleep(100 * time.Millisecond)
		sv.Update(withMessages(base, 2))
		time.Sleep(299 * time.Millisecond)
		synctest.Wait()
		if _, ok := saved(t, st, base.ID); ok {
			t.Fatal("saved before the delay")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		rec, ok := saved(t, st, base.ID)
		if !ok {
			t.Fatal("not saved after the delay")
		}
		if len(rec.Messages) != 2 || !rec.UpdatedAt.Equal(start.Add(400*time.Millisecond)) {
			t.Errorf("saved %d messages at +%v, want 2 at +400ms", len(rec.Messages), rec.UpdatedAt.Sub(start))
		}
	})
}

func TestSaverIsNotPostponedByASteadyStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		var saves []time.Duration
		sv := NewSaver(st, 400*time.Millisecond, nil)
		defer sv.Close()
		start := time.Now()
		base := NewRecord("/p", "anthropic", "m")
		for i := 1; i <= 10; i++ {
			sv.Update(withMessages(base, i))
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
			if rec, ok := saved(t, st, base.ID); ok {
				if at := rec.UpdatedAt.Sub(start); len(saves) == 0 || saves[len(saves)-1] != at {
					saves = append(saves, at)
				}
			}
		}
		want := []time.Duration{400 * time.Millisecond, 800 * time.Millisecond}
		if fmt.Sprint(saves) != fmt.Sprint(want) {
			t.Errorf("saves at %v, want %v", saves, want)
		}
	})
}

func TestSaverCloseAndFlushSaveAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		sv := NewSaver(st, 0, nil)
		start := time.Now()
		base := NewRecord("/p", "anthropic", "m")

		sv.Update(withMessages(base, 1))
		if err := sv.Flush(); err != nil {
			t.Fatal(err)
		}
		if rec, ok := saved(t, st, base.ID); !ok || !rec.UpdatedAt.Equal(start) {
			t.Fatalf("Flush: saved=%v at %v", ok, rec.UpdatedAt)
		}
		if err := sv.Flush(); err != nil { // nothing pending
			t.Fatal(err)
		}

		sv.Update(withMessages(base, 2))
		if err := sv.Close(); err != nil {
			t.Fatal(err)
		}
		if rec, _ := saved(t, st, base.ID); len(rec.Messages) != 2 {
			t.Fatalf("Close saved %d messages, want 2", len(rec.Messages))
		}
		if err := sv.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		sv.Update(withMessages(base, 3)) // after Close: saved at once
		if rec, _ := saved(t, st, base.ID); len(rec.Messages) != 3 {
			t.Fatalf("Update after Close saved %d messages, want 3", len(rec.Messages))
		}
	})
}

func TestSaverSkipsEmptySessions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		sv := NewSaver(st, 0, nil)
		sv.Update(NewRecord("/p", "anthropic", "m"))
		time.Sleep(time.Second)
		if err := sv.Close(); err != nil {
			t.Fatal(err)
		}
		if list, _ := st.List(0); len(list) != 0 || sv.ID() != "" {
			t.Errorf("an empty session was saved: %v (id %q)", list, sv.ID())
		}
	})
}

func TestSaverKeepsTheSessionsIdentity(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newStore(t)
		sv := NewSaver(st, 0, nil)
		defer sv.Close()
		start := time.Now()

		// Records without id or creation time: the first fixes them.
		sv.Update(withMessages(Record{Cwd: "/p"}, 1))
		id := sv.ID()
		if !validID(id) {
			t.Fatalf("id %q", id)
		}
		time.Sleep(time.Second)
		next := withMessages(Record{Cwd: "/p"}, 2)
		next.Messages[0] = llm.Text(llm.RoleUser, "summary of the compacted conversation")
		sv.Update(next)
		if err := sv.Flush(); err != nil {
			t.Fatal(err)
		}
		list, _ := st.List(0)
		if len(list) != 1 {
			t.Fatalf("%d records, want 1", len(list))
		}
		rec := list[0]
		if rec.ID != id || !rec.CreatedAt.Equal(start) || rec.Title != "message 0" {
			t.Errorf("got id %s created %v title %q; want %s, %v, %q", rec.ID, rec.CreatedAt, rec.Title, id, start, "message 0")
		}
	})
}

func TestSaverReportsAndRetriesFailures(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		blocker := filepath.Join(dir, "sessions")
		writeFile(t, blocker, "not a directory")
		st := &Store{Dir: blocker}
		var mu sync.Mutex
		var reported []error
		sv := NewSaver(st, 400*time.Millisecond, func(err error) {
			mu.Lock()
			reported = append(reported, err)
			mu.Unlock()
		})
		base := NewRecord("/p", "anthropic", "m")
		sv.Update(withMessages(base, 1))
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		mu.Lock()
		n := len(reported)
		mu.Unlock()
		if n != 1 || !strings.Contains(reported[0].Error(), "save session "+base.ID) {
			t.Fatalf("reported %v", reported)
		}

		if err := os.Remove(blocker); err != nil {
			t.Fatal(err)
		}
		if err := sv.Close(); err != nil { // the failed record is still pending
			t.Fatal(err)
		}
		if rec, ok := saved(t, st, base.ID); !ok || len(rec.Messages) != 1 {
			t.Errorf("not saved on Close after the failure")
		}
	})
}

// BenchmarkSave1000Messages measures a save of a long session (1,000
// messages, about 2 MB of JSON) including the fsync; it is why saves are
// debounced rather than made on every change.
func BenchmarkSave1000Messages(b *testing.B) {
	st := &Store{Dir: b.TempDir()}
	rec := NewRecord("/p", "anthropic", "m")
	output := strings.Repeat("some tool output line\n", 150)
	for i := range 250 {
		rec.Messages = append(rec.Messages,
			llm.Text(llm.RoleUser, fmt.Sprintf("please look at file %d", i)),
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Type: llm.PartText, Text: "Let me read it."},
				{Type: llm.PartToolCall, CallID: fmt.Sprint("c", i), Name: "read_file", Input: json.RawMessage(`{"path":"src/file.go"}`)},
			}},
			llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, CallID: fmt.Sprint("c", i), Name: "read_file", Output: output}}},
			llm.Text(llm.RoleAssistant, strings.Repeat("An explanation. ", 30)),
		)
	}
	for b.Loop() {
		if err := st.Save(&rec); err != nil {
			b.Fatal(err)
		}
	}
	fi, _ := os.Stat(st.path(rec.ID))
	b.ReportMetric(float64(fi.Size()), "bytes/file")
}
