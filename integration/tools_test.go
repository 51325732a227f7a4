package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/integration/testenv"
)

// TestEveryToolThroughTheCLI runs all fourteen tools with `shiro tool`,
// in the container and with --no-sandbox, on a small git repository.
func TestEveryToolThroughTheCLI(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	for _, mode := range []string{"sandbox", "no-sandbox"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ws := testenv.Workspace(t, api)
			git := func(args ...string) {
				cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...)
				cmd.Dir = ws
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			if err := os.MkdirAll(filepath.Join(ws, "src"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "src", "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			git("init", "-q", "-b", "main")
			git("add", ".")
			git("commit", "-q", "-m", "first commit")

			var flags []string
			if mode == "no-sandbox" {
				flags = []string{"--no-sandbox"}
			}
			cases := []struct {
				tool, input, want string
			}{
				{"read_file", `{"path":"src/main.go"}`, "3: func main() {}"},
				{"read_many_files", `{"files":[{"path":"src/main.go"},{"path":"nope.go"}]}`, "[unreadable: No such file: nope.go]"},
				{"glob", `{"pattern":"**/*.go"}`, "src/main.go"},
				{"list_dir", `{}`, "src/"},
				{"grep", `{"pattern":"func main"}`, "src/main.go:3: func main() {}"},
				{"bash", `{"command":"echo from-bash"}`, "from-bash"},
				{"write_file", `{"path":"src/new.go","content":"package main\n"}`, "Wrote 13 chars to src/new.go"},
				{"edit_file", `{"path":"src/new.go","oldString":"main","newString":"other"}`, "Replaced 1 occurrence(s) in src/new.go"},
				{"multi_edit", `{"path":"src/new.go","edits":[{"oldString":"other","newString":"third"}]}`, "Applied 1 edit(s) to src/new.go (1x)"},
				{"git_status", `{}`, "On main, 1 changed:"},
				{"git_diff", `{}`, "No uncommitted changes."},
				{"git_log", `{}`, "first commit"},
				{"git_show", `{"ref":"HEAD"}`, "first commit"},
				{"git_blame", `{"path":"src/main.go"}`, "func main() {}"},
			}
			for _, c := range cases {
				res := shiro(t, ws, nil, append(flags, "tool", c.tool, c.input)...)
				if res.code != 0 || !strings.Contains(res.stdout, c.want) {
					t.Errorf("%s %s: exit %d, want %q in:\n%s\nstderr: %s", mode, c.tool, res.code, c.want, res.stdout, res.stderr)
				}
			}
			// Exit codes: 1 for a tool error, 2 for bad JSON or an unknown tool.
			if res := shiro(t, ws, nil, append(flags, "tool", "read_file", `{"path":"../etc/passwd"}`)...); res.code != 1 || !strings.Contains(res.stdout, "Path escapes workspace: ../etc/passwd") {
				t.Errorf("escape: exit %d: %s", res.code, res.stdout)
			}
			if res := shiro(t, ws, nil, append(flags, "tool", "read_file", `{"path":`)...); res.code != 2 || !strings.Contains(res.stderr, "not valid JSON") {
				t.Errorf("bad JSON: exit %d: %s", res.code, res.stderr)
			}
			if res := shiro(t, ws, nil, append(flags, "tool", "teleport", `{}`)...); res.code != 2 || !strings.Contains(res.stderr, `unknown tool "teleport"`) {
				t.Errorf("unknown tool: exit %d: %s", res.code, res.stderr)
			}
		})
	}
}

func TestToolsListsEveryToolWithItsSetAndGate(t *testing.T) {
	t.Parallel()
	res := shiro(t, t.TempDir(), nil, "tools")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 17 { // the 14 of the spec and the three job tools
		t.Fatalf("%d tools listed:\n%s", len(lines), res.stdout)
	}
	for _, want := range []string{"bash", "core", "gated", "git_blame", "git", "free", "multi_edit", "edit-plus"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("missing %q", want)
		}
	}
}
