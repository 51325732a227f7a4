package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

// provider is one wire format the headless tests run against.
type provider struct {
	name string
	env  func(url string) []string
	// paired reports whether a request body carries the result of call id
	// with text in it, paired with the call.
	paired func(t *testing.T, body map[string]any, id, text string) bool
	// tools lists the names of the tools a request offers.
	tools func(body map[string]any) []string
	// system returns the system prompt of a request.
	system func(body map[string]any) string
}

var providers = []provider{
	{
		name: "anthropic",
		env: func(url string) []string {
			return []string{"SHIRO_PROVIDER=anthropic", "ANTHROPIC_API_KEY=test-key", "SHIRO_BASE_URL=" + url + "/v1"}
		},
		paired: func(t *testing.T, body map[string]any, id, text string) bool {
			var call, result bool
			for _, m := range list(body["messages"]) {
				for _, c := range list(obj(m)["content"]) {
					b := obj(c)
					if b["type"] == "tool_use" && b["id"] == id {
						call = true
					}
					if b["type"] == "tool_result" && b["tool_use_id"] == id && strings.Contains(jsonString(b["content"]), text) {
						result = call
					}
				}
			}
			return result
		},
		tools: func(body map[string]any) []string { return names(body["tools"], "name") },
		system: func(body map[string]any) string {
			if s, ok := body["system"].(string); ok {
				return s
			}
			return jsonString(body["system"])
		},
	},
	{
		name: "openai-responses",
		env: func(url string) []string {
			return []string{"SHIRO_PROVIDER=openai", "OPENAI_API_KEY=test-key", "SHIRO_BASE_URL=" + url + "/v1", "SHIRO_OPENAI_API=responses"}
		},
		paired: func(t *testing.T, body map[string]any, id, text string) bool {
			var call, result bool
			for _, it := range list(body["input"]) {
				item := obj(it)
				if item["type"] == "function_call" && item["call_id"] == id {
					call = true
				}
				if item["type"] == "function_call_output" && item["call_id"] == id && strings.Contains(jsonString(item["output"]), text) {
					result = call
				}
			}
			return result
		},
		tools:  func(body map[string]any) []string { return names(body["tools"], "name") },
		system: func(body map[string]any) string { return jsonString(body["instructions"]) + jsonString(body["input"]) },
	},
	{
		name: "openai-chat",
		env: func(url string) []string {
			return []string{"SHIRO_PROVIDER=openai", "OPENAI_API_KEY=test-key", "SHIRO_BASE_URL=" + url + "/v1", "SHIRO_OPENAI_API=chat"}
		},
		paired: chatPaired,
		tools:  chatTools,
		system: chatSystem,
	},
	{
		name: "openai-compatible",
		env: func(url string) []string {
			return []string{"SHIRO_PROVIDER=openai-compatible", "SHIRO_MODEL=fake-large", "SHIRO_BASE_URL=" + url + "/v1"}
		},
		paired: chatPaired,
		tools:  chatTools,
		system: chatSystem,
	},
}

func chatPaired(t *testing.T, body map[string]any, id, text string) bool {
	var call, result bool
	for _, m := range list(body["messages"]) {
		msg := obj(m)
		for _, tc := range list(msg["tool_calls"]) {
			if obj(tc)["id"] == id {
				call = true
			}
		}
		if msg["role"] == "tool" && msg["tool_call_id"] == id && strings.Contains(jsonString(msg["content"]), text) {
			result = call
		}
	}
	return result
}

func chatTools(body map[string]any) []string {
	var out []string
	for _, t := range list(body["tools"]) {
		if n, ok := obj(obj(t)["function"])["name"].(string); ok {
			out = append(out, n)
		}
	}
	return out
}

func chatSystem(body map[string]any) string {
	for _, m := range list(body["messages"]) {
		if r := obj(m)["role"]; r == "system" || r == "developer" {
			return jsonString(obj(m)["content"])
		}
	}
	return ""
}

func list(v any) []any         { l, _ := v.([]any); return l }
func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func jsonString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func names(v any, key string) []string {
	var out []string
	for _, t := range list(v) {
		if n, ok := obj(t)[key].(string); ok {
			out = append(out, n)
		}
	}
	return out
}

