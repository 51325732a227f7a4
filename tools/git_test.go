package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/sandbox"
	"github.com/shiroagent/shiro/sandbox/sandboxtest"
)

// gitCmd runs git in dir for a test's setup, with a fixed identity and
// date so hashes are the same on every run.
func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com", "GIT_AUTHOR_DATE=2024-03-01T10:00:00Z",
		"GIT_COMMITTER_NAME=Ada", "GIT_COMMITTER_EMAIL=ada@example.com", "GIT_COMMITTER_DATE=2024-03-01T10:00:00Z",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitEnvFor makes a workspace with files, a git repository when init is
// set, and a local sandbox.
func gitEnvFor(t *testing.T, files map[string]string, init bool) *Env {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("these tests need git on PATH")
	}
	env := newTestEnv(t, files)
	if init {
		gitCmd(t, env.Workspace, "init", "-q", "-b", "main")
	}
	env.Sandbox = localSandbox(t, env.Workspace)
	return env
}

// commit stages everything and commits it.
func commit(t *testing.T, dir, msg string) string {
	t.Helper()
	gitCmd(t, dir, "add", "-A")
	gitCmd(t, dir, "commit", "-q", "-m", msg)
	return gitCmd(t, dir, "rev-parse", "--short", "HEAD")
}

// blobHash is the short hash git gives a file holding content.
func blobHash(t *testing.T, content string) string {
	t.Helper()
	cmd := exec.Command("git", "hash-object", "--stdin")
	cmd.Stdin = strings.NewReader(content)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git hash-object: %v", err)
	}
	return string(out[:7])
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	writeTree(t, dir, map[string]string{name: content})
}

func TestGitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		init    bool
		want    string
		wantErr bool
	}{
		{name: "clean", init: true, setup: func(t *testing.T, dir string) { write(t, dir, "a.txt", "a\n"); commit(t, dir, "first") },
			want: "On main, working tree clean."},
		{name: "every label", init: true, setup: func(t *testing.T, dir string) {
			for _, f := range []string{"both.txt", "gone.txt", "staged-gone.txt", "old.txt", "mod.txt"} {
				write(t, dir, f, f+"\nline\n")
			}
			commit(t, dir, "first")
			write(t, dir, "both.txt", "changed\n")
			gitCmd(t, dir, "add", "both.txt")
			write(t, dir, "both.txt", "changed again\n")
			write(t, dir, "mod.txt", "changed\n")
			os.Remove(filepath.Join(dir, "gone.txt"))
			gitCmd(t, dir, "rm", "-q", "staged-gone.txt")
			gitCmd(t, dir, "mv", "old.txt", "new.txt")
			write(t, dir, "added.txt", "new\n")
			gitCmd(t, dir, "add", "added.txt")
			write(t, dir, "added.txt", "new and changed\n")
			write(t, dir, "untracked.txt", "u\n")
			write(t, dir, "ünïcöde.txt", "u\n")
			write(t, dir, "with space.txt", "u\n")
		}, want: "On main, 9 changed:\n" +
			"added.txt  (staged added, modified)\n" +
			"both.txt  (staged modified, modified)\n" +
			"gone.txt  (deleted)\n" +
			"mod.txt  (modified)\n" +
			"old.txt -> new.txt  (staged renamed)\n" +
			"staged-gone.txt  (staged deleted)\n" +
			"untracked.txt  (untracked)\n" +
			"\"with space.txt\"  (untracked)\n" +
			"ünïcöde.txt  (untracked)"},
		{name: "no commit yet", init: true, setup: func(t *testing.T, dir string) { write(t, dir, "a.txt", "a\n") },
			want: "On main, 1 changed:\na.txt  (untracked)"},
		{name: "ignored files are not listed", init: true, setup: func(t *testing.T, dir string) {
			write(t, dir, ".gitignore", "*.log\n")
			commit(t, dir, "first")
			write(t, dir, "a.log", "x\n")
		}, want: "On main, working tree clean."},
		{name: "detached HEAD", init: true, setup: func(t *testing.T, dir string) {
			write(t, dir, "a.txt", "a\n")
			commit(t, dir, "first")
			gitCmd(t, dir, "checkout", "-q", "--detach")
		}, want: "On HEAD, working tree clean."},
		{name: "over 200 files", init: true, setup: func(t *testing.T, dir string) {
			for i := range 203 {
				write(t, dir, fmt.Sprintf("f%03d.txt", i), "x\n")
			}
		}, want: func() string {
			lines := []string{"On main, 203 changed:"}
			for i := range 200 {
				lines = append(lines, fmt.Sprintf("f%03d.txt  (untracked)", i))
			}
			return strings.Join(append(lines, "... [3 more]"), "\n")
		}()},
		{name: "not a repository", want: "<ws> is not a git repository.", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := gitEnvFor(t, nil, tt.init)
			if tt.setup != nil {
				tt.setup(t, env.Workspace)
			}
			got := call(t, NewGitStatus(), env, `{}`)
			checkResult(t, got, strings.ReplaceAll(tt.want, "<ws>", env.Workspace), tt.wantErr)
		})
	}
}

