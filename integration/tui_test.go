package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// tuiWidth and tuiHeight are the terminal the UI tests drive.
const (
	tuiWidth  = 120
	tuiHeight = 40
)

// startTUI runs the interactive binary in tmux against srv, in workspace
// ws, with the real Docker sandbox, and waits until the sandbox is ready.
func startTUI(t *testing.T, ws string, srv *fakemodel.Server, args ...string) *tmuxSession {
	t.Helper()
	env := append(headlessEnv(t, providers[0], srv.URL), "TERM=xterm-256color")
	s := newTmux(t, ws, tuiWidth, tuiHeight, env, append([]string{testenv.Binary(t)}, args...)...)
	s.run("set-option", "-t", s.name, "remain-on-exit", "on")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen at the end:\n%s", s.screen())
		}
	})
	s.waitFor("sandbox ready", 2*time.Minute)
	return s
}

// press sends tmux key names (Enter, Escape, C-c, C-r).
func (s *tmuxSession) press(keys ...string) {
	s.t.Helper()
	s.run(append([]string{"send-keys", "-t", s.name}, keys...)...)
}

// waitGone polls the screen until it no longer contains what.
func (s *tmuxSession) waitGone(what string, within time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		scr := s.screen()
		if !strings.Contains(scr, what) {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen still shows %q:\n%s", what, scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitIdle polls the screen until one capture shows the turn over: no
// "esc to interrupt", and the empty prompt's placeholder. The status line
// can be missing from a capture taken while it is redrawn, so its absence
// alone does not say the turn ended.
func (s *tmuxSession) waitIdle(within time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		scr := s.screen()
		if !strings.Contains(scr, "esc to interrupt") && strings.Contains(scr, "ask shiro...") {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the turn never ended:\n%s", scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dismiss presses Escape and waits until what it closes (gone, a text it
// shows) has left the screen. A key sent right behind an Escape can reach
// shiro in the same read, and the terminal parser takes the two for one
// alt+key: the Escape is lost (and a ctrl-c that should quit closes the
// form the Escape left open).
func (s *tmuxSession) dismiss(gone string) {
	s.t.Helper()
	s.press("Escape")
	s.waitGone(gone, 5*time.Second)
}

// quit waits for the UI to be idle, presses ctrl-c and waits for the
// process to end. A turn's last words are on the screen a moment before it
// ends, and a ctrl-c in that moment cancels the turn instead of quitting.
func (s *tmuxSession) quit() {
	s.t.Helper()
	s.waitGone("esc to interrupt", 30*time.Second)
	s.press("C-c")
	deadline := time.Now().Add(30 * time.Second)
	for strings.TrimSpace(s.run("display-message", "-p", "-t", s.name, "#{pane_dead}")) != "1" {
		if time.Now().After(deadline) {
			s.t.Fatalf("shiro did not exit after ctrl-c:\n%s", s.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// userTexts lists the text of each user message a model request carries.
func userTexts(req fakemodel.Request) []string {
	var out []string
	for _, m := range list(req.JSON()["messages"]) {
		msg := obj(m)
		if msg["role"] != "user" {
			continue
		}
		if s, ok := msg["content"].(string); ok {
			out = append(out, s)
			continue
		}
		for _, c := range list(msg["content"]) {
			if b := obj(c); b["type"] == "text" {
				out = append(out, jsonString(b["text"]))
			}
		}
	}
	return out
}

// lastUserText is the newest user text of a request.
func lastUserText(req fakemodel.Request) string {
	texts := userTexts(req)
	if len(texts) == 0 {
		return ""
	}
	return texts[len(texts)-1]
}

func tuiSetup(t *testing.T) (*client.Client, string) {
	t.Helper()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	requireTmux(t)
	return api, testenv.Workspace(t, api)
}

func TestTUIStreamsAnAnswer(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	srv := fakemodel.New(t, fakemodel.Reply{Text: "The answer is **forty-two**, as always.", Chunks: 8, InputTokens: 1200, OutputTokens: 30})
	s := startTUI(t, ws, srv)
	s.waitFor("shiro ", 5*time.Second)
	s.keys("what is the answer", true)
	s.waitFor("The answer is forty-two, as always.", 20*time.Second)
	s.waitFor("1200 in / 30 out tokens", 5*time.Second)
	if got := lastUserText(modelRequests(srv)[0]); got != "what is the answer" {
		t.Errorf("the model got %q", got)
	}
	s.quit()
	s.waitFor("Saved 2 message(s)", 5*time.Second)
}

func TestTUIApprovalShowsTheDiffAndAlwaysStopsAsking(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w1", Name: "write_file", Input: `{"path":"notes.txt","content":"alpha\nbeta\n"}`}}},
		fakemodel.Reply{Text: "Wrote the notes."},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w2", Name: "write_file", Input: `{"path":"a.txt","content":"a\n"}`}}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w3", Name: "write_file", Input: `{"path":"b.txt","content":"b\n"}`}}},
		fakemodel.Reply{Text: "Both are written."},
	)
	s := startTUI(t, ws, srv)
	s.keys("write the notes", true)
	s.waitFor("write_file wants to run", 20*time.Second)
	// The prompt takes answers once the typing that opened it has paused.
	scr := s.waitFor("y allow once | a always allow write_file | n deny", 5*time.Second)
	for _, want := range []string{"notes.txt (new file) +2 -0", " + alpha", " + beta", "Yes, allow once", "Always allow write_file this session", "No, deny"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the approval lacks %q:\n%s", want, scr)
		}
	}
	s.keys("y", false)
	s.waitFor("Wrote the notes.", 10*time.Second)
	if got := tuiReadFile(t, ws, "notes.txt"); got != "alpha\nbeta\n" {
		t.Errorf("notes.txt is %q", got)
	}

	s.keys("two more", true)
	s.waitFor("a.txt (new file) +1 -0", 20*time.Second)
	s.waitFor("y allow once", 5*time.Second)
	s.keys("a", false)
	// No key is pressed after "a": the turn only ends if b.txt is written
	// without asking.
	s.waitFor("Both are written.", 10*time.Second)
	if tuiReadFile(t, ws, "a.txt") != "a\n" || tuiReadFile(t, ws, "b.txt") != "b\n" {
		t.Errorf("a.txt %q, b.txt %q", tuiReadFile(t, ws, "a.txt"), tuiReadFile(t, ws, "b.txt"))
	}
	s.quit()
}

func TestTUICtrlCInterruptsTheCommandAndTheTurnGoesOn(t *testing.T) {
	t.Parallel()
	api, ws := tuiSetup(t)
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: `{"command":"sleep 100"}`}}},
		fakemodel.Reply{Text: "Stopped as you asked."},
	)
	s := startTUI(t, ws, srv, "--yolo")
	s.keys("wait a while", true)
	s.waitFor("bash(sleep 100)", 20*time.Second)
	id := onlyContainer(t, api, ws)
	deadline := time.Now().Add(20 * time.Second)
	for !slices.ContainsFunc(top(t, api, id), func(p string) bool { return strings.Contains(p, "sleep 100") }) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep 100 never ran in the container: %q", top(t, api, id))
		}
		time.Sleep(50 * time.Millisecond)
	}

	s.press("C-c")
	s.waitFor("x bash(sleep 100) · interrupted", 5*time.Second)
	scr := s.waitFor("Stopped as you asked.", 10*time.Second)
	if !strings.Contains(scr, "interrupted: sleep 100") {
		t.Errorf("no interrupted line:\n%s", scr)
	}
	reqs := modelRequests(srv)
	if len(reqs) != 2 || !providers[0].paired(t, reqs[1].JSON(), "b1", "The user interrupted this command") {
		t.Errorf("the model did not receive the interrupted result (%d requests)", len(reqs))
	}
	noneMatch(t, top(t, api, id), "sleep 100")
	s.quit()
}