// headlessEnv isolates shiro's state and keys for one test.
func headlessEnv(t *testing.T, p provider, url string) []string {
	t.Helper()
	env := []string{"SHIRO_HOME=" + t.TempDir(), "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "SHIRO_API_KEY=", "SHIRO_MODEL=", "SHIRO_OPENAI_API="}
	return append(env, p.env(url)...)
}

func TestHeadlessReadEditAnswer(t *testing.T) {
	t.Parallel()
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "greet.txt"), []byte("hello world\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			srv := fakemodel.New(t,
				fakemodel.Reply{Text: "Reading.", ToolCalls: []fakemodel.ToolCall{{ID: "call_read_1", Name: "read_file", Input: `{"path":"greet.txt"}`}}},
				fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "call_edit_2", Name: "edit_file", Input: `{"path":"greet.txt","oldString":"world","newString":"shiro"}`}}},
				fakemodel.Reply{Text: "Changed the greeting.", Chunks: 3},
			)
			res := shiro(t, ws, headlessEnv(t, p, srv.URL), "-p", "--yolo", "--no-sandbox", "greet shiro")
			if res.code != 0 {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
			}
			got, _ := os.ReadFile(filepath.Join(ws, "greet.txt"))
			if string(got) != "hello shiro\n" {
				t.Errorf("file is %q", got)
			}
			if !strings.Contains(res.stdout, "Changed the greeting.") {
				t.Errorf("final text missing from stdout: %q", res.stdout)
			}
			reqs := modelRequests(srv)
			if len(reqs) != 3 {
				t.Fatalf("%d model requests, want 3", len(reqs))
			}
			if !p.paired(t, reqs[1].JSON(), "call_read_1", "1: hello world") {
				t.Errorf("the second request does not carry read_file's result paired with its call:\n%s", reqs[1].Body)
			}
		})
	}
}

func modelRequests(srv *fakemodel.Server) []fakemodel.Request {
	var out []fakemodel.Request
	for _, r := range srv.Requests() {
		if r.Method == "POST" {
			out = append(out, r)
		}
	}
	return out
}

func TestHeadlessDeniesGatedCallsWithoutYolo(t *testing.T) {
	t.Parallel()
	p := providers[0]
	ws := t.TempDir()
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w1", Name: "write_file", Input: `{"path":"x.txt","content":"x"}`}}},
		fakemodel.Reply{Text: "I could not write."},
	)
	res := shiro(t, ws, headlessEnv(t, p, srv.URL), "-p", "--no-sandbox", "write x")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "x.txt")); err == nil {
		t.Error("the denied write happened")
	}
	if !strings.Contains(res.stderr, "[denied] write_file (run with --yolo to allow tool use in headless mode)") || !strings.Contains(res.stderr, "will be denied") {
		t.Errorf("stderr: %s", res.stderr)
	}
	if !p.paired(t, modelRequests(srv)[1].JSON(), "w1", "User denied this tool call.") {
		t.Errorf("the model did not receive the denial")
	}
}

func TestGuardRefusesEvenWithYolo(t *testing.T) {
	t.Parallel()
	p := providers[0]
	ws := t.TempDir()
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: `{"command":"rm -rf /"}`}}},
		fakemodel.Reply{Text: "Refused."},
	)
	res := shiro(t, ws, headlessEnv(t, p, srv.URL), "-p", "--yolo", "--no-sandbox", "clean up")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "Blocked by the guard plugin") {
		t.Errorf("stderr: %s", res.stderr)
	}
	if !p.paired(t, modelRequests(srv)[1].JSON(), "b1", "Blocked by the guard plugin: refusing") {
		t.Errorf("the model did not receive the refusal")
	}
}

