package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/cmd/shiro/cli"
	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/local"
)

// fakeBackend is a backend that exists only in this test package: it
// reaches shiro through sandbox.Register alone. Its sandboxes run on the
// host (sandbox/local); it remembers what shiro asked of it.
type fakeBackend struct {
	mu     sync.Mutex
	opened []sandbox.Spec
	doctor []sandbox.Spec
	listed []sandbox.Settings
}

const fakeName = "fake-engine"

var fake = &fakeBackend{}

func init() { sandbox.Register(fake) }

func (b *fakeBackend) Name() string                                 { return fakeName }
func (b *fakeBackend) DefaultWorkspaceMode(sandbox.Settings) string { return sandbox.WorkspaceMount }

func (b *fakeBackend) Open(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	b.mu.Lock()
	b.opened = append(b.opened, spec)
	b.mu.Unlock()
	return local.New(spec.Workspace)
}

func (b *fakeBackend) Manage(_ context.Context, s sandbox.Settings) (sandbox.Manager, error) {
	b.mu.Lock()
	b.listed = append(b.listed, s)
	b.mu.Unlock()
	return fakeManager{}, nil
}

func (b *fakeBackend) Doctor(_ context.Context, spec sandbox.Spec, r sandbox.Report) {
	b.mu.Lock()
	b.doctor = append(b.doctor, spec)
	b.mu.Unlock()
	r.OK("fake", "the fake engine holds %s (%s)", spec.Workspace, spec.WorkspaceMode)
	r.Fail("fakefail", "the fake engine's own failure", "nothing to do")
}

func (b *fakeBackend) PlanImage(*workspace.Workspace, sandbox.Settings) (sandbox.ImagePlan, error) {
	return sandbox.ImagePlan{}, errors.New("the fake engine runs no images")
}

func (b *fakeBackend) BuildImage(context.Context, sandbox.ImageBuild) (string, error) {
	return "fake:built", nil
}

type fakeManager struct{}

func (fakeManager) List(_ context.Context, ws string) ([]sandbox.Entry, error) {
	return []sandbox.Entry{{Backend: fakeName, Workspace: "/fake/ws", Name: "box-1", Shown: "box/one", Image: "fake:img", State: "running",
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}, nil
}

func (fakeManager) Stop(_ context.Context, ws string, report func(sandbox.Item)) error {
	report(sandbox.Item{Kind: "box", Name: "box/one", Workspace: ws})
	return nil
}

func (fakeManager) Remove(_ context.Context, ws string, report func(sandbox.Item)) error {
	report(sandbox.Item{Kind: "box", Name: "box/one", Workspace: ws})
	return nil
}

func (fakeManager) Prune(_ context.Context, dryRun bool, report func(sandbox.Item)) error {
	report(sandbox.Item{Kind: "box", Name: "box/old", Workspace: "/gone", State: "stopped"})
	return nil
}

func (fakeManager) Close() error { return nil }

// run runs shiro's root command in ws with a private home.
func run(t *testing.T, ws string, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	home := t.TempDir()
	vars := map[string]string{"HOME": home, "SHIRO_HOME": home}
	for k, v := range env {
		vars[k] = v
	}
	var out, errOut bytes.Buffer
	f := &cli.Factory{
		In: strings.NewReader(""), Out: &out, ErrOut: &errOut, Version: "test",
		Getwd:     func() (string, error) { return ws, nil },
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}
	root := cli.NewCmdRoot(f)
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func TestABackendRegisteredByATestIsAFullBackend(t *testing.T) {
	ws := t.TempDir()

	// --backend takes it, and `sandbox ls` lists its sandboxes (beside
	// the default backend's, when that engine answers).
	stdout, stderr, err := run(t, ws, nil, "--backend", fakeName, "sandbox", "ls", "--json")
	if err != nil {
		t.Fatalf("sandbox ls: %v\n%s", err, stderr)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	found := false
	for _, e := range list {
		if e["backend"] == fakeName {
			found = true
			if e["container"] != "box-1" || e["workspace"] != "/fake/ws" || e["state"] != "running" {
				t.Errorf("entry %v", e)
			}
		}
	}
	if !found {
		t.Errorf("the fake backend's sandbox is not listed:\n%s", stdout)
	}
	stdout, _, err = run(t, ws, nil, "--backend", fakeName, "sandbox", "ls")
	if err != nil || !strings.Contains(stdout, "box/one") || !strings.Contains(stdout, "fake:img") {
		t.Errorf("sandbox ls (%v):\n%s", err, stdout)
	}
	_, stderr, err = run(t, ws, nil, "--backend", fakeName, "sandbox", "stop")
	if err != nil || !strings.Contains(stderr, "stopping box box/one ("+ws+")") {
		t.Errorf("sandbox stop (%v):\n%s", err, stderr)
	}
	stdout, _, err = run(t, ws, nil, "--backend", fakeName, "sandbox", "prune", "--dry-run")
	if err != nil || !strings.Contains(stdout, "would remove box box/old (/gone, stopped)") {
		t.Errorf("sandbox prune (%v):\n%s", err, stdout)
	}

	// doctor runs its checks, with the session's spec.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"data":[]}`)) }))
	defer srv.Close()
	env := map[string]string{"SHIRO_BASE_URL": srv.URL, "SHIRO_PROVIDER": "openai-compatible"}
	stdout, _, err = run(t, ws, env, "--backend", fakeName, "--network", "none", "doctor", "--no-mcp")
	if err == nil {
		t.Error("doctor passed though the backend reported a failure")
	}
	for _, want := range []string{"✓ fake      the fake engine holds " + ws + " (mount)", "✗ fakefail  the fake engine's own failure — fix: nothing to do"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor's output lacks %q:\n%s", want, stdout)
		}
	}

	// A session's tools open their sandbox on it.
	stdout, stderr, err = run(t, ws, nil, "--backend", fakeName, "--network", "none", "tool", "bash", `{"command":"echo from-the-fake"}`)
	if err != nil || !strings.Contains(stdout, "from-the-fake") {
		t.Errorf("tool bash (%v):\n%s\n%s", err, stdout, stderr)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.opened) != 1 || fake.opened[0].Workspace != ws || fake.opened[0].Network != sandbox.NetworkNone {
		t.Errorf("opened %+v", fake.opened)
	}
	if len(fake.doctor) != 1 || fake.doctor[0].WorkspaceMode != sandbox.WorkspaceMount {
		t.Errorf("doctor %+v", fake.doctor)
	}
	// Both hand the backend the workspace the command opened.
	for _, spec := range append(slices.Clone(fake.opened), fake.doctor...) {
		if spec.Opened == nil || spec.Opened.Path() != ws {
			t.Errorf("the spec's opened workspace is %v, want the command's open of %s", spec.Opened, ws)
		}
	}

	// The key's values and the flag's help name it.
	stdout, _, _ = run(t, ws, nil, "--help")
	if !strings.Contains(stdout, fakeName) {
		t.Errorf("--help does not name the backend:\n%s", stdout)
	}
	if _, _, err := run(t, ws, nil, "--backend", "no-such-engine", "sandbox", "ls"); err == nil || !strings.Contains(err.Error(), fakeName) {
		t.Errorf("an unknown backend: %v", err)
	}
}