func TestTUIQueuedPromptsRunInOrder(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	srv := fakemodel.New(t,
		fakemodel.Reply{Delay: 3 * time.Second, Text: "First answer."},
		fakemodel.Reply{Text: "Second answer."},
		fakemodel.Reply{Text: "Third answer."},
	)
	s := startTUI(t, ws, srv)
	s.keys("one", true)
	s.waitFor("esc to interrupt", 5*time.Second)
	s.keys("two", true)
	s.keys("three", true)
	scr := s.waitFor("queued: 2", 5*time.Second)
	if !strings.Contains(scr, "1. two") || !strings.Contains(scr, "2. three") {
		t.Errorf("queue panel:\n%s", scr)
	}
	s.waitFor("Third answer.", 20*time.Second)
	reqs := modelRequests(srv)
	var got []string
	for _, r := range reqs {
		got = append(got, lastUserText(r))
	}
	if !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Errorf("prompts reached the model as %q", got)
	}
	s.quit()
}

func TestTUIEscAbortsTheTurnAndClearsTheQueue(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	srv := fakemodel.New(t,
		fakemodel.Reply{Delay: time.Minute, Text: "Never shown."},
		fakemodel.Reply{Text: "After the abort."},
	)
	s := startTUI(t, ws, srv)
	s.keys("one", true)
	s.waitFor("esc to interrupt", 5*time.Second)
	s.keys("two", true)
	s.keys("three", true)
	s.waitFor("queued: 2", 5*time.Second)
	s.press("Escape")
	s.waitGone("esc to interrupt", 5*time.Second)
	scr := s.waitFor("ask shiro...", 5*time.Second)
	if strings.Contains(scr, "queued:") {
		t.Errorf("the queue survived esc:\n%s", scr)
	}
	s.keys("after", true)
	s.waitFor("After the abort.", 10*time.Second)
	reqs := modelRequests(srv)
	var got []string
	for _, r := range reqs {
		got = append(got, lastUserText(r))
	}
	if !slices.Equal(got, []string{"one", "after"}) {
		t.Errorf("prompts reached the model as %q, want the queued ones dropped", got)
	}
	s.quit()
}

