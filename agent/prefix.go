package agent

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/shiroagent/shiro/agent/shellcmd"
)

// Command prefixes: "always allow go test …" for bash. A prefix is a
// program's name and, when the command has one, its subcommand ("go test",
// "npm run", "ls"). A bash call is allowed by the session's prefixes when
// the shell parser the guard uses reads every simple command of it, and each
// starts with an allowed prefix: no wrapper before it (sudo, env, xargs),
// nothing in the prefix only known when it runs. Anything else asks.

// maxPrefixes is how many prefixes one grant may hold: a command line with
// more is not offered a prefix grant.
const maxPrefixes = 4

// subcommand is what a second word must look like to belong to a prefix.
var subcommand = regexp.MustCompile(`^[a-z][a-z0-9_:-]*$`)

// Prefixes suggests the prefixes that would allow a bash command line:
// one per distinct simple command, in order; nil when one of its commands
// cannot be named before it runs, or there are too many.
func Prefixes(command string) [][]string {
	script, err := shellcmd.Parse(command)
	if err != nil || len(script.Commands) == 0 {
		return nil
	}
	var out [][]string
	for _, c := range script.Commands {
		p := prefixOf(c)
		if p == nil {
			return nil
		}
		if !slices.ContainsFunc(out, func(q []string) bool { return slices.Equal(p, q) }) {
			out = append(out, p)
		}
	}
	if len(out) > maxPrefixes {
		return nil
	}
	return out
}

// prefixOf is a command's prefix, nil when it cannot have one.
func prefixOf(c *shellcmd.Command) []string {
	if c.Name == "" || len(c.Wrappers) > 0 || c.ArgsFromInput || len(c.Args) == 0 || c.Args[0].Dynamic {
		return nil
	}
	p := []string{c.Name}
	if len(c.Args) > 1 && !c.Args[1].Dynamic && subcommand.MatchString(c.Args[1].Text) {
		p = append(p, c.Args[1].Text)
	}
	return p
}

// matches reports whether a command starts with prefix p.
func matches(c *shellcmd.Command, p []string) bool {
	if c.Name == "" || c.Name != p[0] || len(c.Wrappers) > 0 || c.ArgsFromInput || len(c.Args) < len(p) || c.Args[0].Dynamic {
		return false
	}
	for i := 1; i < len(p); i++ {
		if c.Args[i].Dynamic || c.Args[i].Text != p[i] {
			return false
		}
	}
	return true
}

// PrefixesAllow reports whether granted prefixes allow a command line:
// every simple command in it starts with one of them.
func PrefixesAllow(granted [][]string, command string) bool {
	if len(granted) == 0 {
		return false
	}
	script, err := shellcmd.Parse(command)
	if err != nil || len(script.Commands) == 0 {
		return false
	}
	for _, c := range script.Commands {
		if !slices.ContainsFunc(granted, func(p []string) bool { return matches(c, p) }) {
			return false
		}
	}
	return true
}

// FormatPrefix shows a prefix as the user reads it: "go test …".
func FormatPrefix(p []string) string { return strings.Join(p, " ") + " …" }

// commandOf is the command of a bash call ("" for any other call).
func commandOf(call ToolCall) string {
	if call.Name != "bash" {
		return ""
	}
	var in struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(call.Input, &in) != nil {
		return ""
	}
	return in.Command
}

// prefixAllowed reports whether the session's prefix grants allow call.
func (a *Agent) prefixAllowed(call ToolCall) bool {
	cmd := commandOf(call)
	if cmd == "" {
		return false
	}
	a.mu.Lock()
	granted := a.prefixes[call.Name]
	a.mu.Unlock()
	return PrefixesAllow(granted, cmd)
}

// AllowedPrefixes lists the command prefixes allowed for a tool this
// session (/tools shows them).
func (a *Agent) AllowedPrefixes(tool string) [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.prefixes[tool])
}
