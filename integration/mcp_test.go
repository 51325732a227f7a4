package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/tools/mcp/mcptest"
)

var (
	mcpechoOnce sync.Once
	mcpechoPath string
	mcpechoErr  error
)

// mcpecho builds the test MCP server (integration/internal/mcpecho) once,
// static, so that it also runs in the sandbox container.
func mcpecho(t *testing.T) string {
	t.Helper()
	mcpechoOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := os.MkdirTemp("", "shiro-mcpecho-")
		if err != nil {
			mcpechoErr = err
			return
		}
		mcpechoPath = filepath.Join(dir, "mcpecho")
		cmd := exec.Command("go", "build", "-o", mcpechoPath, "./internal/mcpecho")
		cmd.Dir = filepath.Dir(file)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			mcpechoErr = fmt.Errorf("build mcpecho: %v\n%s", err, out)
		}
	})
	if mcpechoErr != nil {
		t.Fatal(mcpechoErr)
	}
	return mcpechoPath
}

// writeJSON writes v as JSON to path, making its directory.
func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// userMCP writes the user's config (in the SHIRO_HOME of env) with servers.
func userMCP(t *testing.T, env []string, servers map[string]any) {
	t.Helper()
	home := strings.TrimPrefix(env[0], "SHIRO_HOME=")
	writeJSON(t, filepath.Join(home, "config.json"), map[string]any{"mcpServers": servers})
}

// toolResult finds the tool_result of call id in an Anthropic request.
func toolResult(body map[string]any, id string) (content string, isError, found bool) {
	for _, m := range list(body["messages"]) {
		for _, c := range list(obj(m)["content"]) {
			b := obj(c)
			if b["type"] == "tool_result" && b["tool_use_id"] == id {
				isErr, _ := b["is_error"].(bool)
				return jsonString(b["content"]), isErr, true
			}
		}
	}
	return "", false, false
}

func echoAndFail() fakemodel.Reply {
	return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{
		{ID: "call_echo", Name: "mcp__srv__echo", Input: `{"text":"hello from mcp"}`},
		{ID: "call_fail", Name: "mcp__srv__fail", Input: `{}`},
	}}
}

func TestMCPHeadlessWithoutYoloIsDenied(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t, echoAndFail(), fakemodel.Reply{Text: "Could not."})
	env := headlessEnv(t, p, srv.URL)
	userMCP(t, env, map[string]any{"srv": map[string]any{"command": mcpecho(t)}})
	ws := t.TempDir()
	res := shiro(t, ws, env, "-p", "--no-sandbox", "use the echo tool")
	if res.code != 0 {
		t.Fatalf("exit %d\nstderr: %s", res.code, res.stderr)
	}
	reqs := modelRequests(srv)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	offered := p.tools(reqs[0].JSON())
	if !slices.Contains(offered, "mcp__srv__echo") || !slices.Contains(offered, "mcp__srv__fail") {
		t.Errorf("the request offers %v", offered)
	}
	for _, id := range []string{"call_echo", "call_fail"} {
		content, isErr, ok := toolResult(reqs[1].JSON(), id)
		if !ok || !isErr || !strings.Contains(content, "No one can approve tool calls in this run") {
			t.Errorf("%s: result %q (error %v, found %v): want the denial", id, content, isErr, ok)
		}
	}
	if !strings.Contains(res.stderr, "[denied] mcp__srv__echo") {
		t.Errorf("stderr lacks the denial:\n%s", res.stderr)
	}
}

func TestMCPHeadlessWithYoloRunsTheTools(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t, echoAndFail(), fakemodel.Reply{Text: "Echoed."})
	env := headlessEnv(t, p, srv.URL)
	userMCP(t, env, map[string]any{"srv": map[string]any{"command": mcpecho(t)}})
	res := shiro(t, t.TempDir(), env, "-p", "--yolo", "--no-sandbox", "use the echo tool")
	if res.code != 0 {
		t.Fatalf("exit %d\nstderr: %s", res.code, res.stderr)
	}
	reqs := modelRequests(srv)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if content, isErr, ok := toolResult(reqs[1].JSON(), "call_echo"); !ok || isErr || !strings.Contains(content, "hello from mcp") {
		t.Errorf("echo's result %q (error %v, found %v)", content, isErr, ok)
	}
	if content, isErr, ok := toolResult(reqs[1].JSON(), "call_fail"); !ok || !isErr || !strings.Contains(content, mcptest.FailText) {
		t.Errorf("fail's result %q (error %v, found %v): want an error result", content, isErr, ok)
	}
	if !strings.Contains(res.stdout, "Echoed.") {
		t.Errorf("stdout %q", res.stdout)
	}

	// --no-mcp: the same config, no server, no tools.
	res = shiro(t, t.TempDir(), env, "-p", "--yolo", "--no-sandbox", "--no-mcp", "hi")
	if res.code != 0 {
		t.Fatalf("--no-mcp: exit %d\nstderr: %s", res.code, res.stderr)
	}
	for _, n := range p.tools(modelRequests(srv)[2].JSON()) {
		if strings.HasPrefix(n, "mcp__") {
			t.Errorf("--no-mcp offers %s", n)
		}
	}
}

