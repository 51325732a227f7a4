package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/orchestrator"
)

// Every request the server bills is counted: a normal turn, a turn that
// esc aborted after one billed step (and the aborted request itself, which
// the provider bills too: estimated, issue 33), /compact's own request,
// and a task subagent's. /cost, the saved record and the session resumed
// with -c all show the sum.
func TestTUILedgerCountsEveryRequest(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	held := make(chan struct{})
	srv := fakemodel.New(t,
		// A normal turn.
		fakemodel.Reply{Text: "Answer one.", InputTokens: 100, OutputTokens: 10},
		// A turn aborted while the model thinks over a tool's result.
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "toolu_glob", Name: "glob", Input: `{"pattern":"*"}`}}, InputTokens: 200, OutputTokens: 40},
		fakemodel.Reply{Reached: held, Hold: hold, Text: "Never shown."},
		// /compact.
		fakemodel.Reply{Text: "The user asked two questions.", InputTokens: 300, OutputTokens: 30},
		// A subagent call: the parent's step, the subagent's, the answer.
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "toolu_task", Name: "task", Input: `{"description":"look around","prompt":"List the files."}`}}, InputTokens: 50, OutputTokens: 5},
		fakemodel.Reply{Text: "There are no files.", InputTokens: 70, OutputTokens: 7},
		fakemodel.Reply{Text: "Subagent done.", InputTokens: 80, OutputTokens: 8},
	)
	// What the server reported; the aborted request adds its estimate.
	reported := llm.Usage{InputTokens: 800, OutputTokens: 100}
	billedRe := regexp.MustCompile(`billed +(\d+) in / (\d+) out tokens`)

	home := t.TempDir()
	env := append(headlessEnv(t, providers[0], srv.URL), "SHIRO_HOME="+home, "TERM=xterm-256color")
	start := func(args ...string) *tmuxSession {
		s := newTmux(t, ws, tuiWidth, tuiHeight, env, append([]string{testenv.Binary(t), "--model", "claude-sonnet-4-5"}, args...)...)
		s.run("set-option", "-t", s.name, "remain-on-exit", "on")
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("screen at the end:\n%s", s.screen())
			}
		})
		s.waitFor("sandbox ready", 2*time.Minute)
		return s
	}

	s := start()
	s.keys("one", true)
	s.waitFor("Answer one.", 20*time.Second)
	s.keys("two", true)
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatalf("the second step never reached the model:\n%s", s.screen())
	}
	s.press("Escape")
	s.waitIdle(10 * time.Second)
	s.keys("/compact", true)
	s.waitFor("compacted", 20*time.Second)
	s.keys("three", true)
	s.waitFor("Subagent done.", 30*time.Second)
	s.keys("/cost", true)
	scr := s.waitFor("billed ", 5*time.Second)
	shown := billedRe.FindString(scr)
	s.dismiss("billed ")
	s.quit()

	// The saved record.
	entries, err := os.ReadDir(filepath.Join(home, "sessions"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("sessions: %v %v", entries, err)
	}
	data, err := os.ReadFile(filepath.Join(home, "sessions", entries[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		InputTokens, OutputTokens int
		CostUSD                   *float64 `json:"costUsd"`
		TokensEstimated           bool     `json:"tokensEstimated"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	// The aborted request's input is estimated (it had streamed nothing).
	if rec.InputTokens <= reported.InputTokens || rec.OutputTokens != reported.OutputTokens || !rec.TokensEstimated || rec.CostUSD == nil {
		t.Errorf("record: %d in / %d out (estimated %v), cost %v; want more than %v in, estimated", rec.InputTokens, rec.OutputTokens, rec.TokensEstimated, rec.CostUSD, reported)
	}
	if rec.CostUSD == nil {
		t.FailNow()
	}
	usd := *rec.CostUSD
	if low, _ := orchestrator.Cost("claude-sonnet-4-5", reported); usd <= low {
		t.Errorf("cost %v, want more than the reported requests' %v", usd, low)
	}
	billed := fmt.Sprintf("billed    %d in / %d out tokens", rec.InputTokens, rec.OutputTokens)
	spend := "spend     " + orchestrator.FormatUSD(usd)
	if shown != billed || !strings.Contains(scr, spend) {
		t.Errorf("/cost shows %q, want %q and %q:\n%s", shown, billed, spend, scr)
	}

	// shiro -c starts from the totals.
	s = start("-c")
	s.keys("/cost", true)
	scr = s.waitFor(billed, 5*time.Second)
	if !strings.Contains(scr, spend) {
		t.Errorf("/cost after -c lacks %q:\n%s", spend, scr)
	}
	s.dismiss(billed)
	s.quit()
}
