package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// What a model or a repository's script may print to take over the
// terminal a headless run (or the CI log read later with cat) is shown
// on: a clipboard write, a link, a window title, a bell, cursor moves and
// erases, the same as one C1 control; and a colour, which a terminal may
// keep.
const (
	scrubAttack = "clip\x1b]52;c;ZWNobyBvd25lZA==\x07 link\x1b]8;;https://evil.example/\x1b\\here\x1b]8;;\x1b\\ " +
		"title\x1b]2;owned\x07 bell\x07 moves\x1b[2J\x1b[H\x1b[3A\x1b[10;10H erase\x1b[K\x1b[1J c1\u009b2J " +
		"\x1b[31mred\x1b[0m end"
	scrubSGR = "\x1b[31m"
	// teaQuery is the question Bubble Tea's package init asks a terminal
	// (its background colour, then the cursor position) in every shiro
	// command whose stdout is a terminal, before main runs: shiro's own
	// fixed bytes, not anything a model or a command printed.
	teaQuery = "\x1b]11;?\x1b\\\x1b[6n"
)

// scrubbed reports the first sequence, control byte or C1 control in out
// that is not SGR (or not even SGR, when sgrOK is false), "" when there is
// none. A pseudo-terminal's CR LF counts as a newline.
func scrubbed(out string, sgrOK bool) string {
	out = strings.ReplaceAll(out, "\r\n", "\n")
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case c == 0x1b && sgrOK && strings.HasPrefix(out[i:], scrubSGR):
			i += len(scrubSGR) - 1
		case c == 0x1b && sgrOK && strings.HasPrefix(out[i:], "\x1b[0m"):
			i += 3
		case c == 0x1b || c == 0x07 || c == '\r' || c < 0x20 && c != '\n' && c != '\t',
			c == 0xc2 && i+1 < len(out) && out[i+1] >= 0x80 && out[i+1] <= 0x9f:
			end := min(len(out), i+12)
			return out[max(0, i-20):end]
		}
	}
	return ""
}