func TestStatusLabels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		xy, want string
	}{
		{" M", "modified"},
		{"M ", "staged modified"},
		{"MM", "staged modified, modified"},
		{"A ", "staged added"},
		{"AM", "staged added, modified"},
		{"AD", "staged added, deleted"},
		{" D", "deleted"},
		{"D ", "staged deleted"},
		{"R ", "staged renamed"},
		{"RM", "staged renamed, modified"},
		{"C ", "staged copied"},
		{"UU", "staged conflicted, conflicted"},
		{"DU", "staged deleted, conflicted"},
		{"??", "untracked"},
		{"!!", "staged ignored, ignored"},
		{"  ", "unknown"},
		{" T", "type changed"},
		{"X ", "staged unknown"},
	}
	for _, tt := range tests {
		if got := statusLabels(tt.xy[0], tt.xy[1]); got != tt.want {
			t.Errorf("statusLabels(%q) = %q, want %q", tt.xy, got, tt.want)
		}
	}
}

func TestGitDiff(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T, dir string) {
		write(t, dir, "a.txt", "one\n")
		write(t, dir, "b.txt", "bee\n")
		commit(t, dir, "first")
		write(t, dir, "a.txt", "one\ntwo\n")
		write(t, dir, "b.txt", "bee\nstaged\n")
		gitCmd(t, dir, "add", "b.txt")
	}
	aDiff := "diff --git a/a.txt b/a.txt\nindex " + blobHash(t, "one\n") + ".." + blobHash(t, "one\ntwo\n") + " 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n one\n+two"
	bDiff := "diff --git a/b.txt b/b.txt\nindex " + blobHash(t, "bee\n") + ".." + blobHash(t, "bee\nstaged\n") + " 100644\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1,2 @@\n bee\n+staged"
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		init    bool
		input   string
		want    string
		wantErr bool
	}{
		{name: "unstaged", init: true, setup: setup, input: `{}`, want: aDiff},
		{name: "staged", init: true, setup: setup, input: `{"staged":true}`, want: bDiff},
		{name: "path", init: true, setup: setup, input: `{"path":"b.txt"}`, want: "No uncommitted changes."},
		{name: "nothing unstaged", init: true, setup: func(t *testing.T, dir string) { write(t, dir, "a", "a\n"); commit(t, dir, "c") },
			input: `{}`, want: "No uncommitted changes."},
		{name: "nothing staged", init: true, setup: func(t *testing.T, dir string) { write(t, dir, "a", "a\n"); commit(t, dir, "c") },
			input: `{"staged":true}`, want: "Nothing staged."},
		{name: "not a repository", input: `{}`, want: "<ws> is not a git repository.", wantErr: true},
		{name: "path outside the repository", init: true, setup: setup, input: `{"path":"../x"}`,
			want: "fatal: ../x: '../x' is outside repository at '<ws>'", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := gitEnvFor(t, nil, tt.init)
			if tt.setup != nil {
				tt.setup(t, env.Workspace)
			}
			got := call(t, NewGitDiff(), env, tt.input)
			checkResult(t, got, strings.ReplaceAll(tt.want, "<ws>", env.Workspace), tt.wantErr)
		})
	}
}

