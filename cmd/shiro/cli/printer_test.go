package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/agent"
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
[denied] bash (run with --yolo to allow tool use in headless mode)
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
