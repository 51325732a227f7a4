package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

func TestTUIErrorsAreOneLineAndRetriesShow(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		ws := t.TempDir()
		soon := map[string]string{"retry-after": "0"}
		srv := fakemodel.New(t,
			fakemodel.Reply{Status: 503, Header: soon},
			fakemodel.Reply{Text: "Made it on the second attempt."},
			fakemodel.Reply{Status: 401},
		)
		srv.SetModels(http.StatusNotFound, "<!DOCTYPE html><html><head><title>404</title></head><body><h1>Not Found</h1><p>nginx</p></body></html>")
		s := startTUIAt(t, ws, srv, w, h, false)

		s.keys("hello", true)
		s.waitFor("Made it on the second attempt.", 20*time.Second)
		if scr := s.screen(); !strings.Contains(scr, "retrying in 0 s (attempt 2 of 4)") || !strings.Contains(scr, "503 Service") {
			t.Errorf("the retry was not shown:\n%s", scr)
		}

		s.keys("again", true)
		s.waitFor("the prompt was not kept", 20*time.Second)
		scr := flat(s.screen())
		if !strings.Contains(scr, "error: 401 Unauthorized - check the key: /provider") || strings.Contains(scr, "{") || strings.Contains(scr, "authentication_error") {
			t.Errorf("the error is not one plain line:\n%s", s.screen())
		}

		// A model listing that answers with an HTML page says so in a line.
		s.keys("/model", true)
		s.waitFor("could not list models", 20*time.Second)
		s.waitFor("up/down move", 5*time.Second)
		scr = flat(s.screen())
		if !strings.Contains(scr, "404 Not Found") || strings.Contains(scr, "<") || strings.Contains(scr, "nginx") {
			t.Errorf("the listing's failure:\n%s", s.screen())
		}
		s.dismiss("could not list models")
		s.quit()
	})
}

func TestTUIAFailedPromptIsSentOnceWhenRetried(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		ws := t.TempDir()
		busy := fakemodel.Reply{Status: 503, Header: map[string]string{"retry-after": "0"}}
		srv := fakemodel.New(t, busy, busy, busy, busy,
			fakemodel.Reply{Text: "Hello back."},
			fakemodel.Reply{Text: "Fine."},
		)
		s := startTUIAt(t, ws, srv, w, h, false)
		s.keys("hello", true)
		s.waitFor("up, enter sends it again", 30*time.Second)
		s.press("Up")
		s.waitFor("> hello", 5*time.Second)
		s.press("Enter")
		s.waitFor("Hello back.", 20*time.Second)
		s.keys("and then", true)
		s.waitFor("Fine.", 20*time.Second)
		reqs := modelRequests(srv)
		if got := userTexts(reqs[len(reqs)-1]); !slices.Equal(got, []string{"hello", "and then"}) {
			t.Errorf("the last request's prompts are %q, want hello once, then the next", got)
		}
		s.quit()
	})
}

func TestTUIToolLinesSayWhatHappened(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		api := testenv.RequireDocker(t)
		testenv.RequireImage(t, api)
		requireTmux(t)
		ws := testenv.Workspace(t, api)
		tuiWriteFile(t, ws, "a.txt", "alpha\n")
		srv := fakemodel.New(t,
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: `{"command":"seq 1 30; exit 3"}`}}},
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b2", Name: "bash", Input: `{"command":"sleep 30","timeout":1000}`}}},
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "e1", Name: "edit_file", Input: `{"path":"a.txt","oldString":"omega","newString":"psi"}`}}},
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w1", Name: "write_file", Input: `{"path":"notes.txt","content":"x"}`}}},
			fakemodel.Reply{Text: "That is all."},
		)
		s := startTUIAt(t, ws, srv, w, h, true)
		s.keys("go", true)

		// The failing command: its exit code and its last lines.
		s.waitFor("bash wants to run", 20*time.Second)
		s.waitFor("| n deny", 5*time.Second)
		s.keys("a", false)
		s.waitFor("x bash(seq 1 30; exit 3) · exit 3", 20*time.Second)
		// The command killed by its timeout (always allowed: no prompt).
		s.waitFor("x bash(sleep 30) · timed out", 20*time.Second)
		// The edit that cannot apply fails without asking.
		s.waitFor("x edit_file(a.txt) · oldString not found", 20*time.Second)
		// The denied write names its path.
		s.waitFor("write_file wants to run", 20*time.Second)
		s.waitFor("| n deny", 5*time.Second)
		s.keys("n", false)
		scr := s.waitFor("That is all.", 20*time.Second)
		for _, want := range []string{"    30", "x write_file denied: notes.txt"} {
			if !strings.Contains(scr+s.scrollback(), want) {
				t.Errorf("the transcript lacks %q:\n%s", want, s.scrollback())
			}
		}
		if strings.Contains(s.scrollback(), "edit_file wants to run") {
			t.Error("the edit that cannot apply asked for approval")
		}
		// ctrl-o shows the newest output whole, again the one before.
		s.press("C-o")
		s.waitFor("sleep 30", 5*time.Second)
		s.press("C-o")
		s.waitFor("(2 of 2)", 5*time.Second)
		for i := 0; !strings.Contains(s.screen(), "stdout:"); i++ {
			if i > 5 {
				t.Fatalf("the output's start is not shown:\n%s", s.screen())
			}
			s.press("PageUp")
			time.Sleep(typingPause)
		}
		s.dismiss("(2 of 2)")
		// /tools says bash is always allowed now.
		s.keys("/tools", true)
		scr = s.waitFor("esc to dismiss", 5*time.Second)
		if !regexpRow(scr, `bash\s+core\s+allowed`) {
			t.Errorf("/tools does not show the grant:\n%s", scr)
		}
		s.dismiss("esc to dismiss")
		s.quit()
	})
}