func TestEmptyToolSetsOfferCoreOnly(t *testing.T) {
	t.Parallel()
	for _, p := range []provider{providers[0], providers[2]} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			env := headlessEnv(t, p, "")
			home := strings.TrimPrefix(env[0], "SHIRO_HOME=")
			if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"toolSets": []}`), 0o600); err != nil {
				t.Fatal(err)
			}
			srv := fakemodel.New(t, fakemodel.Reply{Text: "hi"})
			res := shiro(t, ws, append(env, p.env(srv.URL)...), "-p", "--no-sandbox", "hi")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			body := modelRequests(srv)[0].JSON()
			got := strings.Join(p.tools(body), ",")
			// Session tools, the subagent and plugin tools belong to no set.
			if got != "read_file,write_file,edit_file,glob,bash,job_output,job_kill,job_input,grep,todo_write,remember,recall,forget,skill,task,current_time" {
				t.Errorf("offered %s", got)
			}
			system := p.system(body)
			if !strings.Contains(system, "read_file") {
				t.Fatalf("could not find the system prompt in the request")
			}
			for _, withheld := range []string{"multi_edit", "list_dir", "read_many_files", "git_status", "git_diff", "git_log", "git_show", "git_blame"} {
				if strings.Contains(system, withheld) {
					t.Errorf("the system prompt names the withheld %s", withheld)
				}
			}
		})
	}
}

func TestRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	for _, p := range []provider{providers[0], providers[1]} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := fakemodel.New(t,
				fakemodel.Reply{Status: 503, Header: map[string]string{"retry-after": "0"}},
				fakemodel.Reply{Status: 503, Header: map[string]string{"retry-after": "0"}},
				fakemodel.Reply{Text: "third time"},
			)
			res := shiro(t, t.TempDir(), headlessEnv(t, p, srv.URL), "-p", "--no-sandbox", "hi")
			if res.code != 0 || !strings.Contains(res.stdout, "third time") {
				t.Fatalf("exit %d, stdout %q, stderr %s", res.code, res.stdout, res.stderr)
			}
			if n := len(modelRequests(srv)); n != 3 {
				t.Errorf("%d attempts, want 3", n)
			}
			if !strings.Contains(res.stderr, "[retry] attempt 2 of 4 in 0ms: 503 Service Unavailable") || !strings.Contains(res.stderr, "[retry] attempt 3 of 4") {
				t.Errorf("the retries were not reported:\n%s", res.stderr)
			}
		})
	}
}

func TestStreamCutEndsWithErrorAndASessionThatLoads(t *testing.T) {
	t.Parallel()
	p := providers[0]
	ws := t.TempDir()
	srv := fakemodel.New(t, fakemodel.Reply{Text: "partial answer", CutAfterText: true}, fakemodel.Reply{Text: "second run"})
	env := headlessEnv(t, p, srv.URL)
	res := shiro(t, ws, env, "-p", "--json", "--no-sandbox", "first prompt")
	if res.code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s", res.code, res.stderr)
	}
	var sawError bool
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if ev["type"] == "error" {
			sawError = true
		}
	}
	if !sawError {
		t.Errorf("no error event in %s", res.stdout)
	}
	// The session file still loads: -c continues it.
	res = shiro(t, ws, env, "-c", "-p", "--no-sandbox", "second prompt")
	if res.code != 0 {
		t.Fatalf("continue: exit %d: %s", res.code, res.stderr)
	}
	if body := string(modelRequests(srv)[1].Body); !strings.Contains(body, "first prompt") || !strings.Contains(body, "second prompt") {
		t.Errorf("the continued request lacks the earlier messages: %s", body)
	}
}

func TestContinueSendsEarlierMessages(t *testing.T) {
	t.Parallel()
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			srv := fakemodel.New(t, fakemodel.Reply{Text: "remembered-42"}, fakemodel.Reply{Text: "ok"})
			env := headlessEnv(t, p, srv.URL)
			if res := shiro(t, ws, env, "-p", "--no-sandbox", "the number is 42"); res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			if res := shiro(t, ws, env, "-c", "-p", "--no-sandbox", "what was it?"); res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			body := string(modelRequests(srv)[1].Body)
			for _, want := range []string{"the number is 42", "remembered-42", "what was it?"} {
				if !strings.Contains(body, want) {
					t.Errorf("the second run's request lacks %q", want)
				}
			}
		})
	}
}

func TestBadToolCallsReachTheModelAsToolErrors(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "bad1", Name: "read_file", Input: `{"path": `}, {ID: "bad2", Name: "teleport", Input: `{}`}}},
		fakemodel.Reply{Text: "sorry"},
	)
	res := shiro(t, t.TempDir(), headlessEnv(t, p, srv.URL), "-p", "--no-sandbox", "go")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	body := modelRequests(srv)[1].JSON()
	if !p.paired(t, body, "bad1", "Invalid JSON arguments for read_file") || !p.paired(t, body, "bad2", `Unknown tool \"teleport\"`) && !p.paired(t, body, "bad2", `Unknown tool "teleport"`) {
		t.Errorf("tool errors not sent back:\n%s", modelRequests(srv)[1].Body)
	}
}

func TestProjectConfigCannotSetYolo(t *testing.T) {
	t.Parallel()
	p := providers[0]
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".shiro"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".shiro", "config.json"), []byte(`{"yolo": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w1", Name: "write_file", Input: `{"path":"pwned.txt","content":"x"}`}}},
		fakemodel.Reply{Text: "done"},
	)
	res := shiro(t, ws, headlessEnv(t, p, srv.URL), "-p", "--no-sandbox", "go")
	if !strings.Contains(res.stderr, `"yolo" is ignored`) {
		t.Errorf("no notice: %s", res.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned.txt")); err == nil {
		t.Error("the project's yolo took effect")
	}
}

func TestMissingKeyExitsBeforeAnyWork(t *testing.T) {
	t.Parallel()
	srv := fakemodel.New(t)
	env := []string{"SHIRO_HOME=" + t.TempDir(), "ANTHROPIC_API_KEY=", "SHIRO_API_KEY=", "SHIRO_PROVIDER=anthropic", "SHIRO_BASE_URL=" + srv.URL + "/v1"}
	res := shiro(t, t.TempDir(), env, "-p", "--no-sandbox", "hi")
	if res.code != 1 || !strings.Contains(res.stderr, `No API key for provider "anthropic"`) {
		t.Errorf("exit %d, stderr %s", res.code, res.stderr)
	}
	if len(srv.Requests()) != 0 {
		t.Error("the model was called")
	}
}
