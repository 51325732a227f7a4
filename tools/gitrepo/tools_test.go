package gitrepo_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/sandbox/sandboxtest"
	"github.com/shiroagent/shiro/tools"
	"github.com/shiroagent/shiro/tools/gitrepo"
)

func callTool(t *testing.T, tool tools.Tool, env *tools.Env, input string) tools.Result {
	t.Helper()
	res, err := tool.Run(context.Background(), env, json.RawMessage(input))
	if err != nil {
		t.Fatalf("%s: %v", tool.Name(), err)
	}
	return res
}

// TestGitFallsBackToGoGit: a sandbox without git still answers, through
// go-git on the host.
func TestGitFallsBackToGoGit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q"},
		{"-c", "user.name=Ada", "-c", "user.email=ada@example.com", "commit", "-q", "--allow-empty", "-m", "the first commit"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	env := &tools.Env{Workspace: dir, Root: root, OpenGit: gitrepo.Opener, Sandbox: &sandboxtest.Fake{RunFunc: sandboxtest.Reply("", "sh: git: not found\n", 127)}}
	if res := callTool(t, tools.NewGitLog(), env, `{}`); res.IsError || !strings.Contains(res.Text, "  Ada  the first commit") {
		t.Errorf("git_log without git: %q", res.Text)
	}
	if res := callTool(t, tools.NewGitStatus(), env, `{}`); res.IsError || !strings.Contains(res.Text, "new.txt  (untracked)") {
		t.Errorf("git_status without git: %q", res.Text)
	}
}
