package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/internal/workspace"
)

// trustFixture is a workspace whose project config declares a server and a
// Dockerfile image, and a SHIRO_HOME with the user's config.
func trustFixture(t *testing.T, userConfig string) (*Factory, *bytes.Buffer, *bytes.Buffer, string) {
	t.Helper()
	home, ws := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".shiro"), 0o755)
	os.WriteFile(filepath.Join(ws, ".shiro", "config.json"), []byte(`{"mcpServers": {"srv": {"command": "node", "args": ["srv.js"]}}, "sandbox": {"image": "./Dockerfile"}}`), 0o644)
	os.WriteFile(filepath.Join(ws, "Dockerfile"), []byte("FROM node:20\n"), 0o644)
	if userConfig != "" {
		os.WriteFile(filepath.Join(home, "config.json"), []byte(strings.ReplaceAll(userConfig, "WS", ws)), 0o600)
	}
	var out, errb bytes.Buffer
	env := map[string]string{"SHIRO_HOME": home, "HOME": home}
	f := &Factory{Out: &out, ErrOut: &errb, Getwd: func() (string, error) { return ws, nil },
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	return f, &out, &errb, ws
}

func TestGateTrustWithholdsAndNamesEachAsk(t *testing.T) {
	f, _, errb, ws := trustFixture(t, "")
	cfg, _, err := f.loadConfig(openWorkspace(t, ws), &SandboxFlags{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ProjectMCPServers) != 0 || cfg.Sandbox.Image != "" {
		t.Errorf("asks kept: %v %q", cfg.ProjectMCPServers, cfg.Sandbox.Image)
	}
	got := errb.String()
	for _, want := range []string{
		"[notice] trust: skipped MCP server srv: node srv.js — the workspace is not trusted",
		"[notice] trust: skipped image: build ./Dockerfile FROM node:20 (network none; its RUN steps run as root inside the build)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("stderr lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "trust: skipped"); n != 2 {
		t.Errorf("%d skipped lines, want one per ask:\n%s", n, got)
	}
}

func TestGateTrustByTrustPathsAndFlag(t *testing.T) {
	f, _, errb, ws := trustFixture(t, `{"trust": {"paths": ["WS"]}}`)
	cfg, _, err := f.loadConfig(openWorkspace(t, ws), &SandboxFlags{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ProjectMCPServers) != 1 || cfg.Sandbox.Image != "./Dockerfile" || strings.Contains(errb.String(), "skipped") {
		t.Errorf("trust.paths did not trust: %v %q\n%s", cfg.ProjectMCPServers, cfg.Sandbox.Image, errb.String())
	}
	f, _, errb, ws = trustFixture(t, `{"trust": {"paths": ["/elsewhere/*"]}}`)
	cfg, _, _ = f.loadConfig(openWorkspace(t, ws), &SandboxFlags{TrustProject: true}, nil)
	if len(cfg.ProjectMCPServers) != 1 || strings.Contains(errb.String(), "skipped") {
		t.Errorf("--trust-project did not trust:\n%s", errb.String())
	}
}

func TestTrustCommandRemembersListsRevokes(t *testing.T) {
	f, out, _, ws := trustFixture(t, "")
	run := func(args ...string) string {
		t.Helper()
		out.Reset()
		cmd := NewCmdTrust(f)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("trust %v: %v", args, err)
		}
		return out.String()
	}
	if got := run(); !strings.Contains(got, "MCP server srv: node srv.js") || !strings.Contains(got, "Remembered") {
		t.Errorf("trust:\n%s", got)
	}
	if got := run("--list"); !strings.Contains(got, ws) || !strings.Contains(got, "image: build ./Dockerfile FROM node:20") {
		t.Errorf("--list:\n%s", got)
	}
	var errb bytes.Buffer
	f.ErrOut = &errb
	cfg, _, _ := f.loadConfig(openWorkspace(t, ws), &SandboxFlags{}, nil)
	if len(cfg.ProjectMCPServers) != 1 || strings.Contains(errb.String(), "skipped") {
		t.Errorf("remembered trust not used:\n%s", errb.String())
	}
	if got := run("--revoke"); !strings.Contains(got, "Revoked") {
		t.Errorf("--revoke:\n%s", got)
	}
	if got := run("--list"); !strings.Contains(got, "No trusted workspaces.") {
		t.Errorf("--list after revoke:\n%s", got)
	}
}

// openWorkspace opens the workspace ws as a command does, for the test.
func openWorkspace(t *testing.T, ws string) *workspace.Workspace {
	t.Helper()
	w, err := workspace.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}
