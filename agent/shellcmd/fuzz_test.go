package shellcmd_test

import (
	"strings"
	"testing"

	"github.com/shiroagent/shiro/agent/shellcmd"
)

// FuzzParse checks that Parse never panics and that what it lists holds
// together.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"rm -rf /", `sudo env -S "A=1 rm -rf" /`, "bash -c 'eval \"rm x\"'", "echo 'rm -rf /' | sh",
		"cat <<EOF | psql\nDROP TABLE x;\nEOF", ":(){ :|:& };:", "find . -exec rm {} +", "xargs -0 rm",
		`git -c alias.x='!rm -rf /' x`, "watch -n1 'ls | wc'", "flock /l -c 'a'", "a=$(b) c <(d) > $(e)",
		"$'\\x72\\155' {a,b}c ${X:-$(y)}", "for ((i=0;i<3;i++)); do :; done", "case $x in a) b;; esac",
		"timeout -k", "env -S", "sudo -u", "ionice -c", "chroot", "bash -c", "trap", "exec 3>&1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, command string) {
		s, err := shellcmd.Parse(command)
		if s == nil {
			t.Fatalf("no script (err %v)", err)
		}
		if len(s.Commands) > shellcmd.MaxCommands {
			t.Errorf("%d commands", len(s.Commands))
		}
		for _, c := range s.Commands {
			if len(c.Args) == 0 {
				t.Fatalf("a command without words in %q", command)
			}
			if c.Depth < 0 || c.Depth > shellcmd.MaxDepth {
				t.Errorf("depth %d", c.Depth)
			}
			first := c.Args[0]
			switch {
			case c.Name == "" && !first.Dynamic && first.Text != "" && !strings.HasSuffix(first.Text, "/"):
				t.Errorf("static %q has no name", first.Text)
			case c.Name != "" && !strings.HasSuffix(first.Text, c.Name):
				t.Errorf("name %q of %q", c.Name, first.Text)
			}
			for _, w := range c.Args {
				if !w.Dynamic && w.Prefix != w.Text {
					t.Errorf("static word %+v", w)
				}
				if !strings.HasPrefix(w.Text, w.Prefix) {
					t.Errorf("prefix of %+v", w)
				}
			}
		}
	})
}
