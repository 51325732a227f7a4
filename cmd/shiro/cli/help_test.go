package cli

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/orchestrator/config"
)

func runRootCmd(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	f := &Factory{In: strings.NewReader(""), Out: &out, ErrOut: &out, Version: "1.2.3",
		Getwd: func() (string, error) { return t.TempDir(), nil },
		LookupEnv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		}}
	cmd := NewCmdRoot(f)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return out.String()
}

func TestVersionLine(t *testing.T) {
	want := "shiro 1.2.3  " + runtime.Version() + "  " + runtime.GOOS + "-" + runtime.GOARCH + "  compiled\n"
	for _, flag := range []string{"-v", "--version"} {
		if got := runRootCmd(t, nil, flag); got != want {
			t.Errorf("%s: %q, want %q", flag, got, want)
		}
	}
}

func TestHelpListsFilesEnvironmentAndAnExampleConfig(t *testing.T) {
	home := t.TempDir()
	got := runRootCmd(t, map[string]string{"SHIRO_HOME": home}, "--help")
	for _, want := range []string{
		filepath.Join(home, "config.json"), ".shiro/config.json", filepath.Join(home, "sessions", "<id>.json"),
		filepath.Join(home, "skills", "*.md"), "AGENTS.md",
		"SHIRO_PROVIDER", "SHIRO_MODEL", "SHIRO_BASE_URL", "SHIRO_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "SHIRO_HOME", "DOCKER_HOST",
		"Example config:", `"agent": "default"`, `"thinking": "medium"`,
		"--agent string", "--think string",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestHelpListsEveryConfigKey(t *testing.T) {
	got := runRootCmd(t, map[string]string{"SHIRO_HOME": t.TempDir()}, "--help")
	for _, k := range config.Keys() {
		if !strings.Contains(got, "\n  "+k.Name+" ") || !strings.Contains(got, k.Doc) {
			t.Errorf("--help lacks the key %s (%s)", k.Name, k.Doc)
		}
	}
	for _, want := range []string{
		"sandbox.memory       size; default 4g; --memory; a project may only lower it",
		"provider             anthropic|openai|openai-compatible; default anthropic; SHIRO_PROVIDER; --provider; not from a project",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}
