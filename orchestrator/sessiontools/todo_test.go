package sessiontools

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTodoWrite(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		input   string
		want    string
		isError bool
	}{
		{
			name:  "one in progress, no warning",
			input: `{"todos":[{"content":"read code","status":"done"},{"content":"edit","status":"in_progress"},{"content":"test","status":"pending"}]}`,
			want:  "Task list updated: 1/3 done.\n[x] read code\n[~] edit\n[ ] test",
		},
		{
			name:  "two in progress warns",
			input: `{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"in_progress"}]}`,
			want:  "Task list updated: 0/2 done.\n[~] a\n[~] b\nWarning: 2 tasks are in_progress; keep it to one.",
		},
		{
			name:  "nothing in progress while work remains warns",
			input: `{"todos":[{"content":"a","status":"done"},{"content":"b","status":"pending"}]}`,
			want:  "Task list updated: 1/2 done.\n[x] a\n[ ] b\nWarning: nothing is in_progress; mark what you are working on.",
		},
		{
			name:  "only blocked work left: the blocked warning alone",
			input: `{"todos":[{"content":"a","status":"done"},{"content":"deploy","status":"blocked"}]}`,
			want:  "Task list updated: 1/2 done.\n[x] a\n[!] deploy\nWarning: \"deploy\" is blocked with no note saying why.",
		},
		{
			name:  "blocked with a note renders the note",
			input: `{"todos":[{"content":"deploy","status":"blocked","note":"no credentials"}]}`,
			want:  "Task list updated: 0/1 done.\n[!] deploy  (no credentials)",
		},
		{
			name:  "all done",
			input: `{"todos":[{"content":"a","status":"done"}]}`,
			want:  "Task list updated: 1/1 done.\n[x] a",
		},
		{
			name:    "unknown status is an error",
			input:   `{"todos":[{"content":"a","status":"later"}]}`,
			want:    `task "a" has status "later"; use pending, in_progress, done or blocked`,
			isError: true,
		},
		{
			name:    "bad JSON is an error",
			input:   `{"todos":"x"}`,
			want:    "invalid arguments",
			isError: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			list := &TodoList{}
			res, err := TodoWrite{List: list}.Run(t.Context(), json.RawMessage(c.input), nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError != c.isError || !strings.HasPrefix(res.Output, c.want) || !c.isError && res.Output != c.want {
				t.Errorf("got %q (error %v), want %q", res.Output, res.IsError, c.want)
			}
			if c.isError && len(list.Items()) != 0 {
				t.Errorf("a refused call changed the list: %v", list.Items())
			}
		})
	}
}

func TestTodoListBlockReplaceAndRestore(t *testing.T) {
	t.Parallel()
	var notified [][]Todo
	list := &TodoList{OnChange: func(items []Todo) { notified = append(notified, items) }}
	if list.Block() != "" || list.JSON() != nil {
		t.Fatalf("an empty list renders %q / %s", list.Block(), list.JSON())
	}
	tw := TodoWrite{List: list}
	if _, err := tw.Run(t.Context(), json.RawMessage(`{"todos":[{"content":"old","status":"pending"}]}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Run(t.Context(), json.RawMessage(`{"todos":[{"content":"a","status":"done"},{"content":"b","status":"blocked","note":"waiting"},{"content":"c","status":"in_progress"}]}`), nil); err != nil {
		t.Fatal(err)
	}
	want := "Your task list (1/3 done, 1 blocked). Keep it current with todo_write:\n[x] a\n[!] b  (waiting)\n[~] c"
	if got := list.Block(); got != want {
		t.Errorf("block %q, want %q", got, want)
	}
	if len(notified) != 2 || len(notified[1]) != 3 {
		t.Errorf("OnChange saw %v", notified)
	}

	restored := &TodoList{}
	raw := json.RawMessage(`[{"content":"a","status":"done"},{"content":"x","status":"someday"},"junk",{"status":"pending"},{"content":"c","status":"in_progress"}]`)
	restored.Restore(raw)
	if got := restored.Items(); len(got) != 2 || got[0].Content != "a" || got[1].Content != "c" {
		t.Errorf("restored %v", got)
	}
	again := &TodoList{}
	again.Restore(list.JSON())
	if again.Block() != want {
		t.Errorf("round trip lost the list: %q", again.Block())
	}
}