func TestMCPServerThatExitsAtOnceIsANotice(t *testing.T) {
	t.Parallel()
	p := providers[0]
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "call_echo", Name: "mcp__srv__echo", Input: `{"text":"still works"}`}}},
		fakemodel.Reply{Text: "Done anyway."},
	)
	env := headlessEnv(t, p, srv.URL)
	userMCP(t, env, map[string]any{
		"srv":  map[string]any{"command": mcpecho(t)},
		"dies": map[string]any{"command": "sh", "args": []string{"-c", "echo cannot start >&2; exit 1"}},
	})
	res := shiro(t, t.TempDir(), env, "-p", "--yolo", "--no-sandbox", "go")
	if res.code != 0 {
		t.Fatalf("exit %d\nstderr: %s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "[notice] mcp dies failed: ") || !strings.Contains(res.stderr, "cannot start") {
		t.Errorf("stderr lacks the notice:\n%s", res.stderr)
	}
	if !strings.Contains(res.stdout, "Done anyway.") {
		t.Errorf("stdout %q", res.stdout)
	}
	if content, _, _ := toolResult(modelRequests(srv)[1].JSON(), "call_echo"); !strings.Contains(content, "still works") {
		t.Errorf("the working server's result: %q", content)
	}
}

// hostProcesses lists the processes in this process's pid namespace (the
// host, not a container) whose command line contains needle.
func hostProcesses(t *testing.T, needle string) []string {
	t.Helper()
	self, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("CI=true and no /proc pid namespaces to look for the server's processes in: %v", err)
		}
		t.Skipf("no /proc pid namespaces here: %v", err)
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(needle)) {
			continue
		}
		if ns, err := os.Readlink(filepath.Join(d, "ns", "pid")); err == nil && ns == self {
			out = append(out, d+": "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return out
}

func TestMCPProjectServerRunsInTheSandbox(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	p := providers[0]

	// The server's binary lives in the workspace, at the same path inside
	// the container; its name is unique to this test.
	name := fmt.Sprintf("mcpecho-%d", time.Now().UnixNano())
	bin := filepath.Join(ws, ".bin", name)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, mcpecho(t), bin, 0o755)
	writeJSON(t, filepath.Join(ws, ".shiro", "config.json"), map[string]any{
		"mcpServers": map[string]any{"srv": map[string]any{"command": bin}},
	})

	reached, hold := make(chan struct{}), make(chan struct{})
	released := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(released)
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "call_echo", Name: "mcp__srv__echo", Input: `{"text":"from the container"}`}}},
		fakemodel.Reply{Text: "Done.", Reached: reached, Hold: hold},
	)
	env := headlessEnv(t, p, srv.URL)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Binary(t), "-p", "--yolo", "--trust-project", "use the echo tool")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// The session waits for the model's second answer: the server runs.
	select {
	case <-reached:
	case err := <-exited:
		t.Fatalf("shiro ended (%v) before the second model call\nstderr: %s", err, stderr.String())
	case <-ctx.Done():
		t.Fatal("no second model call within the time limit")
	}
	id := onlyContainer(t, api, ws)
	if procs := top(t, api, id); !slices.ContainsFunc(procs, func(p string) bool { return strings.Contains(p, name) }) {
		t.Errorf("the server is not among the container's processes:\n%s", strings.Join(procs, "\n"))
	}
	if procs := hostProcesses(t, name); len(procs) > 0 {
		t.Errorf("the project's server runs on the host:\n%s", strings.Join(procs, "\n"))
	}
	released()
	if err := <-exited; err != nil {
		t.Fatalf("shiro: %v\nstderr: %s", err, stderr.String())
	}

	if !p.paired(t, modelRequests(srv)[1].JSON(), "call_echo", "from the container") {
		t.Errorf("echo's result did not reach the model: %s", modelRequests(srv)[1].Body)
	}
	if !strings.Contains(stdout.String(), "Done.") {
		t.Errorf("stdout %q", stdout.String())
	}
	noneMatch(t, top(t, api, id), name) // closing the session killed it
}
