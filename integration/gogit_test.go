package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostileRepo makes a repository with two commits, an unstaged change and
// a staged file, then gives it a config whose fsmonitor, clean/smudge
// filter, diff driver and textconv write markers into marks.
func hostileRepo(t *testing.T, ws, marks string) {
	t.Helper()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=Ada", "-c", "user.email=ada@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("a.txt", "one\ntwo\nthree\n")
	git("add", "a.txt")
	git("commit", "-q", "-m", "first commit")
	write("a.txt", "one\nTWO\nthree\n")
	git("commit", "-q", "-am", "second commit")
	write("a.txt", "one\nTWO\nthree\nfour\n") // unstaged
	write("c.txt", "staged\n")
	git("add", "c.txt")
	cfg := `[core]
	fsmonitor = "touch ` + marks + `/fsmonitor; false"
[filter "evil"]
	clean = "touch ` + marks + `/clean; cat"
	smudge = "touch ` + marks + `/smudge; cat"
[diff "evil"]
	command = "touch ` + marks + `/diff-driver; true"
	textconv = "touch ` + marks + `/textconv; cat"
`
	f, err := os.OpenFile(filepath.Join(ws, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(filepath.Join(ws, ".git", "info", "attributes"), []byte("* filter=evil diff=evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func markers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestGitToolsUnderNoSandboxRunNothingOfTheRepository(t *testing.T) {
	t.Parallel()
	ws, marks := t.TempDir(), t.TempDir()
	hostileRepo(t, ws, marks)

	// The attack works on git itself: its status runs the clean filter.
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = ws
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git status: %v\n%s", err, out)
	}
	if m := markers(t, marks); len(m) == 0 {
		t.Fatal("git status wrote no marker: the repository does not test anything")
	}
	for _, m := range markers(t, marks) {
		os.Remove(filepath.Join(marks, m))
	}

	env := []string{"SHIRO_HOME=" + t.TempDir()}
	for _, tc := range []struct {
		tool, input string
		want        []string
	}{
		{"git_status", `{}`, []string{"On main, 2 changed:", "a.txt  (modified)", "c.txt  (staged added)"}},
		{"git_diff", `{}`, []string{"diff --git a/a.txt b/a.txt", "+four"}},
		{"git_diff", `{"staged":true}`, []string{"diff --git a/c.txt b/c.txt", "+staged"}},
		{"git_log", `{"limit":5}`, []string{"  Ada  second commit", "  Ada  first commit"}},
		{"git_show", `{"ref":"HEAD"}`, []string{"Author: Ada <ada@example.com>", "    second commit", "-two", "+TWO"}},
		{"git_show", `{"ref":"HEAD~1:a.txt"}`, []string{"one\ntwo\nthree"}},
		{"git_blame", `{"path":"a.txt"}`, []string{"(Ada ", " 2) TWO", " 1) one"}},
	} {
		res := shiro(t, ws, env, "--no-sandbox", "tool", tc.tool, tc.input)
		if res.code != 0 {
			t.Errorf("%s %s: exit %d\nstdout: %s\nstderr: %s", tc.tool, tc.input, res.code, res.stdout, res.stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(res.stdout, w) {
				t.Errorf("%s %s lacks %q:\n%s", tc.tool, tc.input, w, res.stdout)
			}
		}
	}
	if m := markers(t, marks); len(m) != 0 {
		t.Errorf("the repository's programs ran: markers %v", m)
	}
}
