package integration

import (
	"fmt"
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
