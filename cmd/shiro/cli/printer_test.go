package cli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/orchestrator/workcopy"
	"github.com/shiroagent/shiro/sandbox/egress"
	"github.com/shiroagent/shiro/tools/jobs"
)

// The headless stderr lines (spec §18): every call gets its [tool] line,
// denied ones too; a guard's refusal is a notice then the [denied] line;
// a tool error is shown whole.
func TestHeadlessPrinterStderr(t *testing.T) {
	var out, errOut strings.Builder
	p := newHeadlessPrinter(&out, &errOut, false)
	in := json.RawMessage(`{ "command": "rm -rf /" }`)
	guard := `Blocked by the guard plugin: refusing "rm -rf /" (recursive or forced rm). Ask the user to run it themselves if it is really needed.`
	for _, e := range []agent.Event{
		{Type: agent.EventToolStart, ID: "c1", Name: "write_file"},
		{Type: agent.EventToolDenied, ID: "c1", Name: "write_file", Input: json.RawMessage(`{"path":"a.txt"}`), Reason: agent.NoApprover},
		{Type: agent.EventNotice, Text: guard},
		{Type: agent.EventToolDenied, ID: "c2", Name: "bash", Input: in, Reason: guard},
		{Type: agent.EventToolCall, ID: "c3", Name: "bash", Input: json.RawMessage(`{"command":"make"}`)},
		{Type: agent.EventToolError, ID: "c3", Name: "bash", Error: "make: *** no rule\nline two\nline three"},
		{Type: agent.EventText, Text: "ok"},
		{Type: agent.EventDone},
	} {
		p.event(e)
	}
	want := `[tool] write_file {"path":"a.txt"}
[denied] write_file (run with --yolo to allow tool use in headless mode)
[notice] ` + guard + `
[tool] bash {"command":"rm -rf /"}
[denied] bash (refused by the guard plugin, not an approval: refusing "rm -rf /" (recursive or forced rm). Ask the user to run it themselves if it is really needed.; --yolo does not change it)
[tool] bash {"command":"make"}
[tool-error] bash: make: *** no rule
line two
line three
`
	if errOut.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut.String(), want)
	}
	if out.String() != "ok\n" {
		t.Errorf("stdout %q", out.String())
	}
}

// TestHeadlessPrinterToolLineAndBlocks: the [tool] line shows the command
// as written (no HTML escaping), and each text block of the assistant ends
// its line before a [tool] line or the next block.
func TestHeadlessPrinterToolLineAndBlocks(t *testing.T) {
	var out, errOut strings.Builder
	p := newHeadlessPrinter(&out, &errOut, false)
	for _, e := range []agent.Event{
		{Type: agent.EventText, Text: "first "},
		{Type: agent.EventText, Text: "block."},
		{Type: agent.EventToolStart, ID: "c1", Name: "bash"},
		{Type: agent.EventToolCall, ID: "c1", Name: "bash", Input: json.RawMessage(`{"command":"echo a > /dev/null && echo '<b>'"}`)},
		{Type: agent.EventToolResult, ID: "c1", Name: "bash", Output: "<b>"},
		{Type: agent.EventText, Text: "second block."},
		{Type: agent.EventDone},
	} {
		p.event(e)
	}
	if want := `[tool] bash {"command":"echo a > /dev/null && echo '<b>'"}` + "\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
	if want := "first block.\nsecond block.\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	var js strings.Builder
	pj := newHeadlessPrinter(&js, &errOut, true)
	pj.event(agent.Event{Type: agent.EventToolCall, ID: "c1", Name: "bash", Input: json.RawMessage(`{"command":"a > b && c"}`)})
	if !strings.Contains(js.String(), `"input":{"command":"a > b && c"}`) {
		t.Errorf("--json escapes the command: %s", js.String())
	}
}

// TestHeadlessPrinterNames: a name the sandbox chose is quoted when it
// holds a control character; the [tool] line and --json escape what a
// terminal would act on, and --json keeps the exact text.
func TestHeadlessPrinterNames(t *testing.T) {
	t.Run("a host and paths with escapes are quoted", func(t *testing.T) {
		var out, errOut strings.Builder
		p := newHeadlessPrinter(&out, &errOut, false)
		p.network(egress.Record{Host: "evil\x1b]2;t\x07.example", Port: 80, Decision: egress.DecisionDeny, Rule: "no rule"})
		p.copyChanges(workcopy.Changes{Files: []checkpoint.FileChange{{Path: "a\x1b[2Jb.txt", Action: checkpoint.Created}}}, nil)
		for _, want := range []string{`[network] deny "evil\x1b]2;t\a.example":80`, `"a\x1b[2Jb.txt"`} {
			if !strings.Contains(errOut.String(), want) {
				t.Errorf("stderr lacks %s:\n%s", want, errOut.String())
			}
		}
	})
	t.Run("the tool line escapes C1 and DEL", func(t *testing.T) {
		var out, errOut strings.Builder
		p := newHeadlessPrinter(&out, &errOut, false)
		p.event(agent.Event{Type: agent.EventToolCall, ID: "c1", Name: "bash", Input: json.RawMessage("{\"command\":\"echo \u009b2J\x7f\"}")})
		if want := `[tool] bash {"command":"echo \u009b2J\u007f"}` + "\n"; errOut.String() != want {
			t.Errorf("stderr %q, want %q", errOut.String(), want)
		}
	})
	t.Run("json keeps the text exactly, escaped", func(t *testing.T) {
		var out, errOut strings.Builder
		p := newHeadlessPrinter(&out, &errOut, true)
		text := "a\x1b]52;c;AA\x07\u009b2J\u202eb"
		p.event(agent.Event{Type: agent.EventText, Text: text})
		line := out.String()
		for i := 0; i < len(line)-1; i++ {
			if c := line[i]; c < 0x20 || c == 0x7f || c == 0xc2 && line[i+1] < 0xa0 || c == 0xe2 && strings.HasPrefix(line[i:], "\u202e") {
				t.Fatalf("raw control in the JSON line at %d: %q", i, line)
			}
		}
		var ev agent.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Text != text {
			t.Errorf("decoded %q (%v), want %q", ev.Text, err, text)
		}
	})
}