// flat is a screen's text with its rows joined by spaces (a line the UI
// wrapped to fit reads whole).
func flat(scr string) string {
	return strings.Join(strings.Fields(scr), " ")
}

// regexpRow reports a row of scr matching the pattern.
func regexpRow(scr, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, row := range strings.Split(scr, "\n") {
		if re.MatchString(row) {
			return true
		}
	}
	return false
}

func TestTUIReasoningStaysAndComesBackOnResume(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		ws := t.TempDir()
		srv := fakemodel.New(t,
			fakemodel.Reply{Reasoning: "The user wants a haiku about terminals.", Text: "Cursor blinks at dawn."},
			fakemodel.Reply{Text: "Another one."},
		)
		env := append(headlessEnv(t, providers[0], srv.URL), "TERM=xterm-256color")
		s := newTmux(t, ws, w, h, env, testenv.Binary(t), "--no-sandbox")
		s.run("set-option", "-t", s.name, "remain-on-exit", "on")
		s.waitFor("no sandbox", 30*time.Second)
		s.keys("a haiku", true)
		s.waitFor("Cursor blinks at dawn.", 20*time.Second)
		s.waitFor("thinking · 10 tokens · ctrl-o to expand", 5*time.Second)
		s.quit()

		r := newTmux(t, ws, w, h, env, testenv.Binary(t), "--no-sandbox", "-c")
		r.run("set-option", "-t", r.name, "remain-on-exit", "on")
		r.waitFor("Cursor blinks at dawn.", 30*time.Second)
		r.waitFor("thinking · 10 tokens · ctrl-o to expand", 5*time.Second)
		r.press("C-o")
		r.waitFor("The user wants a haiku about terminals.", 5*time.Second)
		r.dismiss("The user wants a haiku about terminals.")
		r.quit()
	})
}

func TestTUISmallThings(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		api := testenv.RequireDocker(t)
		testenv.RequireImage(t, api)
		requireTmux(t)
		ws := testenv.Workspace(t, api)
		tuiWriteFile(t, ws, "my docs/read me.md", "x\n")
		if err := os.MkdirAll(filepath.Join(ws, ".shiro"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeJSON(t, filepath.Join(ws, ".shiro", "config.json"), map[string]any{"sandbox": map[string]any{"network": "none"}})
		srv := fakemodel.New(t, fakemodel.Reply{Text: "Seen."}, fakemodel.Reply{Text: "Pasted."})
		s := startTUIAt(t, ws, srv, w, h, true)
		// The network mode is in the status bar.
		s.waitFor("no network", 5*time.Second)

		// @ quotes a path with spaces.
		s.keys("look at @read", false)
		s.waitFor("my docs/read me.md", 10*time.Second)
		s.press("Tab")
		s.waitFor(`look at "my docs/read me.md"`, 5*time.Second)
		s.press("Enter")
		s.waitFor("Seen.", 20*time.Second)

		// A long paste is collapsed, and sent whole.
		paste := strings.Repeat("a pasted line\n", 200)
		s.run("set-buffer", "-t", s.name, "--", paste)
		s.run("paste-buffer", "-p", "-t", s.name)
		s.waitFor("[pasted text #1, 200 lines]", 10*time.Second)
		s.press("Enter")
		s.waitFor("Pasted.", 20*time.Second)
		if got := lastUserText(modelRequests(srv)[1]); strings.Count(got, "a pasted line") != 200 {
			t.Errorf("the paste reached the model as %d bytes", len(got))
		}

		// /resume without an id offers the saved sessions.
		s.keys("/save", true)
		s.waitFor("saved ", 10*time.Second)
		s.keys("/resume", true)
		s.waitFor("Resume which session?", 10*time.Second)
		s.waitFor("up/down move", 5*time.Second)
		s.dismiss("Resume which session?")
		s.quit()
	})
}

func TestTUIAlwaysAllowACommandsPrefix(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		api := testenv.RequireDocker(t)
		testenv.RequireImage(t, api)
		requireTmux(t)
		ws := testenv.Workspace(t, api)
		srv := fakemodel.New(t,
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: `{"command":"ls -a && ls ."}`}}},
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b2", Name: "bash", Input: `{"command":"ls -la /"}`}}},
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b3", Name: "bash", Input: `{"command":"ls; pwd"}`}}},
			fakemodel.Reply{Text: "Listed."},
		)
		s := startTUIAt(t, ws, srv, w, h, true)
		s.keys("list", true)
		s.waitFor(`Always allow "ls …" this session`, 20*time.Second)
		s.waitFor("p always its prefix", 5*time.Second)
		s.keys("p", false)
		// ls -la / runs without asking; ls; pwd asks (pwd is not ls).
		s.waitFor("ls; pwd", 20*time.Second)
		s.waitFor("| n deny", 5*time.Second)
		s.keys("n", false)
		s.waitFor("Listed.", 20*time.Second)
		reqs := modelRequests(srv)
		if !providers[0].paired(t, reqs[2].JSON(), "b2", "exit: 0") || !providers[0].paired(t, reqs[3].JSON(), "b3", "User denied") {
			t.Errorf("ls -la / should have run and ls; pwd been denied")
		}
		s.keys("/tools", true)
		s.waitFor("esc to dismiss", 5*time.Second)
		for i := 0; !strings.Contains(flat(s.screen()), `bash allowed this session for "ls …"`); i++ {
			if i > 20 {
				t.Fatalf("/tools does not show the grant:\n%s", s.screen())
			}
			s.press("PageDown")
			time.Sleep(typingPause)
		}
		s.dismiss("esc to dismiss")
		s.quit()
	})
}
