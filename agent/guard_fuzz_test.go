package agent_test

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/shellcmd"
)

// wrappings run a command line unchanged: in a subshell, a block, a
// command substitution, a list, bash -c, eval, a here-document or an echo
// piped into a shell.
func wrappings(c string) map[string]string {
	out := map[string]string{}
	q, err := syntax.Quote(c, syntax.LangBash)
	if err == nil {
		out["bash -c"] = "bash -c -- " + q
		out["sh -c"] = "sh -ec -- " + q
		out["eval"] = "eval " + q
	}
	// A final backslash would join the next line: these change its meaning.
	if !strings.HasSuffix(c, `\`) {
		out["subshell"] = "(\n" + c + "\n)"
		out["block"] = "{\n" + c + "\n}"
		out["and list"] = "true && {\n" + c + "\n}"
		out["substitution"] = "x=$(\n" + c + "\n)"
		out["as command"] = "$(\n" + c + "\n)"
		if err == nil {
			out["echo | bash"] = "echo " + q + " | bash"
		}
		if !strings.Contains(c, "SHIRO_EOF") {
			out["here-document"] = "sh <<'SHIRO_EOF'\n" + c + "\nSHIRO_EOF"
		}
	}
	// A single simple command: wrappers and other spellings of its words.
	s, err := shellcmd.Parse(c)
	if err != nil || len(s.Commands) != 1 || len(s.Redirects) != 0 {
		return out
	}
	cmd := s.Commands[0]
	if !cmd.Static() || cmd.Code || cmd.Stdin != nil || cmd.Background || cmd.Piped || !simpleCall(c) {
		return out
	}
	if strings.HasPrefix(cmd.String(), "-") {
		return out // a wrapper would take it for its option
	}
	for _, w := range []string{"command ", "env ", "env -i A=1 ", "sudo ", "sudo -u root -- ", "nice -n 5 ", "timeout 5 ", "nohup ", "exec ", "time ", "setsid ", "busybox "} {
		out["wrapped in "+w] = w + c
	}
	var words []string
	for _, wr := range cmd.Wrappers {
		words = append(words, wordTexts(wr.Args)...)
	}
	argv := append(words, cmd.Argv()...)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangBash)
		if err != nil {
			return out
		}
		quoted[i] = q
	}
	rest := strings.Join(quoted[1:], " ")
	name := argv[0]
	out["every word quoted"] = strings.Join(quoted, " ")
	out["double-quoted name"] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`").Replace(name) + `" ` + rest
	if isPlainName(name) {
		out["backslash name"] = `\` + name + " " + rest
		out["path to the name"] = "/usr/bin/" + name + " " + rest
		if len(name) > 1 {
			out["split name"] = name[:1] + "''" + name[1:] + " " + rest
		}
	}
	return out
}

func wordTexts(ws []shellcmd.Word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Text
	}
	return out
}

// simpleCall reports a line that is one plain call: no keyword, function,
// assignment or redirection around it.
func simpleCall(c string) bool {
	f, err := syntax.NewParser().Parse(strings.NewReader(c), "")
	if err != nil || len(f.Stmts) != 1 {
		return false
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	return ok && len(call.Assigns) == 0 && len(st.Redirs) == 0 && !st.Negated && !st.Background
}

func isPlainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// FuzzGuardSeesThroughWrapping checks that wrapping or respelling a command
// line the guard refuses never makes it pass: a refusal with someone
// approving stays a refusal, and without anyone approving, the wrapped
// form is refused too (at worst because it cannot be parsed).
func FuzzGuardSeesThroughWrapping(f *testing.F) {
	for _, c := range append(append([]guardCase(nil), evasions...), ordinary...) {
		f.Add(c.command)
	}
	for _, c := range readRealWorld(f) {
		f.Add(c.command)
	}
	f.Fuzz(func(t *testing.T, c string) {
		if strings.IndexByte(c, 0) >= 0 {
			// Cannot be run (an argument ends at NUL), and is refused
			// under --yolo for that.
			if agent.GuardReasonUnattended(c) == "" {
				t.Fatalf("allowed with a NUL: %q", c)
			}
			return
		}
		attended := agent.GuardReason(c) != ""
		unattended := agent.GuardReasonUnattended(c) != ""
		if attended && !unattended {
			t.Fatalf("refused with someone approving, allowed without: %q", c)
		}
		if _, err := shellcmd.Parse(c); err != nil || !unattended {
			return
		}
		for how, w := range wrappings(c) {
			if attended {
				if _, err := shellcmd.Parse(w); err == nil && agent.GuardReason(w) == "" {
					t.Errorf("%q is refused, %s it is allowed: %q", c, how, w)
				}
			}
			if agent.GuardReasonUnattended(w) == "" {
				t.Errorf("%q is refused under --yolo, %s it is allowed: %q", c, how, w)
			}
		}
	})
}
