package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

// The agent variants reach the wire: what is offered, the thinking level,
// the step cap. OpenAI's Responses API carries the level as
// reasoning.effort.
func TestHeadlessAgentVariants(t *testing.T) {
	t.Parallel()
	p := providers[0] // anthropic
	effort := func(req fakemodel.Request) any { return obj(req.JSON()["output_config"])["effort"] }

	t.Run("plan", func(t *testing.T) {
		t.Parallel()
		srv := fakemodel.New(t, fakemodel.Reply{Text: "The plan."})
		res := shiro(t, t.TempDir(), headlessEnv(t, p, srv.URL), "-p", "--agent", "plan", "--no-sandbox", "plan the change")
		if res.code != 0 {
			t.Fatalf("exit %d\nstderr: %s", res.code, res.stderr)
		}
		req := modelRequests(srv)[0]
		tools := p.tools(req.JSON())
		for _, w := range []string{"write_file", "edit_file", "multi_edit", "bash"} {
			if slices.Contains(tools, w) {
				t.Errorf("plan offers %s: %v", w, tools)
			}
		}
		if !slices.Contains(tools, "read_file") || !slices.Contains(tools, "grep") {
			t.Errorf("plan withholds the read tools: %v", tools)
		}
		if e := effort(req); e != "high" {
			t.Errorf("plan sends effort %v, want high", e)
		}
		if !strings.Contains(p.system(req.JSON()), "Agent mode: plan") {
			t.Error("the plan appendix is not in the system prompt")
		}
	})

	t.Run("default", func(t *testing.T) {
		t.Parallel()
		srv := fakemodel.New(t, fakemodel.Reply{Text: "Hi."})
		res := shiro(t, t.TempDir(), headlessEnv(t, p, srv.URL), "-p", "--no-sandbox", "hi")
		if res.code != 0 {
			t.Fatalf("exit %d\nstderr: %s", res.code, res.stderr)
		}
		req := modelRequests(srv)[0]
		if e := effort(req); e != "medium" {
			t.Errorf("default sends effort %v, want medium", e)
		}
		if tools := p.tools(req.JSON()); !slices.Contains(tools, "bash") || !slices.Contains(tools, "write_file") {
			t.Errorf("default withholds tools: %v", tools)
		}
	})

	t.Run("think flag beats the variant", func(t *testing.T) {
		t.Parallel()
		srv := fakemodel.New(t, fakemodel.Reply{Text: "Hi."})
		res := shiro(t, t.TempDir(), headlessEnv(t, p, srv.URL), "-p", "--agent", "plan", "--think", "low", "--no-sandbox", "hi")
		if res.code != 0 {
			t.Fatalf("exit %d\nstderr: %s", res.code, res.stderr)
		}
		if e := effort(modelRequests(srv)[0]); e != "low" {
			t.Errorf("effort %v, want low", e)
		}
	})

	t.Run("quick stops at 12 steps", func(t *testing.T) {
		t.Parallel()
		var replies []fakemodel.Reply
		for i := range 20 {
			replies = append(replies, fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: fmt.Sprintf("call_%d", i), Name: "glob", Input: `{"pattern":"*"}`}}})
		}
		srv := fakemodel.New(t, replies...)
		res := shiro(t, t.TempDir(), headlessEnv(t, p, srv.URL), "-p", "--agent", "quick", "--no-sandbox", "loop")
		if n := len(modelRequests(srv)); n != 12 {
			t.Errorf("%d requests, want 12", n)
		}
		if !strings.Contains(res.stderr, "stopped after 12 steps") {
			t.Errorf("no step-limit notice on stderr: %s", res.stderr)
		}
		if e := effort(modelRequests(srv)[0]); e != nil {
			t.Errorf("quick sends effort %v, want none", e)
		}
	})

	t.Run("unknown names", func(t *testing.T) {
		t.Parallel()
		res := shiro(t, t.TempDir(), headlessEnv(t, p, "http://127.0.0.1:1"), "-p", "--agent", "fast", "--no-sandbox", "hi")
		if res.code != 1 || !strings.Contains(res.stderr, `Unknown agent "fast". Available: default, quick, deep, plan, review`) {
			t.Errorf("exit %d, stderr %q", res.code, res.stderr)
		}
		res = shiro(t, t.TempDir(), headlessEnv(t, p, "http://127.0.0.1:1"), "-p", "--think", "lots", "--no-sandbox", "hi")
		if res.code != 1 || !strings.Contains(res.stderr, `Unknown thinking level "lots". Available: off, low, medium, high, max`) {
			t.Errorf("exit %d, stderr %q", res.code, res.stderr)
		}
	})
}

// A headless run saves its final totals and cost; -c starts from them;
// shiro sessions counts the messages.
func TestHeadlessRecordKeepsTotals(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "toolu_g", Name: "glob", Input: `{"pattern":"*"}`}}, InputTokens: 150, OutputTokens: 20},
		fakemodel.Reply{Text: "Nothing here.", InputTokens: 50, OutputTokens: 20},
		fakemodel.Reply{Text: "Still nothing.", InputTokens: 300, OutputTokens: 60},
	)
	ws, home := t.TempDir(), t.TempDir()
	env := append(headlessEnv(t, p, srv.URL), "SHIRO_HOME="+home)
	if res := shiro(t, ws, env, "-p", "--no-sandbox", "--model", "claude-sonnet-4-5", "look"); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	type record struct {
		InputTokens, OutputTokens int
		CostUSD                   *float64 `json:"costUsd"`
		Messages                  []json.RawMessage
	}
	load := func() record {
		entries, err := os.ReadDir(filepath.Join(home, "sessions"))
		if err != nil || len(entries) != 1 {
			t.Fatalf("sessions: %v %v", entries, err)
		}
		data, err := os.ReadFile(filepath.Join(home, "sessions", entries[0].Name()))
		if err != nil {
			t.Fatal(err)
		}
		var r record
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := load()
	// claude-sonnet-4-5: $3 in, $15 out per million tokens.
	if r.InputTokens != 200 || r.OutputTokens != 40 || r.CostUSD == nil || fmt.Sprintf("%.6f", *r.CostUSD) != "0.001200" {
		t.Errorf("record after one run: %d in / %d out, cost %v", r.InputTokens, r.OutputTokens, r.CostUSD)
	}
	if res := shiro(t, ws, env, "-c", "-p", "--no-sandbox", "--model", "claude-sonnet-4-5", "again"); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	r = load()
	if r.InputTokens != 500 || r.OutputTokens != 100 || len(r.Messages) != 6 {
		t.Errorf("record after -c: %d in / %d out, %d messages", r.InputTokens, r.OutputTokens, len(r.Messages))
	}
	res := shiro(t, ws, env, "sessions")
	if !strings.Contains(res.stdout, "  6  ") {
		t.Errorf("shiro sessions does not count 6 messages:\n%s", res.stdout)
	}
}
