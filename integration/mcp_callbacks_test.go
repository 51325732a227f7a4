package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/tools/mcp/mcptest"
)

// TestMCPCallbacksHeadless: a server that asks for the roots (both ways),
// for a completion and for a form while it handles calls, through `shiro
// -p --yolo`: the roots are the workspace, the completion is a request to
// the same fake model and is billed in the session's record, the form is
// declined (no one can answer it).
func TestMCPCallbacksHeadless(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{
			{ID: "call_roots", Name: "mcp__srv__roots", Input: `{}`},
			{ID: "call_mrtr", Name: "mcp__srv__roots_mrtr", Input: `{}`},
			{ID: "call_sample", Name: "mcp__srv__sample", Input: `{"prompt":"what is 2+2?","system":"answer in one word"}`},
			{ID: "call_elicit", Name: "mcp__srv__elicit", Input: `{}`},
		}, InputTokens: 100, OutputTokens: 10},
		fakemodel.Reply{Text: "four", InputTokens: 7, OutputTokens: 3},
		fakemodel.Reply{Text: "All done.", InputTokens: 50, OutputTokens: 5},
	)
	env := headlessEnv(t, p, srv.URL)
	home := strings.TrimPrefix(env[0], "SHIRO_HOME=")
	userMCP(t, env, map[string]any{"srv": map[string]any{"command": mcpecho(t)}})
	ws := t.TempDir()
	res := shiro(t, ws, env, "-p", "--yolo", "--no-sandbox", "use the server")
	if res.code != 0 {
		t.Fatalf("exit %d\nstderr: %s", res.code, res.stderr)
	}
	reqs := modelRequests(srv)
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3 (the step, the sampling request, the step after)", len(reqs))
	}
	sampling := string(reqs[1].Body)
	if !strings.Contains(sampling, "answer in one word") || !strings.Contains(sampling, "what is 2+2?") || strings.Contains(sampling, "mcp__srv__") {
		t.Errorf("the sampling request is not the server's:\n%s", sampling)
	}
	last := reqs[2].JSON()
	realWS, _ := filepath.EvalSymlinks(ws)
	for _, id := range []string{"call_roots", "call_mrtr"} {
		content, isErr, _ := toolResult(last, id)
		if isErr || !(strings.Contains(content, "file://"+ws) || strings.Contains(content, "file://"+realWS)) {
			t.Errorf("%s: %q (error %v), want the workspace as a file:// root", id, content, isErr)
		}
	}
	if content, isErr, _ := toolResult(last, "call_sample"); isErr || !strings.Contains(content, "said: four") {
		t.Errorf("sample: %q (error %v)", content, isErr)
	}
	if content, isErr, _ := toolResult(last, "call_elicit"); isErr || !strings.Contains(content, "decline null") {
		t.Errorf("elicit: %q (error %v), want the form declined", content, isErr)
	}
	if !strings.Contains(res.stderr, "mcp srv asked you to fill in a form (elicitation); declined") {
		t.Errorf("stderr lacks the declined form:\n%s", res.stderr)
	}

	// The sampling request's tokens are in the session's record.
	entries, err := os.ReadDir(filepath.Join(home, "sessions"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("sessions: %v %v", entries, err)
	}
	data, err := os.ReadFile(filepath.Join(home, "sessions", entries[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ InputTokens, OutputTokens int }
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.InputTokens != 157 || rec.OutputTokens != 18 {
		t.Errorf("the record bills %d in / %d out, want 157 / 18 (the sampling request included)", rec.InputTokens, rec.OutputTokens)
	}
}

// TestMCPMisbehavingServersHeadless: a server that crashes, one that
// prints a banner on stdout and one that never answers are each named as
// such, and the hanging one does not hold the first prompt.
func TestMCPMisbehavingServersHeadless(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t, fakemodel.Reply{Text: "Answered."})
	env := headlessEnv(t, p, srv.URL)
	bin := mcpecho(t)
	mode := func(m string) map[string]any {
		return map[string]any{"command": bin, "env": map[string]string{mcptest.ModeEnv: m}}
	}
	userMCP(t, env, map[string]any{
		"srv":     map[string]any{"command": bin},
		"crash":   mode("crash"),
		"garbage": mode("garbage"),
		"hang":    mode("hang"),
	})
	start := time.Now()
	res := shiro(t, t.TempDir(), env, "-p", "--yolo", "--no-sandbox", "hi")
	took := time.Since(start)
	if res.code != 0 {
		t.Fatalf("exit %d\nstderr: %s", res.code, res.stderr)
	}
	if took > 15*time.Second { // the start timeout is 30s
		t.Errorf("the run took %s: it waited for the hanging server", took)
	}
	for _, want := range []string{
		"[notice] mcp crash failed: the server exited with status 3 before it answered; stderr: " + mcptest.CrashText,
		`[notice] mcp garbage failed: the server wrote to stdout a line that is not JSON-RPC: "` + mcptest.GarbageLine + `"`,
		"[notice] mcp hang: still connecting after",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	if strings.Contains(res.stderr, "broken pipe") {
		t.Errorf("stderr speaks of a broken pipe:\n%s", res.stderr)
	}
	offered := p.tools(modelRequests(srv)[0].JSON())
	if !slices.Contains(offered, "mcp__srv__echo") || slices.ContainsFunc(offered, func(n string) bool { return strings.HasPrefix(n, "mcp__hang__") }) {
		t.Errorf("the first request offers %v: want the working server's tools only", offered)
	}
	if !strings.Contains(res.stdout, "Answered.") {
		t.Errorf("stdout %q", res.stdout)
	}
}

// TestTUIMCPSamplingApproval: in the chat UI a server's sampling request
// is shown for approval after the tool call's own, answered by the same
// fake model once allowed, and billed to the session (/cost).
func TestTUIMCPSamplingApproval(t *testing.T) {
	t.Parallel()
	requireTmux(t)
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "call_sample", Name: "mcp__srv__sample", Input: `{"prompt":"name a colour","system":"one word only"}`}}, InputTokens: 100, OutputTokens: 10},
		fakemodel.Reply{Text: "teal", InputTokens: 7, OutputTokens: 3},
		fakemodel.Reply{Text: "The server heard teal.", InputTokens: 50, OutputTokens: 5},
	)
	env := append(headlessEnv(t, providers[0], srv.URL), "TERM=xterm-256color")
	userMCP(t, env, map[string]any{"srv": map[string]any{"command": mcpecho(t)}})
	s := newTmux(t, t.TempDir(), tuiWidth, tuiHeight, env, testenv.Binary(t), "--no-sandbox")
	s.run("set-option", "-t", s.name, "remain-on-exit", "on")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen at the end:\n%s", s.screen())
		}
	})
	s.waitFor("mcp: 10 tools", 30*time.Second)
	s.keys("ask the server", true)
	s.waitFor("y allow once | a always allow mcp__srv__sample | n deny", 20*time.Second)
	s.keys("y", false)
	scr := s.waitFor("y allow | n deny", 20*time.Second)
	for _, want := range []string{"mcp srv asks ", "to answer (sampling", "system: one word only", "user: name a colour", "at most 200 tokens"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the sampling prompt lacks %q:\n%s", want, scr)
		}
	}
	if n := len(modelRequests(srv)); n != 1 {
		t.Errorf("%d model requests before the approval, want 1", n)
	}
	s.keys("y", false)
	s.waitFor("The server heard teal.", 20*time.Second)
	s.waitFor("mcp srv sampling: allowed", 5*time.Second)
	// The turn's line counts its steps; the session's bill has the
	// sampling request too.
	s.waitFor("150 in / 15 out tokens", 5*time.Second)
	s.keys("/cost", true)
	s.waitFor("billed    157 in / 18 out tokens", 5*time.Second)
	s.dismiss("billed ")
	reqs := modelRequests(srv)
	if len(reqs) != 3 || !strings.Contains(string(reqs[1].Body), "one word only") {
		t.Errorf("%d requests; the second:\n%s", len(reqs), reqs[1].Body)
	}
	if content, _, _ := toolResult(reqs[2].JSON(), "call_sample"); !strings.Contains(content, "said: teal") {
		t.Errorf("the tool's result: %q", content)
	}
	s.quit()
}