// The session's one stream prints as the turn's events and the separate
// callbacks did before it: a notice from before the turn (an MCP server
// that failed) first among the turn's events, progress as written, a
// failed save and connections on their own lines; the events headless
// does not show print nothing. JSON and text alike.
func TestHeadlessPrinterSessionEvents(t *testing.T) {
	rec := egress.Record{Host: "example.com", Port: 443, Decision: egress.DecisionDeny, Rule: "no rule"}
	stream := []orchestrator.Event{
		orchestrator.ProgressEvent{Text: "building the image\nStep 1/"},
		orchestrator.NoticeEvent{Text: "mcp dies failed: exit status 1"},
		orchestrator.ProgressEvent{Text: "2\n"},
		orchestrator.TurnEvent{Event: agent.Event{Type: agent.EventNotice, Text: "the sandbox's copy is new"}},
		orchestrator.HistoryEvent{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}},
		orchestrator.TurnEvent{Event: agent.Event{Type: agent.EventText, Text: "hello"}},
		orchestrator.NetworkEvent{Record: rec},
		orchestrator.UsageEvent{Request: llm.Usage{InputTokens: 3}},
		orchestrator.TodosEvent{},
		orchestrator.SubagentEvent{},
		orchestrator.NoticeEvent{Text: "mcp slow failed: timeout"},
		orchestrator.TurnEvent{Event: agent.Event{Type: agent.EventDone}},
		orchestrator.SaveErrorEvent{Err: errors.New("disk full")},
	}
	for _, asJSON := range []bool{false, true} {
		var out, errOut, wantOut, wantErr strings.Builder
		p := newHeadlessPrinter(&out, &errOut, asJSON)
		for _, e := range stream {
			p.sessionEvent(e)
		}
		p.flushNotices()

		// Before: progress straight to stderr, the MCP notice emitted by
		// the next Send, connections and save errors by their callbacks.
		old := newHeadlessPrinter(&wantOut, &wantErr, asJSON)
		wantErr.WriteString("building the image\nStep 1/2\n")
		for _, e := range []agent.Event{
			{Type: agent.EventNotice, Text: "mcp dies failed: exit status 1"},
			{Type: agent.EventNotice, Text: "the sandbox's copy is new"},
			{Type: agent.EventText, Text: "hello"},
		} {
			old.event(e)
		}
		old.network(rec)
		old.event(agent.Event{Type: agent.EventNotice, Text: "mcp slow failed: timeout"})
		old.event(agent.Event{Type: agent.EventDone})
		wantErr.WriteString("[notice] saving the session failed: disk full\n")

		if out.String() != wantOut.String() || errOut.String() != wantErr.String() {
			t.Errorf("json %v:\nstdout %q\nwant   %q\nstderr %q\nwant   %q", asJSON, out.String(), wantOut.String(), errOut.String(), wantErr.String())
		}
	}
}

// A job's end is one [job] line on stderr (its start is its bash call's
// [tool] line); --json prints an event for each.
func TestHeadlessPrinterJobs(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	started := orchestrator.JobEvent{Event: jobs.Event{Kind: jobs.EventStarted, Status: jobs.Status{ID: "job-1", Command: "npm run dev", State: jobs.StateRunning, Started: start}}}
	exited := orchestrator.JobEvent{Event: jobs.Event{Kind: jobs.EventExited, Status: jobs.Status{ID: "job-1", Command: "npm run dev", State: jobs.StateExited, Code: 1, Started: start, Ended: start.Add(12 * time.Second)}}}

	var out, errOut strings.Builder
	p := newHeadlessPrinter(&out, &errOut, false)
	p.sessionEvent(started)
	p.sessionEvent(exited)
	if got, want := errOut.String(), "[job] job-1 exited with code 1 after 12s: npm run dev\n"; got != want || out.Len() != 0 {
		t.Errorf("stderr %q, want %q (stdout %q)", got, want, out.String())
	}

	out.Reset()
	p = newHeadlessPrinter(&out, &errOut, true)
	p.sessionEvent(started)
	p.sessionEvent(exited)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"type":"job","event":"started","id":"job-1"`) || !strings.Contains(lines[1], `"event":"exited"`) || !strings.Contains(lines[1], `"code":1`) {
		t.Errorf("--json: %q", lines)
	}
}
