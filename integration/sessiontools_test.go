package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

func TestSessionToolsTodoListReachesThePromptAndSurvivesContinue(t *testing.T) {
	t.Parallel()
	for _, p := range []provider{providers[0], providers[2]} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			srv := fakemodel.New(t,
				fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "todo1", Name: "todo_write", Input: `{"todos":[{"content":"read the code","status":"done"},{"content":"fix the bug","status":"in_progress"},{"content":"run tests","status":"pending"}]}`}}},
				fakemodel.Reply{Text: "Planned."},
				fakemodel.Reply{Text: "Continuing."},
			)
			env := headlessEnv(t, p, srv.URL)
			res := shiro(t, ws, env, "-p", "--no-sandbox", "plan the fix")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			reqs := modelRequests(srv)
			if !slices.Contains(p.tools(reqs[0].JSON()), "todo_write") {
				t.Errorf("todo_write not offered: %v", p.tools(reqs[0].JSON()))
			}
			block := "Your task list (1/3 done). Keep it current with todo_write:\n[x] read the code\n[~] fix the bug\n[ ] run tests"
			if strings.Contains(systemText(p, reqs[0].JSON()), "Your task list") {
				t.Error("the first request already has a task list")
			}
			if !strings.Contains(systemText(p, reqs[1].JSON()), block) {
				t.Errorf("the second request's system prompt lacks the list:\n%s", systemText(p, reqs[1].JSON()))
			}
			if !p.paired(t, reqs[1].JSON(), "todo1", "Task list updated: 1/3 done.") {
				t.Error("todo_write's result did not reach the model")
			}
			// The list is saved with the session and restored by -c.
			if res := shiro(t, ws, env, "-c", "-p", "--no-sandbox", "go on"); res.code != 0 {
				t.Fatalf("continue: exit %d: %s", res.code, res.stderr)
			}
			if !strings.Contains(systemText(p, modelRequests(srv)[2].JSON()), block) {
				t.Errorf("the continued session lost the list:\n%s", systemText(p, modelRequests(srv)[2].JSON()))
			}
		})
	}
}

func TestSessionToolsMemoryOutlivesTheProcess(t *testing.T) {
	t.Parallel()
	p := providers[0]
	ws := t.TempDir()
	note := "integration tests need SHIRO_BIN"
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "rem1", Name: "remember", Input: `{"kind":"gotcha","text":"` + note + `"}`}}},
		fakemodel.Reply{Text: "Noted."},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "rec1", Name: "recall", Input: `{"query":"shiro_bin tests"}`}}},
		fakemodel.Reply{Text: "Found it."},
		fakemodel.Reply{Text: "no memory here"},
	)
	env := headlessEnv(t, p, srv.URL)
	home := strings.TrimPrefix(env[0], "SHIRO_HOME=")
	if res := shiro(t, ws, env, "-p", "--no-sandbox", "remember this"); res.code != 0 {
		t.Fatalf("first run: exit %d: %s", res.code, res.stderr)
	}
	if !p.paired(t, modelRequests(srv)[1].JSON(), "rem1", "Remembered as gotcha (1 stored): "+note) {
		t.Errorf("remember's result: %s", modelRequests(srv)[1].Body)
	}
	files, _ := filepath.Glob(filepath.Join(home, "memory", "*.json"))
	if len(files) != 1 || len(filepath.Base(files[0])) != len("0123456789abcdef.json") {
		t.Fatalf("memory files %v", files)
	}

	// A new process, same home and workspace: the note is in the prompt and
	// recall finds it.
	if res := shiro(t, ws, env, "-p", "--no-sandbox", "what do you know?"); res.code != 0 {
		t.Fatalf("second run: exit %d: %s", res.code, res.stderr)
	}
	reqs := modelRequests(srv)
	if sys := systemText(p, reqs[2].JSON()); !strings.Contains(sys, "- (gotcha) "+note) {
		t.Errorf("the second run's system prompt lacks the memory block:\n%s", sys)
	}
	if !p.paired(t, reqs[3].JSON(), "rec1", "(gotcha) "+note) {
		t.Errorf("recall did not find the note: %s", reqs[3].Body)
	}

	// --no-memory: no tools, no block.
	if res := shiro(t, ws, env, "-p", "--no-sandbox", "--no-memory", "hi"); res.code != 0 {
		t.Fatalf("--no-memory run: exit %d: %s", res.code, res.stderr)
	}
	last := modelRequests(srv)[4].JSON()
	for _, n := range []string{"remember", "recall", "forget"} {
		if slices.Contains(p.tools(last), n) || strings.Contains(systemText(p, last), n+":") {
			t.Errorf("--no-memory still offers %s", n)
		}
	}
	if strings.Contains(systemText(p, last), note) {
		t.Error("--no-memory still injects the notes")
	}
}

