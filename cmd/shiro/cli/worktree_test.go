package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/store"
	"github.com/shiroagent/shiro/orchestrator/worktree"
)

// worktreeFixture is a repository with one commit, a SHIRO_HOME with the
// user's config, and a Factory started in the checkout.
func worktreeFixture(t *testing.T, userConfig string) (*Factory, string, string) {
	t.Helper()
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home, top := filepath.Join(base, "home"), filepath.Join(base, "checkout")
	os.MkdirAll(home, 0o700)
	for _, args := range [][]string{{"init", "-q", top}, {"-C", top, "commit", "-q", "--allow-empty", "-m", "first"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+home)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if userConfig != "" {
		os.WriteFile(filepath.Join(home, "config.json"), []byte(strings.ReplaceAll(userConfig, "BASE", base)), 0o600)
	}
	env := map[string]string{"SHIRO_HOME": home, "HOME": home}
	f := &Factory{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}, Getwd: func() (string, error) { return top, nil },
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	return f, top, home
}

func TestWorktreeFlagOpensTheAgentsWorktreeAndHoldsIt(t *testing.T) {
	t.Parallel()
	f, top, home := worktreeFixture(t, "")
	sw, err := f.openSessionWorkspace(t.Context(), &RunOptions{Worktree: "a"})
	if err != nil {
		t.Fatal(err)
	}
	l := worktree.LayoutFor(home, "", filepath.Join(top, ".git"))
	if sw.Agent == nil || sw.Path() != l.Path("a") || sw.Agent.Branch != "shiro/a" {
		t.Fatalf("the session's workspace is %s (agent %+v), want %s", sw.Path(), sw.Agent, l.Path("a"))
	}
	if !l.Running("a") {
		t.Error("the agent is not marked running while its session holds it")
	}
	if _, err := f.openSessionWorkspace(t.Context(), &RunOptions{Worktree: "a"}); err == nil || !strings.Contains(err.Error(), "running in another shiro") {
		t.Errorf("a second session of the same agent: %v", err)
	}
	rec := newRecord(sw, config.Config{Provider: config.ProviderAnthropic, Model: "m"})
	if rec.Cwd != sw.Path() || rec.Worktree != "a" || rec.Branch != "shiro/a" {
		t.Errorf("the session record %+v", rec)
	}
	sw.Close()
	if l.Running("a") {
		t.Error("the agent is still marked running after its session closed")
	}

	plain, err := f.openSessionWorkspace(t.Context(), &RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.Agent != nil || plain.Path() != top {
		t.Errorf("without --worktree: %s %+v", plain.Path(), plain.Agent)
	}
}

func TestWorktreesDirComesFromTheUsersConfigOnly(t *testing.T) {
	t.Parallel()
	f, top, home := worktreeFixture(t, `{"worktrees": {"dir": "~/agents"}}`)
	os.MkdirAll(filepath.Join(top, ".shiro"), 0o755)
	os.WriteFile(filepath.Join(top, ".shiro", "config.json"), []byte(`{"worktrees": {"dir": "/tmp/the-projects-choice"}}`), 0o644)
	sw, err := f.openSessionWorkspace(t.Context(), &RunOptions{Worktree: "b"})
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	if want := worktree.LayoutFor(home, filepath.Join(home, "agents"), filepath.Join(top, ".git")).Path("b"); sw.Path() != want {
		t.Errorf("the worktree is at %s, want %s (the user's worktrees.dir)", sw.Path(), want)
	}
}

func TestWorktreeFlagMisuse(t *testing.T) {
	t.Parallel()
	f, _, _ := worktreeFixture(t, "")
	for _, c := range []struct {
		name string
		opts RunOptions
		want string
	}{
		{"--from alone", RunOptions{From: "HEAD"}, "--from needs --worktree"},
		{"with -r", RunOptions{Worktree: "a", Resume: "0192"}, "--worktree goes with -c, not -r"},
		{"a bad name", RunOptions{Worktree: "../x"}, "cannot name a worktree agent"},
		{"a bad --from", RunOptions{Worktree: "c", From: "nowhere"}, "names no commit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := f.openSessionWorkspace(t.Context(), &c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestDoctorNamesTheWorktreeAgent(t *testing.T) {
	t.Parallel()
	f, top, _ := worktreeFixture(t, "")
	sw, err := f.openSessionWorkspace(t.Context(), &RunOptions{Worktree: "d"})
	if err != nil {
		t.Fatal(err)
	}
	sw.Close()
	agent, w, err := f.doctorWorkspace(&DoctorOptions{Worktree: "d"})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if agent == nil || w.Path() != sw.Path() {
		t.Errorf("doctor --worktree d checks %s (agent %+v), want %s", w.Path(), agent, sw.Path())
	}
	f.Getwd = func() (string, error) { return sw.Path(), nil }
	if agent, w, _ := f.doctorWorkspace(&DoctorOptions{}); agent == nil || agent.Name != "d" {
		t.Errorf("doctor in the agent's worktree: %+v", agent)
	} else {
		w.Close()
	}
	f.Getwd = func() (string, error) { return top, nil }
	if _, _, err := f.doctorWorkspace(&DoctorOptions{Worktree: "none"}); err == nil || !strings.Contains(err.Error(), "no such worktree agent") {
		t.Errorf("doctor --worktree of no agent: %v", err)
	}
}

// A session started in an agent's worktree without --worktree is the
// agent's: it holds the agent and its record names it.
func TestStartingInAnAgentsWorktreeIsTheAgent(t *testing.T) {
	t.Parallel()
	f, _, _ := worktreeFixture(t, "")
	sw, err := f.openSessionWorkspace(t.Context(), &RunOptions{Worktree: "e"})
	if err != nil {
		t.Fatal(err)
	}
	wt := sw.Path()
	f.Getwd = func() (string, error) { return wt, nil }
	if _, err := f.openSessionWorkspace(t.Context(), &RunOptions{}); err == nil || !strings.Contains(err.Error(), "running in another shiro") {
		t.Errorf("a plain start in a running agent's worktree: %v", err)
	}
	sw.Close()
	in, err := f.openSessionWorkspace(t.Context(), &RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if in.Agent == nil || in.Agent.Name != "e" {
		t.Errorf("a plain start in the agent's worktree is not the agent: %+v", in.Agent)
	}
	st := &store.Store{Dir: t.TempDir()}
	if _, err := resumeRecord(st, in, &RunOptions{Continue: true}); err == nil || !strings.Contains(err.Error(), "the worktree agent e has no saved session yet") {
		t.Errorf("-c of an agent without a session: %v", err)
	}
}