func TestGitLog(t *testing.T) {
	t.Parallel()
	env := gitEnvFor(t, nil, true)
	dir := env.Workspace
	var hashes []string
	for i := range 20 {
		write(t, dir, fmt.Sprintf("f%d.txt", i%3), fmt.Sprintf("v%d\n", i))
		hashes = append(hashes, commit(t, dir, fmt.Sprintf("change %d", i)))
	}
	line := func(i int) string { return hashes[i] + "  2024-03-01  Ada  change " + fmt.Sprint(i) }
	lines := func(idx ...int) string {
		var out []string
		for _, i := range idx {
			out = append(out, line(i))
		}
		return strings.Join(out, "\n")
	}
	empty := gitEnvFor(t, nil, true)
	tests := []struct {
		name    string
		env     *Env
		input   string
		want    string
		wantErr bool
	}{
		{name: "default 15, newest first", env: env, input: `{}`, want: lines(19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5)},
		{name: "limit", env: env, input: `{"limit":2}`, want: lines(19, 18)},
		{name: "path", env: env, input: `{"path":"f1.txt","limit":3}`, want: lines(19, 16, 13)},
		{name: "path without commits", env: env, input: `{"path":"nope.txt"}`, want: "No commits."},
		{name: "no commit yet", env: empty, input: `{}`, want: "No commits."},
		{name: "limit too small", env: env, input: `{"limit":0}`, want: "Invalid input for git_log: limit must be at least 1, got 0", wantErr: true},
		{name: "limit too large", env: env, input: `{"limit":41}`, want: "Invalid input for git_log: limit must be at most 40, got 41", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkResult(t, call(t, NewGitLog(), tt.env, tt.input), tt.want, tt.wantErr)
		})
	}
}

func TestGitShow(t *testing.T) {
	t.Parallel()
	env := gitEnvFor(t, nil, true)
	dir := env.Workspace
	write(t, dir, "a.txt", "one\n")
	write(t, dir, "b.txt", "bee\n")
	first := commit(t, dir, "first")
	write(t, dir, "a.txt", "one\ntwo\n")
	write(t, dir, "b.txt", "bee\nbuzz\n")
	second := commit(t, dir, "second")
	head := "commit " + gitCmd(t, dir, "rev-parse", "HEAD") + "\nAuthor: Ada <ada@example.com>\nDate:   2024-03-01\n\n    second\n\n"
	aDiff := "diff --git a/a.txt b/a.txt\nindex " + blobHash(t, "one\n") + ".." + blobHash(t, "one\ntwo\n") + " 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n one\n+two"
	tests := []struct {
		name    string
		input   string
		want    string
		wantErr bool
	}{
		{name: "commit with path", input: `{"ref":"` + second + `","path":"a.txt"}`, want: head + aDiff},
		{name: "file at a revision", input: `{"ref":"` + first + `:a.txt"}`, want: "one"},
		{name: "bad ref", input: `{"ref":"nope"}`,
			want: "fatal: ambiguous argument 'nope': unknown revision or path not in the working tree.\nUse '--' to separate paths from revisions, like this:\n'git <command> [<revision>...] -- [<file>...]'", wantErr: true},
		{name: "a ref is never an option", input: `{"ref":"--output=pwned.txt"}`, wantErr: true},
		{name: "ref required", input: `{}`, want: `Invalid input for git_show: missing required parameter "ref"`, wantErr: true},
		{name: "empty ref", input: `{"ref":""}`, want: `Invalid input for git_show: ref must not be empty`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := call(t, NewGitShow(), env, tt.input)
			if tt.want == "" {
				if !got.IsError {
					t.Errorf("result = %q, want an error", got.Text)
				}
				return
			}
			checkResult(t, got, tt.want, tt.wantErr)
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned.txt")); err == nil {
		t.Error("git show wrote pwned.txt: a ref was read as an option")
	}
}

func TestGitBlame(t *testing.T) {
	t.Parallel()
	env := gitEnvFor(t, nil, true)
	dir := env.Workspace
	var content strings.Builder
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&content, "line %d\n", i)
	}
	write(t, dir, "a.txt", content.String())
	write(t, dir, "empty.txt", "")
	first := commit(t, dir, "first")
	write(t, dir, "a.txt", strings.Replace(content.String(), "line 4\n", "line 4\t \n", 1)) // whitespace only: -w keeps the blame
	write(t, dir, "a.txt", strings.Replace(content.String(), "line 3\n", "line three\n", 1))
	commit(t, dir, "second")
	second := gitCmd(t, dir, "rev-parse", "--short=8", "HEAD")
	// A root commit's lines are marked "^"; line numbers are padded to
	// the widest shown.
	blameLines := func(from, to int) string {
		width := len(fmt.Sprint(to))
		var out []string
		for i := from; i <= to; i++ {
			h, text := "^"+first, fmt.Sprintf("line %d", i)
			if i == 3 {
				h, text = second, "line three"
			}
			out = append(out, fmt.Sprintf("%s (Ada 2024-03-01 %*d) %s", h, width, i, text))
		}
		return strings.Join(out, "\n")
	}
	tests := []struct {
		name    string
		input   string
		want    string
		wantErr bool
	}{
		{name: "range", input: `{"path":"a.txt","startLine":3,"endLine":5}`, want: blameLines(3, 5)},
		{name: "start only shows 40 more", input: `{"path":"a.txt","startLine":10}`, want: blameLines(10, 50)},
		{name: "end only", input: `{"path":"a.txt","endLine":2}`, want: blameLines(1, 2)},
		{name: "whole file", input: `{"path":"a.txt"}`, want: blameLines(1, 60)},
		{name: "empty file", input: `{"path":"empty.txt"}`, want: "No blame output."},
		{name: "missing file", input: `{"path":"nope.txt"}`, want: "fatal: no such path 'nope.txt' in HEAD", wantErr: true},
		{name: "path required", input: `{}`, want: `Invalid input for git_blame: missing required parameter "path"`, wantErr: true},
		{name: "lines start at 1", input: `{"path":"a.txt","startLine":0}`, want: "Invalid input for git_blame: startLine must be at least 1, got 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkResult(t, call(t, NewGitBlame(), env, tt.input), tt.want, tt.wantErr)
		})
	}
}