func TestTUIFilePickerAndReasoningPanel(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	for _, p := range []string{"src/main.go", "src/util/strings.go", "lib/src/other.go", "docs/src-notes.md", "README.md"} {
		tuiWriteFile(t, ws, p, "x\n")
	}
	thinking := make(chan struct{})
	srv := fakemodel.New(t,
		fakemodel.Reply{
			Reasoning: "I should read the files first.\nThen wait for the build.",
			Stall:     thinking,
			ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: `{"command":"sleep 60"}`}},
		},
		fakemodel.Reply{Text: "Done thinking."},
	)
	s := startTUI(t, ws, srv, "--yolo")

	s.keys("look at @src/", false)
	scr := s.waitFor("lib/src/other.go", 10*time.Second)
	a, b, c := strings.Index(scr, "src/main.go"), strings.Index(scr, "src/util/strings.go"), strings.Index(scr, "lib/src/other.go")
	if a < 0 || b < a || c < b || strings.Contains(scr, "README.md") {
		t.Errorf("files under src/ should come first:\n%s", scr)
	}
	s.press("Tab")
	s.waitFor("look at src/main.go", 5*time.Second)
	s.press("C-u")
	s.waitFor("ask shiro...", 5*time.Second)

	// While the model thinks, ctrl-r shows and hides its reasoning.
	s.keys("think", true)
	s.waitFor("ctrl-r to expand", 20*time.Second)
	if strings.Contains(s.screen(), "I should read the files first.") {
		t.Error("the reasoning is expanded before ctrl-r")
	}
	s.press("C-r")
	s.waitFor("I should read the files first.", 5*time.Second)
	s.waitFor("ctrl-r to collapse", 5*time.Second)
	s.press("C-r")
	s.waitGone("I should read the files first.", 5*time.Second)
	s.waitFor("ctrl-r to expand", 5*time.Second)

	// Once the step acts, its reasoning stays as one collapsed line.
	close(thinking)
	s.waitFor("bash(sleep 60)", 20*time.Second)
	s.waitFor("thinking · 14 tokens", 5*time.Second)
	s.press("C-c") // kill the sleep; the turn goes on and ends
	s.waitFor("Done thinking.", 10*time.Second)
	s.waitGone("thinking…", 5*time.Second)
	s.press("C-o") // the command's result, then the step's reasoning
	s.waitFor("(1 of 2)", 5*time.Second)
	s.press("C-o")
	s.waitFor("I should read the files first.", 5*time.Second)
	s.press("Escape")
	s.waitGone("I should read the files first.", 5*time.Second)
	s.quit()
}

func tuiReadFile(t *testing.T, ws, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, name))
	if err != nil {
		t.Errorf("read %s: %v", name, err)
	}
	return string(b)
}

func tuiWriteFile(t *testing.T, ws, name, content string) {
	t.Helper()
	p := filepath.Join(ws, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