func TestSessionToolsSkillReturnsABuiltinBody(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "sk1", Name: "skill", Input: `{"name":"verify"}`}}},
		fakemodel.Reply{Text: "Following it."},
		fakemodel.Reply{Text: "no skills"},
	)
	env := headlessEnv(t, p, srv.URL)
	ws := t.TempDir()
	if res := shiro(t, ws, env, "-p", "--no-sandbox", "check my change"); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	reqs := modelRequests(srv)
	sys := systemText(p, reqs[0].JSON())
	if !strings.Contains(sys, "- commit: ") || !strings.Contains(sys, "- verify: ") || strings.Contains(sys, "Never claim something passes") {
		t.Errorf("the catalogue is wrong (or carries a body):\n%s", sys)
	}
	if !p.paired(t, reqs[1].JSON(), "sk1", `Skill \"verify\" (builtin). Follow these instructions for this task.`) &&
		!p.paired(t, reqs[1].JSON(), "sk1", `Skill "verify" (builtin). Follow these instructions for this task.`) {
		t.Errorf("skill's result: %s", reqs[1].Body)
	}
	if !p.paired(t, reqs[1].JSON(), "sk1", "Never claim something passes that you did not run") {
		t.Errorf("skill did not return the body: %s", reqs[1].Body)
	}
	if res := shiro(t, ws, env, "-p", "--no-sandbox", "--no-skills", "hi"); res.code != 0 {
		t.Fatalf("--no-skills: exit %d: %s", res.code, res.stderr)
	}
	last := modelRequests(srv)[2].JSON()
	if slices.Contains(p.tools(last), "skill") || strings.Contains(systemText(p, last), "- verify: ") {
		t.Error("--no-skills still offers skills")
	}
}

func TestSessionToolsTaskSubagentCannotWrite(t *testing.T) {
	t.Parallel()
	p := providers[0]
	ws := t.TempDir()
	srv := fakemodel.New(t,
		// The parent hands the job to a subagent.
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "task1", Name: "task", Input: `{"description":"write a file","prompt":"Create pwned.txt containing x.","kind":"explore"}`}}},
		// The subagent forges a write, then reports.
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "forged1", Name: "write_file", Input: `{"path":"pwned.txt","content":"x"}`}}},
		fakemodel.Reply{Text: "I could not write pwned.txt."},
		// The parent answers.
		fakemodel.Reply{Text: "The subagent could not write."},
	)
	// --yolo: were write_file reachable, nothing would stop it.
	res := shiro(t, ws, headlessEnv(t, p, srv.URL), "-p", "--yolo", "--no-sandbox", "have a subagent write pwned.txt")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	reqs := modelRequests(srv)
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	if !slices.Contains(p.tools(reqs[0].JSON()), "task") {
		t.Errorf("task not offered to the parent: %v", p.tools(reqs[0].JSON()))
	}
	sub := p.tools(reqs[1].JSON())
	if strings.Join(sub, ",") != "read_file,glob,job_output,grep,list_dir,read_many_files" {
		t.Errorf("the subagent was offered %v", sub)
	}
	if body := string(reqs[1].Body); strings.Contains(body, "have a subagent write") {
		t.Error("the subagent saw the parent's conversation")
	}
	if !p.paired(t, reqs[2].JSON(), "forged1", `Unknown tool \"write_file\"`) && !p.paired(t, reqs[2].JSON(), "forged1", `Unknown tool "write_file"`) {
		t.Errorf("the forged write did not get a tool error: %s", reqs[2].Body)
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned.txt")); err == nil {
		t.Error("the subagent wrote a file")
	}
	if !p.paired(t, reqs[3].JSON(), "task1", "I could not write pwned.txt.") {
		t.Errorf("the parent did not get the report: %s", reqs[3].Body)
	}
	if !strings.Contains(res.stdout, "The subagent could not write.") {
		t.Errorf("stdout %q", res.stdout)
	}
}

func TestSessionToolsNoSubagent(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t, fakemodel.Reply{Text: "hi"})
	if res := shiro(t, t.TempDir(), headlessEnv(t, p, srv.URL), "-p", "--no-sandbox", "--no-subagent", "hi"); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	body := modelRequests(srv)[0].JSON()
	if slices.Contains(p.tools(body), "task") || strings.Contains(systemText(p, body), "task:") {
		t.Errorf("--no-subagent still offers task: %v", p.tools(body))
	}
}

// systemText is a request's system prompt as plain text (Anthropic's system
// blocks joined).
func systemText(p provider, body map[string]any) string {
	if blocks, ok := body["system"].([]any); ok {
		var b strings.Builder
		for _, blk := range blocks {
			if s, ok := obj(blk)["text"].(string); ok {
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return p.system(body)
}

func TestSessionToolsAskIsNotOfferedHeadless(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t,
		// A model that calls ask anyway gets an unknown-tool error.
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "q1", Name: "ask", Input: `{"question":"which?"}`}}},
		fakemodel.Reply{Text: "Decided myself."},
	)
	res := shiro(t, t.TempDir(), headlessEnv(t, p, srv.URL), "-p", "--no-sandbox", "pick one")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	reqs := modelRequests(srv)
	body := reqs[0].JSON()
	if slices.Contains(p.tools(body), "ask") || strings.Contains(systemText(p, body), "- ask:") {
		t.Errorf("a headless run offers ask: %v", p.tools(body))
	}
	if !strings.Contains(systemText(p, body), "Nobody can answer questions in this run") {
		t.Errorf("the headless prompt does not tell the model to decide itself:\n%s", systemText(p, body))
	}
	if !p.paired(t, reqs[1].JSON(), "q1", `Unknown tool \"ask\"`) && !p.paired(t, reqs[1].JSON(), "q1", `Unknown tool "ask"`) {
		t.Errorf("the forged ask call was not refused: %s", reqs[1].Body)
	}
}
