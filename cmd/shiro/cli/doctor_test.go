package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/tools/mcp/mcptest"
)

func TestDoctorProvider(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		provider string
		key      string
		status   int
		baseURL  string // overrides the test server's
		want     []string
		failed   bool
	}{
		{name: "the models listing answers", provider: config.ProviderAnthropic, key: "k-123", status: 200,
			want: []string{"✓ key       anthropic: an API key is set", "✓ endpoint", "answered GET /models (HTTP 200)"}},
		{name: "the key is refused", provider: config.ProviderOpenAI, key: "k-123", status: 401,
			want: []string{"✗ endpoint", "refused the key (HTTP 401)", "fix: check the API key"}, failed: true},
		{name: "no key: reachable is all the endpoint can say", provider: config.ProviderAnthropic, status: 401,
			want: []string{"✗ key       anthropic: no API key — fix: Set ANTHROPIC_API_KEY", "✓ endpoint", "is reachable (HTTP 401"}, failed: true},
		{name: "a keyless compatible server without a listing", provider: config.ProviderOpenAICompatible, status: 404,
			want: []string{"✓ key       openai-compatible: none set", "✓ endpoint", "(HTTP 404 for GET /models)"}},
		{name: "a server error", provider: config.ProviderOpenAI, key: "k-123", status: 503,
			want: []string{"✗ endpoint", "answered HTTP 503"}, failed: true},
		{name: "unreachable, and credentials in the URL are not shown", provider: config.ProviderOpenAI, key: "k-123",
			baseURL: "http://user:pass@127.0.0.1:1/v1?token=zzz", want: []string{"✗ endpoint  http://127.0.0.1:1/v1 cannot be reached", "fix: check the network"}, failed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var gotAuth string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/models" || r.Method != http.MethodGet {
					t.Errorf("%s %s", r.Method, r.URL.Path)
				}
				gotAuth = r.Header.Get("Authorization") + r.Header.Get("x-api-key")
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			base := srv.URL + "/v1"
			if tc.baseURL != "" {
				base = tc.baseURL
			}
			var out bytes.Buffer
			d := &doctor{out: &out}
			d.checkProvider(t.Context(), config.Config{Provider: tc.provider, APIKey: tc.key, BaseURL: base}, srv.Client())
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if d.failed != tc.failed {
				t.Errorf("failed = %v, want %v", d.failed, tc.failed)
			}
			if tc.key != "" && tc.baseURL == "" && !strings.Contains(gotAuth, tc.key) {
				t.Errorf("the key was not sent (%q)", gotAuth)
			}
			for _, secret := range []string{"k-123", "pass", "zzz"} {
				if strings.Contains(out.String(), secret) {
					t.Errorf("%q was printed:\n%s", secret, out.String())
				}
			}
		})
	}
}

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{4 << 30: "4g", 512 << 20: "512m", 1536 << 20: "1536m", 1000: "1000 bytes"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDoctorCommandTakesTheSandboxFlags(t *testing.T) {
	t.Parallel()
	f := &Factory{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	sf := &SandboxFlags{}
	root := &cobra.Command{Use: "shiro", SilenceUsage: true, SilenceErrors: true}
	sf.bind(root)
	var got *DoctorOptions
	root.AddCommand(NewCmdDoctor(f, sf, func(o *DoctorOptions) error { got = o; return nil }))
	root.SetArgs([]string{"--image", "./Dockerfile", "--network", "none", "doctor"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Sandbox.Image != "./Dockerfile" || got.Sandbox.Network != "none" {
		t.Errorf("options %+v", got)
	}
}

func TestDoctorMCP(t *testing.T) {
	t.Parallel()
	command, env := mcptest.Command()
	echo, err := json.Marshal(map[string]any{"command": command, "env": env})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{
		MCPServers: map[string]json.RawMessage{
			"echo":   echo,
			"broken": json.RawMessage(`{"command": "sh", "args": ["-c", "exit 3"]}`),
		},
		ProjectMCPServers: map[string]json.RawMessage{
			"remote": json.RawMessage(`{"url": "http://127.0.0.1:1/mcp"}`),
			"local":  json.RawMessage(`{"command": "srv"}`),
		},
	}
	ws := t.TempDir()
	var out bytes.Buffer
	d := &doctor{out: &out}
	d.checkMCP(t.Context(), cfg, orchestrator.SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: ws}, "test")
	got := out.String()
	for _, want := range []string{
		"✓ mcp       echo (your config, stdio on the host): 10 tools",
		"✗ mcp       broken (your config): ",
		"✓ mcp       remote (the project's config): not started: remote servers in the project's config are ignored",
		"✗ mcp       local (the project's config): ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if !d.failed {
		t.Error("a failed server should fail the doctor")
	}
}

func TestDoctorMCPDoesNotStallOnAHangingServer(t *testing.T) {
	t.Parallel()
	command, env := mcptest.Command()
	cfgOf := func(mode string) json.RawMessage {
		e := map[string]string{}
		for k, v := range env {
			e[k] = v
		}
		if mode != "" {
			e[mcptest.ModeEnv] = mode
		}
		b, err := json.Marshal(map[string]any{"command": command, "env": e})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg := config.Config{MCPServers: map[string]json.RawMessage{"echo": cfgOf(""), "hang": cfgOf("hang"), "crash": cfgOf("crash")}}
	var out bytes.Buffer
	d := &doctor{out: &out}
	start := time.Now()
	d.checkMCPWithin(t.Context(), cfg, orchestrator.SandboxConfig{Settings: sandbox.Settings{NoSandbox: true}, Workspace: t.TempDir()}, "test", 2*time.Second, 500*time.Millisecond)
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("doctor took %s for a server that hangs (timeout 2s)", took)
	}
	got := out.String()
	lines := strings.Split(got, "\n")
	index := func(prefix string) int {
		return slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
	}
	connecting := index("… mcp       connecting 3 server(s) at once: crash, echo, hang")
	echo := index("✓ mcp       echo (your config, stdio on the host): 10 tools")
	crash := index("✗ mcp       crash (your config): the server exited with status 3 before it answered; stderr: " + mcptest.CrashText)
	waiting := index("… mcp       still waiting for hang (")
	hang := index("✗ mcp       hang (your config): the server hangs: it started but did not answer the initialize request within 2s")
	if connecting != 0 || echo < 0 || crash < 0 || waiting < 0 || hang < 0 || echo > hang || crash > hang || waiting > hang {
		t.Errorf("output (connecting %d, echo %d, crash %d, waiting %d, hang %d):\n%s", connecting, echo, crash, waiting, hang, got)
	}
}