// TestHeadlessScrub: under a pseudo-terminal (script), headless output
// keeps colours and nothing else of the model's text, of a command's
// output and of a file name the workspace chose; with stdout to a file,
// not even colours; --json keeps the exact text, escaped.
func TestHeadlessScrub(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	script, err := exec.LookPath("script")
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("CI=true and script (util-linux) is missing: %v", err)
		}
		t.Skipf("no script: %v", err)
	}
	// newWorkspace holds a skill file whose name carries an escape, as a
	// FIFO: the notice that it is not read names it.
	newWorkspace := func(t *testing.T) string {
		ws := testenv.Workspace(t, api)
		skills := filepath.Join(ws, ".shiro", "skills")
		if err := os.MkdirAll(skills, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(skills, "x\x1b]2;owned\x07.md"), 0o644); err != nil {
			t.Fatal(err)
		}
		return ws
	}
	const quotedName = `".shiro/skills/x\x1b]2;owned\a.md" is a FIFO; not read`
	// The command prints the attack but its C1 control (the bash tool
	// shows output holding one as binary).
	printed := strings.NewReplacer("'", "", "\u009b", "").Replace(scrubAttack)
	command := "printf '" + printed + "'; exit 3"
	replies := func() []fakemodel.Reply {
		return []fakemodel.Reply{
			{ToolCalls: []fakemodel.ToolCall{{ID: "c1", Name: "bash", Input: bashJSON(command, 0)}}},
			{Text: "model " + scrubAttack, Chunks: 7},
		}
	}
	bin := testenv.Binary(t)
	// run starts shiro with args from a shell script (redirect is its
	// redirection, if any), under script when pty is set; it returns what
	// reached the test: the terminal's transcript, or stdout and stderr.
	run := func(t *testing.T, pty bool, redirect string, args ...string) (terminal, stdout, stderr string) {
		t.Helper()
		srv := fakemodel.New(t, replies()...)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		wrapper := filepath.Join(t.TempDir(), "run.sh")
		line := `exec "$SHIRO_BIN_UNDER_TEST" ` + strings.Join(quoted, " ") + " " + redirect + "\n"
		if err := os.WriteFile(wrapper, []byte("#!/bin/sh\n"+line), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "sh", wrapper)
		if pty {
			cmd = exec.CommandContext(ctx, script, "-qefc", wrapper, "/dev/null")
		}
		cmd.Dir = newWorkspace(t)
		cmd.Env = append(os.Environ(), append(headlessEnv(t, providers[0], srv.URL), "SHIRO_BIN_UNDER_TEST="+bin, "TERM=xterm-256color")...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatalf("run %v: %v", args, err)
		}
		if pty {
			return strings.TrimPrefix(out.String(), teaQuery), "", errb.String()
		}
		return "", out.String(), errb.String()
	}
	visible := []string{"model clip", "title", "bell", "moves", "erase", "red end", quotedName}
	// noSGR is what a reader sees of a terminal's text.
	noSGR := func(s string) string { return strings.NewReplacer(scrubSGR, "", "\x1b[0m", "").Replace(s) }

	t.Run("on a terminal only colours survive", func(t *testing.T) {
		t.Parallel()
		term, _, _ := run(t, true, "", "-p", "--yolo", "go")
		mustContain(t, "the terminal", noSGR(term), visible...)
		mustContain(t, "the terminal", term, scrubSGR+"red")
		if bad := scrubbed(term, true); bad != "" {
			t.Errorf("the terminal got a sequence: %q\n%q", bad, term)
		}
	})
	t.Run("with stdout to a file nothing survives there", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "out.txt")
		term, _, _ := run(t, true, "> "+out, "-p", "--yolo", "go")
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		mustContain(t, "stdout in the file", string(b), "model clip", "red end")
		if bad := scrubbed(string(b), false); bad != "" {
			t.Errorf("the file got a sequence: %q\n%q", bad, b)
		}
		// stderr is still the terminal: colours there, nothing else.
		mustContain(t, "stderr on the terminal", term, quotedName)
		if bad := scrubbed(term, true); bad != "" {
			t.Errorf("the terminal got a sequence: %q\n%q", bad, term)
		}
	})
	t.Run("without a terminal nothing survives", func(t *testing.T) {
		t.Parallel()
		_, stdout, stderr := run(t, false, "", "-p", "--yolo", "go")
		mustContain(t, "stdout", stdout, "model clip", "red end")
		mustContain(t, "stderr", stderr, quotedName)
		for name, s := range map[string]string{"stdout": stdout, "stderr": stderr} {
			if bad := scrubbed(s, false); bad != "" {
				t.Errorf("%s got a sequence: %q\n%q", name, bad, s)
			}
		}
	})
	// A command's output reaches the terminal through shiro tool (live on
	// stderr, the result on stdout); -p prints it only in --json.
	t.Run("shiro tool prints a command's output clean", func(t *testing.T) {
		t.Parallel()
		term, _, _ := run(t, true, "", "tool", "bash", bashJSON(command, 0))
		if n := strings.Count(noSGR(term), "clip linkhere title bell moves erase c12J red end"); n != 2 {
			t.Errorf("the terminal shows the output %d times, want 2 (live and the result)", n)
		}
		if bad := scrubbed(term, true); bad != "" {
			t.Errorf("the terminal got a sequence: %q\n%q", bad, term)
		}
	})
	t.Run("json keeps the exact text, escaped", func(t *testing.T) {
		t.Parallel()
		_, stdout, _ := run(t, false, "", "-p", "--yolo", "--json", "go")
		if bad := scrubbed(stdout, false); bad != "" {
			t.Errorf("the JSON lines hold a raw sequence: %q", bad)
		}
		var text strings.Builder
		var output string
		sc := bufio.NewScanner(strings.NewReader(stdout))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev struct{ Type, Text, Output string }
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("not JSON: %q: %v", sc.Text(), err)
			}
			switch ev.Type {
			case "text":
				text.WriteString(ev.Text)
			case "tool-result":
				output = ev.Output
			}
		}
		if text.String() != "model "+scrubAttack {
			t.Errorf("the text events hold %q, want %q", text.String(), "model "+scrubAttack)
		}
		if !strings.Contains(output, printed) {
			t.Errorf("the command's output lost its bytes in JSON: %q", output)
		}
	})
}
