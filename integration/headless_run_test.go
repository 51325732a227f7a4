package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// jsonLines decodes every line of a --json run's stdout.
func jsonLines(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		out = append(out, ev)
	}
	return out
}

// TestHeadlessSandboxThatCannotOpenFailsTheRun (issue 33): with the engine
// out of reach, the first command ends the turn with an error naming the
// cause and the run exits 1; the model is not asked to carry on, the
// step's other command does not try the open again, and the hint that
// offers --no-sandbox says what it gives up.
func TestHeadlessSandboxThatCannotOpenFailsTheRun(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{
			{ID: "b1", Name: "bash", Input: bashJSON("make", 0)},
			{ID: "b2", Name: "bash", Input: bashJSON("make test", 0)},
		}},
		fakemodel.Reply{Text: "Sorry, the sandbox is broken; all done."},
	)
	env := append(headlessEnv(t, p, srv.URL), "DOCKER_HOST=unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	res := shiro(t, t.TempDir(), env, "-p", "--yolo", "--json", "build it")
	if res.code != 1 {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if n := len(modelRequests(srv)); n != 1 {
		t.Errorf("%d model requests, want 1: the model was asked to carry on", n)
	}
	evs := jsonLines(t, res.stdout)
	var errs, toolErrs []string
	for _, ev := range evs {
		switch ev["type"] {
		case "error":
			errs = append(errs, jsonString(ev["error"]))
		case "tool-error":
			toolErrs = append(toolErrs, jsonString(ev["error"]))
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "cannot reach the Docker engine") {
		t.Errorf("error events %q", errs)
	}
	if len(toolErrs) != 1 {
		t.Errorf("%d tool errors, want 1 (the open tried once): %q", len(toolErrs), toolErrs)
	}
	if !strings.Contains(errs[0], "only in a repository you trust") || !strings.Contains(errs[0], "gives up the isolation") {
		t.Errorf("the --no-sandbox hint does not say what it gives up: %s", errs[0])
	}
	if last := evs[len(evs)-1]; last["type"] != "result" || last["exitStatus"] != float64(1) {
		t.Errorf("last line %v", last)
	}
}

// TestHeadlessDeniedSaysWhoRefused (issue 33): a guard's refusal says the
// guard refused it and why, with --yolo given; the --yolo hint is for
// approval denials only.
func TestHeadlessDeniedSaysWhoRefused(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON("rm -rf /", 0)}}},
		fakemodel.Reply{Text: "Refused."},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w1", Name: "write_file", Input: `{"path":"x.txt","content":"x"}`}}},
		fakemodel.Reply{Text: "Denied."},
	)
	env := headlessEnv(t, p, srv.URL)
	res := shiro(t, t.TempDir(), env, "-p", "--yolo", "--no-sandbox", "clean up")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, `[denied] bash (refused by the guard plugin, not an approval: refusing "rm -rf /"`) || strings.Contains(res.stderr, "run with --yolo") {
		t.Errorf("guard refusal:\n%s", res.stderr)
	}
	res = shiro(t, t.TempDir(), env, "-p", "--no-sandbox", "write x")
	if !strings.Contains(res.stderr, "[denied] write_file (run with --yolo to allow tool use in headless mode)") {
		t.Errorf("approval denial:\n%s", res.stderr)
	}
}

// TestHeadlessToolLineAndTextBlocks (issue 33): the [tool] line shows the
// command as written, not HTML-escaped, and the assistant's text blocks
// are separated by a line break.
func TestHeadlessToolLineAndTextBlocks(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t,
		fakemodel.Reply{Text: "first block.", ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON("echo a > /dev/null && echo '<b>'", 0)}}},
		fakemodel.Reply{Text: "second block."},
	)
	res := shiro(t, t.TempDir(), headlessEnv(t, p, srv.URL), "-p", "--yolo", "--no-sandbox", "go")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if want := `[tool] bash {"command":"echo a > /dev/null && echo '<b>'"}`; !strings.Contains(res.stderr, want) {
		t.Errorf("stderr lacks %s:\n%s", want, res.stderr)
	}
	if res.stdout != "first block.\nsecond block.\n" {
		t.Errorf("stdout %q", res.stdout)
	}
}

// TestHeadlessJSONSessionAndResult (issue 33): --json opens with a
// session line and closes with a result line, and the session id it
// gives continues the session with -r.
func TestHeadlessJSONSessionAndResult(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "r1", Name: "list_dir", Input: `{}`}}, InputTokens: 1000, OutputTokens: 50},
		fakemodel.Reply{Text: "Listed.", InputTokens: 1100, OutputTokens: 20},
		fakemodel.Reply{Text: "Continued."},
	)
	ws := t.TempDir()
	env := headlessEnv(t, p, srv.URL)
	res := shiro(t, ws, env, "-p", "--json", "--no-sandbox", "the first prompt")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	evs := jsonLines(t, res.stdout)
	first, last := evs[0], evs[len(evs)-1]
	id, _ := first["sessionId"].(string)
	if first["type"] != "session" || len(id) < 8 || first["version"] == "" || first["version"] == nil ||
		first["provider"] != "anthropic" || first["model"] == "" || first["workspace"] != ws || obj(first["sandbox"])["kind"] != "local" {
		t.Errorf("first line %v", first)
	}
	if last["type"] != "result" || last["sessionId"] != id || last["exitStatus"] != float64(0) || last["turns"] != float64(1) || last["requests"] != float64(2) ||
		last["inputTokens"] != float64(2100) || last["outputTokens"] != float64(70) || last["durationMs"] == nil {
		t.Errorf("last line %v", last)
	}
	if _, ok := last["costUsd"]; !ok {
		t.Errorf("no costUsd in %v", last)
	}
	res = shiro(t, ws, env, "-r", id, "-p", "--no-sandbox", "the second prompt")
	if res.code != 0 {
		t.Fatalf("-r %s: exit %d: %s", id, res.code, res.stderr)
	}
	body := string(modelRequests(srv)[2].Body)
	if !strings.Contains(body, "the first prompt") || !strings.Contains(body, "the second prompt") {
		t.Errorf("-r did not continue the session: %s", body)
	}
}

