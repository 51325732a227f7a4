package cli

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/shiroagent/shiro/orchestrator/config"
)

// versionLine is what -v prints: version, Go runtime, platform, and how
// the binary was made (always compiled, for a Go program).
func versionLine(version string) string {
	return fmt.Sprintf("shiro %s  %s  %s-%s  compiled\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// rootHelp is the long help of `shiro`: what it is, examples, where its
// files live (as resolved for this environment), the environment it
// reads and an example config file.
func rootHelp(lookup func(string) (string, bool)) string {
	cfgFile, sessions, data := "~/.config/shiro/config.json", "~/.local/share/shiro/sessions", "~/.local/share/shiro"
	if p, err := config.ResolvePaths(lookup); err == nil {
		cfgFile, sessions, data = p.ConfigFile(), p.SessionsDir(), p.DataDir
	}
	row := func(path, what string) string { return fmt.Sprintf("  %-38s %s\n", path, what) }
	files := row(cfgFile, "your settings") +
		row(".shiro/config.json", "the project's settings (cannot loosen the sandbox)") +
		row(filepath.Join(sessions, "<id>.json"), "saved sessions") +
		row(filepath.Join(data, "memory"), "what shiro remembers of each project") +
		row(filepath.Join(filepath.Dir(cfgFile), "skills", "*.md"), "your skills (.shiro/skills/*.md: the project's)") +
		row("AGENTS.md, CLAUDE.md, .shiro.md", "project instructions (/init writes AGENTS.md)")
	return `shiro is a terminal coding agent. A model reads, searches and edits the code
and runs commands; every command, search and git call runs in a Docker
container with the workspace mounted at the same path.

  shiro                               the chat UI
  shiro -p "fix the failing test"     run headless (text on stdout)
  shiro -p --json "..."               one JSON event per line
  shiro -c -p "and now the docs"      continue this directory's last session
  shiro --agent plan -p "..."         plan without changing anything

Agents: default (thinks at medium), quick (no thinking, 12 steps), deep (max,
80 steps), plan and review (read-only, high). Thinking: off, low, medium,
high, max. Precedence: flags > environment > project file > user file.

Files:
` + files + `Environment:
  SHIRO_PROVIDER, SHIRO_MODEL, SHIRO_BASE_URL, SHIRO_API_KEY, SHIRO_OPENAI_API
                                        override the config file
  ANTHROPIC_API_KEY, OPENAI_API_KEY     the providers' keys
  SHIRO_HOME                            keep all of shiro's files in one directory
  XDG_CONFIG_HOME, XDG_DATA_HOME        where they go otherwise
  DOCKER_HOST                           the Docker engine to use

Config keys (in config.json; dotted keys are nested objects):
` + configKeys() + `
Example config:
  {
    "provider": "anthropic",
    "model": "claude-sonnet-4-5",
    "agent": "default",
    "thinking": "medium",
    "plugins": ["guard", "time", "bell"],
    "toolSets": ["edit-plus", "git"],
    "sandbox": { "network": "bridge", "memory": "4g", "env": ["GOFLAGS=-mod=mod"] },
    "mcpServers": { "docs": { "url": "https://mcp.example.com/mcp" } }
  }`
}

// configKeys lists the configuration keys from config's table: name, kind,
// default, the variable and flag that set it, what a project may do, and
// what the key is for.
func configKeys() string {
	var b strings.Builder
	for _, k := range config.Keys() {
		what := []string{k.Kind}
		if k.Default != "" {
			what = append(what, "default "+k.Default)
		}
		for _, s := range []string{k.Env, k.Flag, k.Project} {
			if s != "" {
				what = append(what, s)
			}
		}
		fmt.Fprintf(&b, "  %-20s %s\n  %-20s %s\n", k.Name, strings.Join(what, "; "), "", k.Doc)
	}
	return b.String()
}