// TestGitPathIsLiteral: a path is an argument after "--", never shell text.
func TestGitPathIsLiteral(t *testing.T) {
	t.Parallel()
	env := gitEnvFor(t, nil, true)
	write(t, env.Workspace, "a.txt", "a\n")
	commit(t, env.Workspace, "first")
	for _, path := range []string{"; touch pwned.txt", "$(touch pwned.txt)", "`touch pwned.txt`", "--output=pwned.txt", "-o pwned.txt"} {
		for _, tc := range []struct {
			tool  Tool
			input map[string]any
		}{
			{NewGitDiff(), map[string]any{"path": path}},
			{NewGitDiff(), map[string]any{"path": path, "staged": true}},
			{NewGitLog(), map[string]any{"path": path}},
			{NewGitShow(), map[string]any{"ref": "HEAD", "path": path}},
			{NewGitShow(), map[string]any{"ref": path}},
			{NewGitBlame(), map[string]any{"path": path}},
		} {
			call(t, tc.tool, env, jsonInput(t, tc.input))
		}
	}
	if _, err := os.Stat(filepath.Join(env.Workspace, "pwned.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pwned.txt exists (or stat failed: %v): a path was run or read as an option", err)
	}
}

// TestGitArgv checks each tool's argv (fixed, never a shell string), the
// environment, directory and timeout, with a fake sandbox.
func TestGitArgv(t *testing.T) {
	t.Parallel()
	safety := []string{"git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "log.showSignature=false", "-c", "core.quotePath=false"}
	tests := []struct {
		name  string
		tool  Tool
		input string
		want  [][]string
	}{
		{"status", NewGitStatus(), `{}`, [][]string{{"rev-parse", "--abbrev-ref", "HEAD"}, {"status", "--porcelain=v1"}}},
		{"diff", NewGitDiff(), `{}`, [][]string{{"diff", "--no-color", "--no-ext-diff", "--no-textconv"}}},
		{"diff staged path", NewGitDiff(), `{"staged":true,"path":"-x"}`, [][]string{{"diff", "--no-color", "--no-ext-diff", "--no-textconv", "--staged", "--", "-x"}}},
		{"log", NewGitLog(), `{}`, [][]string{{"log", "-n15", "--date=short", "--pretty=format:%h  %ad  %an  %s"}}},
		{"log limit path", NewGitLog(), `{"limit":40,"path":"a b"}`, [][]string{{"log", "-n40", "--date=short", "--pretty=format:%h  %ad  %an  %s", "--", "a b"}}},
		{"show", NewGitShow(), `{"ref":"HEAD~1"}`, [][]string{{"show", "--no-color", "--date=short", "--no-ext-diff", "--no-textconv", "--end-of-options", "HEAD~1"}}},
		{"show path", NewGitShow(), `{"ref":"v1","path":"p"}`, [][]string{{"show", "--no-color", "--date=short", "--no-ext-diff", "--no-textconv", "--end-of-options", "v1", "--", "p"}}},
		{"blame", NewGitBlame(), `{"path":"p"}`, [][]string{{"blame", "--date=short", "-w", "--no-textconv", "--", "p"}}},
		{"blame start", NewGitBlame(), `{"path":"p","startLine":7}`, [][]string{{"blame", "--date=short", "-w", "--no-textconv", "-L", "7,47", "--", "p"}}},
		{"blame range", NewGitBlame(), `{"path":"p","startLine":7,"endLine":9}`, [][]string{{"blame", "--date=short", "-w", "--no-textconv", "-L", "7,9", "--", "p"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []sandbox.Command
			env := &Env{Workspace: "/ws", Sandbox: &sandboxtest.Fake{RunFunc: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
				got = append(got, cmd)
				return sandboxtest.Reply("main\n", "", 0)(ctx, cmd)
			}}}
			call(t, tt.tool, env, tt.input)
			if len(got) != len(tt.want) {
				t.Fatalf("%d commands run, want %d", len(got), len(tt.want))
			}
			for i, cmd := range got {
				if want := slices.Concat(safety, tt.want[i]); !slices.Equal(cmd.Args, want) {
					t.Errorf("argv\n got %q\nwant %q", cmd.Args, want)
				}
				if cmd.Shell != "" || cmd.Dir != "/ws" || cmd.Timeout != 30*time.Second ||
					!slices.Equal(cmd.Env, []string{"GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "PAGER=cat", "LC_ALL=C", "GIT_OPTIONAL_LOCKS=0"}) {
					t.Errorf("shell %q dir %q timeout %v env %q", cmd.Shell, cmd.Dir, cmd.Timeout, cmd.Env)
				}
			}
		})
	}
}

// TestGitFailures covers how a failed git is reported, with a fake sandbox.
func TestGitFailures(t *testing.T) {
	t.Parallel()
	reply := sandboxtest.Reply
	tests := []struct {
		name     string
		run      func(context.Context, sandbox.Command) (sandbox.Result, error)
		want     string
		wantErr  bool
		goErrors bool
	}{
		// Without git in the sandbox the tools read the repository with
		// go-git; /ws holds none.
		{name: "git cannot start: go-git reads instead", run: func(context.Context, sandbox.Command) (sandbox.Result, error) {
			return sandbox.Result{}, fmt.Errorf("start: %w", &exec.Error{Name: "git", Err: exec.ErrNotFound})
		}, want: "/ws is not a git repository.", wantErr: true},
		{name: "exit 127: go-git reads instead", run: reply("", "sh: git: not found\n", 127), want: "/ws is not a git repository.", wantErr: true},
		{name: "not a repository", run: reply("", "fatal: not a git repository (or any of the parent directories): .git\n", 128),
			want: "/ws is not a git repository.", wantErr: true},
		{name: "stderr", run: reply("out\n", "fatal: bad thing\n", 128), want: "fatal: bad thing", wantErr: true},
		{name: "stdout when stderr is empty", run: reply("  out\n", "", 1), want: "out", wantErr: true},
		{name: "exit code when both are empty", run: reply("", "", 3), want: "git exited 3", wantErr: true},
		{name: "timeout", run: func(context.Context, sandbox.Command) (sandbox.Result, error) {
			return sandbox.Result{ExitCode: 137, TimedOut: true}, nil
		}, want: "git log timed out after 30s.", wantErr: true},
		{name: "output trimmed", run: reply("\n\n  a  \n\n", "", 0), want: "a"},
		{name: "a failing sandbox is a Go error", run: func(context.Context, sandbox.Command) (sandbox.Result, error) {
			return sandbox.Result{}, sandbox.ErrClosed
		}, goErrors: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The in-process reader finds no repository in /ws.
			noRepo := func(string, *os.Root) (GitRepo, error) { return nil, ErrNotRepository }
			env := &Env{Workspace: "/ws", Sandbox: &sandboxtest.Fake{RunFunc: tt.run}, OpenGit: noRepo}
			res, err := NewGitLog().Run(t.Context(), env, []byte(`{}`))
			if tt.goErrors {
				if err == nil {
					t.Errorf("Run = %q, want a Go error", res.Text)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, tt.want, tt.wantErr)
		})
	}
}

// TestGitOutputCap: output past what is kept still counts in the note.
func TestGitOutputCap(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("é", gitKeep) // 2 bytes each: half is kept
	env := &Env{Workspace: "/ws", Sandbox: &sandboxtest.Fake{RunFunc: sandboxtest.Reply(big, "", 0)}}
	res := call(t, NewGitDiff(), env, `{}`)
	want := strings.Repeat("é", MaxOutput) + fmt.Sprintf("\n... [truncated %d chars]", gitKeep-MaxOutput)
	if res.Text != want || res.IsError {
		t.Errorf("result has %d chars, ends %q; want %d chars ending %q", len([]rune(res.Text)), res.Text[len(res.Text)-40:], len([]rune(want)), want[len(want)-40:])
	}
}