// TestHeadlessJSONImageDigest: a run whose sandbox opened names the
// image's digest in its result line.
func TestHeadlessJSONImageDigest(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	p := providers[0]
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON("true", 0)}}},
		fakemodel.Reply{Text: "Done."},
	)
	res := shiro(t, ws, headlessEnv(t, p, srv.URL), "-p", "--json", "--yolo", "go")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	evs := jsonLines(t, res.stdout)
	if sb := obj(evs[0]["sandbox"]); sb["kind"] != "docker" {
		t.Errorf("session sandbox %v", sb)
	}
	if sb := obj(evs[len(evs)-1]["sandbox"]); !strings.HasPrefix(jsonString(sb["imageDigest"]), "sha256:") || sb["image"] == nil {
		t.Errorf("result sandbox %v", sb)
	}
}

// sessionRecords reads the session records under a SHIRO_HOME.
func sessionRecords(t *testing.T, home string) []map[string]any {
	t.Helper()
	var out []map[string]any
	_ = filepath.Walk(home, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(path, ".json") || !strings.Contains(path, "sessions") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		var rec map[string]any
		if json.Unmarshal(b, &rec) == nil && rec["id"] != nil {
			out = append(out, rec)
		}
		return nil
	})
	return out
}

// TestHeadlessCostCountsAbortedRequests (issue 33): a stream cut after its
// first events counts the input the provider reported; a SIGINT while the
// model has not answered counts an estimate, marked as one; both in the
// record and the result line.
func TestHeadlessCostCountsAbortedRequests(t *testing.T) {
	t.Parallel()
	p := providers[0]
	t.Run("a stream cut mid-way", func(t *testing.T) {
		t.Parallel()
		srv := fakemodel.New(t, fakemodel.Reply{Text: "partial answer", CutAfterText: true, InputTokens: 4321, OutputTokens: 9})
		env := headlessEnv(t, p, srv.URL)
		res := shiro(t, t.TempDir(), env, "-p", "--json", "--no-sandbox", "hi")
		if res.code != 1 {
			t.Fatalf("exit %d: %s", res.code, res.stderr)
		}
		last := jsonLines(t, res.stdout)
		if r := last[len(last)-1]; r["type"] != "result" || r["inputTokens"] != float64(4321) || r["outputTokens"].(float64) < 1 {
			t.Errorf("result %v", r)
		}
		recs := sessionRecords(t, strings.TrimPrefix(env[0], "SHIRO_HOME="))
		if len(recs) != 1 || recs[0]["inputTokens"] != float64(4321) {
			t.Errorf("records %v", recs)
		}
	})
	t.Run("SIGINT before the answer", func(t *testing.T) {
		t.Parallel()
		reached, hold := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(hold) })
		srv := fakemodel.New(t, fakemodel.Reply{Reached: reached, Hold: hold, Text: "never", InputTokens: 999})
		env := headlessEnv(t, p, srv.URL)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, testenv.Binary(t), "-p", "--json", "--no-sandbox", "a question long enough to count")
		cmd.Dir, cmd.Env = t.TempDir(), append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reached:
		case <-ctx.Done():
			t.Fatal("the request never came")
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Fatalf("exit %v, want 130\nstderr: %s", err, stderr.String())
		}
		evs := jsonLines(t, stdout.String())
		r := evs[len(evs)-1]
		if r["type"] != "result" || r["exitStatus"] != float64(130) || r["inputTokens"].(float64) < 10 || r["tokensEstimated"] != true {
			t.Errorf("result %v", r)
		}
		recs := sessionRecords(t, strings.TrimPrefix(env[0], "SHIRO_HOME="))
		if len(recs) != 1 || recs[0]["inputTokens"].(float64) < 10 || recs[0]["tokensEstimated"] != true {
			t.Errorf("records %v", recs)
		}
	})
}

// TestHeadlessOutputSchema (issue 33): --output-schema prints the final
// answer alone when it is valid against the schema, and exits 1 at once
// with the validation error when it is not.
func TestHeadlessOutputSchema(t *testing.T) {
	t.Parallel()
	p := providers[0]
	schema := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","properties":{"files":{"type":"integer"}},"required":["files"],"additionalProperties":false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := fakemodel.New(t,
		fakemodel.Reply{Text: `{"files": 3}`},
		fakemodel.Reply{Text: `{"files": "three"}`},
	)
	env := headlessEnv(t, p, srv.URL)
	res := shiro(t, t.TempDir(), env, "-p", "--no-sandbox", "--output-schema", schema, "count the files")
	if res.code != 0 || res.stdout != `{"files":3}`+"\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", res.code, res.stdout, res.stderr)
	}
	if body := string(modelRequests(srv)[0].Body); !strings.Contains(body, `additionalProperties`) {
		t.Errorf("the schema did not reach the model: %s", body)
	}
	res = shiro(t, t.TempDir(), env, "-p", "--no-sandbox", "--output-schema", schema, "count the files")
	if res.code != 1 || !strings.Contains(res.stderr, "[error] --output-schema: the final answer does not match the schema") || res.stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %s", res.code, res.stdout, res.stderr)
	}
	if n := len(modelRequests(srv)); n != 2 {
		t.Errorf("%d requests, want 2 (no retry)", n)
	}
}
