package trust

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/tools/mcp"
)

func projectConfig(t *testing.T, ws string, servers map[string]string, image string) config.Config {
	t.Helper()
	cfg := config.Config{ProjectMCPServers: map[string]json.RawMessage{}}
	for n, raw := range servers {
		cfg.ProjectMCPServers[n] = json.RawMessage(raw)
	}
	if image != "" {
		cfg.Sandbox.Image, cfg.Sandbox.ImageFromProject, cfg.Sandbox.Network = image, true, "none"
	}
	return cfg
}

func TestProjectAsksListsStdioServersAndTheImage(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "Dockerfile"), []byte("# c\nFROM --platform=linux/amd64 base:1 AS b\nFROM b\nFROM \\\n  other:2\n"), 0o644)
	cfg := projectConfig(t, ws, map[string]string{
		"b":      `{"command": "node", "args": ["srv.js", "a b"], "env": {"K": "v"}}`,
		"a":      `{"command": "python3", "cwd": "tools"}`,
		"remote": `{"url": "http://example.invalid/mcp"}`,
		"mine":   `{"command": "x"}`,
	}, "./Dockerfile")
	cfg.MCPServers = map[string]json.RawMessage{"mine": json.RawMessage(`{"command": "y"}`)}
	asks := ProjectAsks(cfg, ws)
	var got []string
	for _, a := range asks {
		got = append(got, a.String())
	}
	want := []string{
		"MCP server a: cd tools && python3",
		"MCP server b: env K=v node srv.js 'a b'",
		"image: build ./Dockerfile FROM base:1, other:2 (network none; its RUN steps run as root inside the build)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("asks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The network is the user's: it is shown, not hashed.
	cfg.Sandbox.Network = "bridge"
	if Hash(ProjectAsks(cfg, ws)) != Hash(asks) {
		t.Error("the build network changed the hash")
	}
	Withhold(&cfg, asks)
	if cfg.Sandbox.Image != "" || cfg.Sandbox.ImageFromProject {
		t.Errorf("image kept: %+v", cfg.Sandbox)
	}
	if _, ok := cfg.ProjectMCPServers["remote"]; !ok || len(cfg.ProjectMCPServers) != 2 {
		t.Errorf("servers after withholding: %v", cfg.ProjectMCPServers)
	}
}

func TestProjectAsksDevcontainer(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".devcontainer"), 0o755)
	os.WriteFile(filepath.Join(ws, ".devcontainer", "devcontainer.json"), []byte(`{"build": {"dockerfile": "Dockerfile"}}`), 0o644)
	os.WriteFile(filepath.Join(ws, ".devcontainer", "Dockerfile"), []byte("FROM node:20\n"), 0o644)
	asks := ProjectAsks(projectConfig(t, ws, nil, "devcontainer"), ws)
	if len(asks) != 1 || !strings.Contains(asks[0].What, "build ./.devcontainer/Dockerfile (from ./.devcontainer/devcontainer.json) FROM node:20") {
		t.Fatalf("asks: %+v", asks)
	}
	// A Dockerfile that leaves the workspace is still an ask, saying why
	// it cannot be read.
	asks = ProjectAsks(projectConfig(t, ws, nil, "../x/Dockerfile"), ws)
	if len(asks) != 1 || !strings.Contains(asks[0].What, "cannot be read") {
		t.Fatalf("asks: %+v", asks)
	}
}

func TestCommandLineQuotesControlCharacters(t *testing.T) {
	got := CommandLine(mcp.Config{Command: "sh", Args: []string{"-c", "ok\rhidden"}})
	if !strings.Contains(got, `$"ok\rhidden"`) {
		t.Fatalf("got %q", got)
	}
}

func TestStoreRememberCheckRevoke(t *testing.T) {
	ws := t.TempDir()
	st := NewStore(filepath.Join(t.TempDir(), "data"))
	asks := []Ask{{Kind: KindMCP, Name: "s", What: "node a.js"}}
	s, err := Check(st, ws, asks, false, nil, "")
	if err != nil || s.Trusted || s.Known {
		t.Fatalf("fresh: %+v %v", s, err)
	}
	if err := st.Remember(ws, asks); err != nil {
		t.Fatal(err)
	}
	if s, _ := Check(st, ws, asks, false, nil, ""); !s.Trusted || s.By != "remembered" {
		t.Fatalf("remembered: %+v", s)
	}
	changed := []Ask{{Kind: KindMCP, Name: "s", What: "node b.js"}, {Kind: KindImage, Name: "image", What: "run the image x"}}
	s, _ = Check(st, ws, changed, false, nil, "")
	if s.Trusted || !s.Known {
		t.Fatalf("changed: %+v", s)
	}
	lines := strings.Join(s.Change.Lines(), "\n")
	if !strings.Contains(lines, "changed MCP server s: was node a.js, now node b.js") || !strings.Contains(lines, "new image: run the image x") {
		t.Errorf("change lines:\n%s", lines)
	}
	if s, _ := Check(st, ws, changed, true, nil, ""); !s.Trusted || s.By != "--trust-project" {
		t.Errorf("flag: %+v", s)
	}
	// A link to the workspace is the same workspace.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(ws, link)
	if s, _ := Check(st, link, asks, false, nil, ""); !s.Trusted {
		t.Errorf("through a link: %+v", s)
	}
	if had, err := st.Revoke(ws); !had || err != nil {
		t.Fatalf("revoke: %v %v", had, err)
	}
	if s, _ := Check(st, ws, asks, false, nil, ""); s.Trusted || s.Known {
		t.Errorf("after revoke: %+v", s)
	}
	if fi, err := os.Stat(st.File); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("store file: %v %v", fi, err)
	}
}

func TestMatchPaths(t *testing.T) {
	home := "/home/u"
	for _, c := range []struct {
		ws      string
		pattern string
		want    bool
	}{
		{"/home/u/work/a", "~/work/*", true},
		{"/home/u/work/a/b", "~/work/*", false},
		{"/home/u/work/a/b", "~/work/**", true},
		{"/srv/repo", "/srv/repo", true},
		{"/srv/repo2", "/srv/repo", false},
		{"/srv/repo", "relative/*", false},
	} {
		if got := MatchPaths(c.ws, []string{c.pattern}, home); got != c.want {
			t.Errorf("MatchPaths(%q, %q) = %v, want %v", c.ws, c.pattern, got, c.want)
		}
	}
}

func TestAsksHideNothing(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "Dockerfile"), []byte("FROM evil\x1b[2K:1\n"), 0o644)
	cfg := projectConfig(t, ws, map[string]string{"s\u202ex": `{"command": "node"}`}, "./Dockerfile")
	asks := ProjectAsks(cfg, ws)
	for _, a := range asks {
		if strings.ContainsAny(a.String(), "\x1b\u202e") {
			t.Errorf("an ask hides something: %q", a.String())
		}
	}
	// Withholding still finds the server by its real name.
	Withhold(&cfg, asks)
	if len(cfg.ProjectMCPServers) != 0 {
		t.Errorf("kept: %v", cfg.ProjectMCPServers)
	}
	cfg = projectConfig(t, ws, map[string]string{"s": `{"command": "node"}`}, "./Dockerfile")
	cfg.Sandbox.NoSandbox = true
	if asks := ProjectAsks(cfg, ws); len(asks) != 0 {
		t.Errorf("--no-sandbox asks: %v", asks)
	}
}
