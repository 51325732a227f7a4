package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/orchestrator/worktree"
)

func TestParseAge(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "7d", want: 7 * 24 * time.Hour},
		{in: "2w", want: 14 * 24 * time.Hour},
		{in: "36h", want: 36 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "2w1d", want: 15 * 24 * time.Hour},
		{in: "90m", want: 90 * time.Minute},
		{in: "0d", bad: true},
		{in: "", bad: true},
		{in: "seven days", bad: true},
		{in: "-3d", bad: true},
		{in: "1d2w", bad: true},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseAge(c.in)
			if c.bad != (err != nil) || got != c.want {
				t.Errorf("parseAge(%q) = %v, %v", c.in, got, err)
			}
		})
	}
}

// TestAgentsOutsideARepository: shiro agents says where it works.
func TestAgentsOutsideARepository(t *testing.T) {
	t.Parallel()
	dir, home := t.TempDir(), t.TempDir()
	var out, errb bytes.Buffer
	f := &Factory{Out: &out, ErrOut: &errb, Getwd: func() (string, error) { return dir, nil },
		LookupEnv: func(k string) (string, bool) {
			if k == "SHIRO_HOME" {
				return home, true
			}
			return "", false
		}}
	for _, args := range [][]string{{"agents"}, {"agents", "merge", "x"}, {"agents", "prune"}} {
		root := NewCmdRoot(f)
		root.SetArgs(args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "shiro agents works in a git checkout") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestAgentsCommands runs the subcommands on an agent made as Open makes
// one (a worktree on shiro/NAME and its record), without a sandbox engine
// (--backend names none: the containers are left out with a notice).
func TestAgentsCommands(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	top, home := filepath.Join(base, "checkout"), filepath.Join(base, "home")
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := worktree.Git(t.Context(), dir, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	git(base, "init", "-q", "-b", "main", top)
	git(top, "config", "user.name", "u")
	git(top, "config", "user.email", "u@host")
	os.WriteFile(filepath.Join(top, "a.txt"), []byte("one\n"), 0o644)
	git(top, "add", "a.txt")
	git(top, "commit", "-q", "-m", "first")
	repo, err := worktree.FindRepository(top)
	if err != nil {
		t.Fatal(err)
	}
	l := worktree.LayoutFor(home, "", repo.CommonDir)
	a := &worktree.Agent{Name: "x", Branch: "shiro/x", Path: l.Path("x"), Checkout: top, CommonDir: repo.CommonDir, Base: git(top, "rev-parse", "HEAD"), Created: time.Now()}
	os.MkdirAll(l.Root, 0o700)
	git(top, "worktree", "add", "-q", "-b", a.Branch, a.Path)
	if err := l.Save(a); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(a.Path, "a.txt"), []byte("one\ntwo\n"), 0o644)
	git(a.Path, "commit", "-q", "-am", "two")
	os.WriteFile(filepath.Join(a.Path, "loose.txt"), []byte("x\n"), 0o644)

	run := func(args ...string) (string, string, error) {
		var out, errb bytes.Buffer
		f := &Factory{Out: &out, ErrOut: &errb, Getwd: func() (string, error) { return top, nil },
			LookupEnv: func(k string) (string, bool) {
				if k == "SHIRO_HOME" {
					return home, true
				}
				return "", false
			}}
		root := NewCmdRoot(f)
		root.SetArgs(append(args, "--backend", "none-such"))
		err := root.Execute()
		return out.String(), errb.String(), err
	}
	for _, c := range []struct {
		args           []string
		stdout, stderr string
		fails          string // what the error says
	}{
		{args: []string{"agents"}, stdout: "x     shiro/x  ended  ", stderr: "sandbox containers not listed"},
		{args: []string{"agents", "diff", "x"}, stdout: "+two", stderr: "Not in this diff: 1 file not committed in the worktree " + a.Path + " (loose.txt)."},
		{args: []string{"agents", "diff", "nobody"}, fails: "this repository has no worktree agent nobody"},
		{args: []string{"agents", "prune", "--dry-run"}, stdout: "No ended worktree agent idle for longer than 7d."},
		{args: []string{"agents", "prune", "--older-than", "soon"}, fails: `"soon" is not an age`},
		{args: []string{"agents", "merge", "x"}, stdout: "Fast-forwarded main to shiro/x", stderr: "Not merged: 1 file not committed"},
		{args: []string{"agents", "rm", "x"}, fails: "has changes that are not committed (loose.txt)"},
		{args: []string{"agents", "rm", "--force", "x"}, stdout: "Removed worktree agent x; its branch shiro/x is kept", stderr: "sandbox containers not removed"},
		{args: []string{"agents"}, stdout: "No worktree agents in this repository"},
	} {
		out, errOut, err := run(c.args...)
		failed := err != nil && c.fails != "" && strings.Contains(err.Error(), c.fails)
		if failed != (c.fails != "") || err != nil && c.fails == "" || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
			t.Errorf("%v: err %v\nstdout: %s\nstderr: %s", c.args, err, out, errOut)
		}
	}
}
