package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// The small terminals the daily-use tests run in: the common 80×24 and the
// smallest the chat UI supports.
var tuiSizes = []struct{ w, h int }{{80, 24}, {60, 20}}

// eachSize runs f once per terminal size, in parallel.
func eachSize(t *testing.T, f func(t *testing.T, w, h int)) {
	t.Helper()
	for _, sz := range tuiSizes {
		t.Run(fmt.Sprintf("%dx%d", sz.w, sz.h), func(t *testing.T) {
			t.Parallel()
			f(t, sz.w, sz.h)
		})
	}
}

// startTUIAt runs the chat UI at w×h against srv. With sandbox, commands run
// in the real Docker sandbox (and the UI is waited for until it is ready);
// without, on this machine.
func startTUIAt(t *testing.T, ws string, srv *fakemodel.Server, w, h int, sandbox bool, args ...string) *tmuxSession {
	t.Helper()
	if !sandbox {
		args = append(args, "--no-sandbox")
	}
	env := append(headlessEnv(t, providers[0], srv.URL), "TERM=xterm-256color")
	s := newTmux(t, ws, w, h, env, append([]string{testenv.Binary(t)}, args...)...)
	s.run("set-option", "-t", s.name, "remain-on-exit", "on")
	s.run("set-option", "-t", s.name, "history-limit", "5000")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen at the end:\n%s", s.screen())
		}
	})
	if sandbox {
		s.waitFor("sandbox ready", 2*time.Minute)
	} else {
		s.waitFor("no sandbox", 30*time.Second)
	}
	return s
}

// alive reports whether the program still runs in the pane.
func (s *tmuxSession) alive() bool {
	return strings.TrimSpace(s.run("display-message", "-p", "-t", s.name, "#{pane_dead}")) != "1"
}

// waitDead waits for the program to end.
func (s *tmuxSession) waitDead(within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for s.alive() {
		if time.Now().After(deadline) {
			s.t.Fatalf("shiro still runs:\n%s", s.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scrollback is everything the pane holds: the scrollback and the screen.
func (s *tmuxSession) scrollback() string {
	return s.run("capture-pane", "-p", "-J", "-S", "-", "-t", s.name)
}

// record starts writing every byte the program prints to the returned
// file.
func (s *tmuxSession) record() string {
	s.t.Helper()
	file := filepath.Join(s.t.TempDir(), "pane.raw")
	s.run("pipe-pane", "-t", s.name, "-o", "cat >> "+file)
	return file
}

// typist types one key at a time at a steady pace, as a person does.
// The pause is the typing's rhythm, not a wait for anything.
const typingPause = 40 * time.Millisecond

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("never happened: %s", what)
	}
}

func TestTUITypeAheadNeverAnswersAForm(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		ws := t.TempDir()
		reached, hold := make(chan struct{}), make(chan struct{})
		srv := fakemodel.New(t,
			fakemodel.Reply{Reached: reached, Hold: hold, Text: "Let me look.", ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: `{"command":"echo one"}`}}},
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b2", Name: "bash", Input: `{"command":"echo two"}`}}},
			fakemodel.Reply{Text: "Both were refused."},
		)
		s := startTUIAt(t, ws, srv, w, h, false)
		s.keys("look around", true)
		waitClosed(t, reached, "the model request")

		// The user types the next prompt ("aaaa...") while the model
		// answers; the approval opens in the middle of it. The typist
		// keeps its own rhythm, apart from the looks at the screen.
		var typed atomic.Int32
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Not s.keys: a failure here must not call t.Fatal off the
				// test's goroutine; a key that did not go out is not counted.
				if exec.Command("tmux", "-S", s.socket, "send-keys", "-t", s.name, "-l", "a").Run() != nil {
					return
				}
				typed.Add(1)
				time.Sleep(typingPause)
			}
		}()
		stopTyping := func() {
			select {
			case <-stop:
			default:
				close(stop)
			}
			<-stopped
		}
		defer stopTyping()
		for typed.Load() < 5 {
			time.Sleep(typingPause)
		}
		close(hold)
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(s.screen(), "bash wants to run") {
			if time.Now().After(deadline) {
				t.Fatalf("the approval never opened:\n%s", s.screen())
			}
			time.Sleep(typingPause)
		}
		for after := typed.Load() + 10; typed.Load() < after; {
			time.Sleep(typingPause)
		}
		stopTyping()
		// Once the typing stops, the form takes answers; nothing typed
		// before answered it.
		scr := s.waitFor("| n deny", 10*time.Second)
		if !strings.Contains(scr, "echo one") {
			t.Fatalf("the first approval is not the one shown:\n%s", scr)
		}
		s.keys("n", false)
		// The second command asks too: no "a" granted always allow.
		s.waitFor("echo two", 20*time.Second)
		s.waitFor("| n deny", 10*time.Second)
		s.keys("n", false)
		s.waitFor("Both were refused.", 20*time.Second)

		// Every key typed is in the draft, which is the next prompt.
		s.press("Enter")
		deadline = time.Now().Add(20 * time.Second)
		for len(modelRequests(srv)) < 4 {
			if time.Now().After(deadline) {
				t.Fatalf("the draft was not sent:\n%s", s.screen())
			}
			time.Sleep(50 * time.Millisecond)
		}
		reqs := modelRequests(srv)
		if got, want := lastUserText(reqs[3]), strings.Repeat("a", int(typed.Load())); got != want {
			t.Errorf("the draft sent was %q, want the %d a's typed", got, typed.Load())
		}
		for _, id := range []string{"b1", "b2"} {
			if !providers[0].paired(t, reqs[2].JSON(), id, "User denied this tool call.") {
				t.Errorf("call %s was not denied", id)
			}
		}
		s.quit()
	})
}

func TestTUICtrlCNeverQuitsMidTurn(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		ws := t.TempDir()
		streaming, thinking, last := make(chan struct{}), make(chan struct{}), make(chan struct{})
		srv := fakemodel.New(t,
			fakemodel.Reply{Text: "Once upon a time", Stall: streaming},
			fakemodel.Reply{Reasoning: "Let me think about this carefully.", Stall: thinking},
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: `{"command":"echo approve me"}`}}},
			fakemodel.Reply{Text: "Still going", Stall: last},
		)
		t.Cleanup(func() { close(streaming); close(thinking); close(last) })
		s := startTUIAt(t, ws, srv, w, h, false)

		cancelled := func(what string) {
			t.Helper()
			s.press("C-c")
			s.waitFor("turn cancelled", 10*time.Second)
			s.waitGone("esc to interrupt", 10*time.Second)
			if !s.alive() {
				t.Fatalf("ctrl-c %s quit shiro", what)
			}
			// The next ctrl-c must not count as the second of a pair.
			s.keys("x", false)
			s.press("BSpace")
		}

		s.keys("tell a story", true)
		s.waitFor("Once upon a time", 20*time.Second)
		cancelled("while a reply streams")

		s.keys("think first", true)
		// The reasoning's live line; the session's header says "thinking:"
		// too, so the bare word is on the screen before the model is asked.
		s.waitFor("thinking… ~", 20*time.Second)
		cancelled("while the model thinks")

		s.keys("run something", true)
		s.waitFor("bash wants to run", 20*time.Second)
		cancelled("with an approval open")
		s.waitGone("bash wants to run", 5*time.Second)

		// With text in the input, ctrl-c clears it and nothing else.
		s.keys("a draft", false)
		s.waitFor("a draft", 5*time.Second)
		s.press("C-c")
		s.waitGone("a draft", 5*time.Second)
		if !s.alive() {
			t.Fatal("ctrl-c on a draft quit shiro")
		}

		// Two in a row quit from anywhere, even mid-turn.
		s.keys("one more", true)
		s.waitFor("Still going", 20*time.Second)
		s.press("C-c", "C-c")
		s.waitDead(10 * time.Second)
	})
}

func TestTUIBinaryOutputLeavesNoControlBytes(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		api := testenv.RequireDocker(t)
		testenv.RequireImage(t, api)
		requireTmux(t)
		ws := testenv.Workspace(t, api)
		srv := fakemodel.New(t,
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: `{"command":"head -c 3000 /dev/urandom; sleep 600"}`}}},
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b2", Name: "bash", Input: `{"command":"echo start; head -c 3000 /dev/urandom; echo; echo end"}`}}},
			fakemodel.Reply{Text: "Noise, as expected."},
		)
		s := startTUIAt(t, ws, srv, w, h, true, "--yolo")
		raw := s.record()
		s.keys("make some noise", true)
		// The live output panel shows the binary while the command runs.
		s.waitFor("<binary output", 30*time.Second)
		s.press("C-c")
		s.waitFor("Noise, as expected.", 30*time.Second)
		s.waitFor("ask shiro", 5*time.Second)

		b, err := os.ReadFile(raw)
		if err != nil {
			t.Fatal(err)
		}
		if bad := controlBytes(b); bad != "" {
			t.Errorf("the program printed %s", bad)
		}
		for _, where := range []string{s.screen(), s.scrollback()} {
			if strings.ContainsRune(where, utf8.RuneError) {
				t.Errorf("the pane holds U+FFFD:\n%s", where)
			}
		}
		scr := s.screen()
		lines := strings.Split(strings.TrimRight(scr, "\n"), "\n")
		if !strings.HasPrefix(lines[len(lines)-2], "> ") || !strings.Contains(lines[len(lines)-1], "tools") {
			t.Errorf("the input and the status bar are torn:\n%s", scr)
		}
		reqs := modelRequests(srv)
		// (JSON escapes the angle brackets.)
		if len(reqs) != 3 || !providers[0].paired(t, reqs[2].JSON(), "b2", "binary output, 3001 bytes") {
			t.Errorf("the model did not get the binary described (%d requests)", len(reqs))
		}
		s.quit()
	})
}

// controlBytes describes the first byte of out that should never reach a
// terminal: a control byte other than newline, carriage return and the
// escape that opens a well-formed sequence, or invalid UTF-8.
func controlBytes(out []byte) string {
	for i := 0; i < len(out); {
		c := out[i]
		switch {
		case c == '\n' || c == '\r':
			i++
		case c == 0x1b:
			n := escapeLen(out[i:])
			if n == 0 {
				return fmt.Sprintf("a malformed escape sequence at byte %d: %q", i, out[i:min(len(out), i+12)])
			}
			i += n
		case c < 0x20 || c == 0x7f:
			return fmt.Sprintf("control byte %#x at byte %d: %q", c, i, out[max(0, i-20):min(len(out), i+20)])
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(out[i:])
			if r == utf8.RuneError && size <= 1 {
				return fmt.Sprintf("invalid UTF-8 at byte %d: %q", i, out[max(0, i-20):min(len(out), i+20)])
			}
			if r >= 0x80 && r <= 0x9f {
				return fmt.Sprintf("C1 control %U at byte %d", r, i)
			}
			i += size
		}
	}
	return ""
}

// escapeLen is the length of the escape sequence at the start of b (a
// CSI, an OSC ended by BEL or ST, or a two-byte escape), 0 when it is not
// one.
func escapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '[':
		for i := 2; i < len(b); i++ {
			switch c := b[i]; {
			case c >= 0x30 && c <= 0x3f, c >= 0x20 && c <= 0x2f:
			case c >= 0x40 && c <= 0x7e:
				return i + 1
			default:
				return 0
			}
		}
	case ']':
		for i := 2; i < len(b); i++ {
			switch {
			case b[i] == 0x07:
				return i + 1
			case b[i] == 0x1b && i+1 < len(b) && b[i+1] == '\\':
				return i + 2
			case b[i] < 0x20:
				return 0
			}
		}
	case '7', '8', '=', '>', 'M':
		return 2
	case '(':
		if len(b) > 2 && b[2] == 'B' {
			return 3
		}
	}
	return 0
}

func TestTUILongToolLinesLeaveNoLeftovers(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		api := testenv.RequireDocker(t)
		testenv.RequireImage(t, api)
		requireTmux(t)
		ws := testenv.Workspace(t, api)
		long := "sleep 600 # " + strings.Repeat("wait for the build server to come back ", 4)
		srv := fakemodel.New(t,
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: `{"command":"` + long + `"}`}}},
			fakemodel.Reply{Text: "Stopped, as you asked. " + strings.Repeat("The rest of the answer is long enough to wrap. ", 3)},
		)
		s := startTUIAt(t, ws, srv, w, h, true, "--yolo")
		s.keys("wait for the build", true)
		s.waitFor("esc to interrupt", 20*time.Second)
		s.waitFor("sleep 600", 20*time.Second)
		s.press("C-c")
		s.waitFor("Stopped, as you asked.", 20*time.Second)
		scr := s.waitFor("ask shiro", 5*time.Second)
		for _, leftover := range []string{"esc to interrupt", "working..."} {
			if strings.Contains(s.scrollback(), leftover) {
				t.Errorf("%q was left on the screen:\n%s", leftover, s.scrollback())
			}
		}
		// The tool line fits one row: its summary is cut, its outcome shown.
		found := false
		for _, row := range strings.Split(scr, "\n") {
			if strings.Contains(row, "bash(sleep 600") {
				found = true
				if !strings.Contains(row, "interrupted") {
					t.Errorf("the tool line does not fit its row: %q", row)
				}
			}
		}
		if !found {
			t.Errorf("no tool line:\n%s", scr)
		}
		s.quit()
	})
}

func TestTUIApprovalShowsAllThreeChoices(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		ws := t.TempDir()
		var content strings.Builder
		for i := 1; i <= 49; i++ {
			fmt.Fprintf(&content, "line %d\\n", i)
		}
		srv := fakemodel.New(t,
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w1", Name: "write_file", Input: `{"path":"long.txt","content":"` + content.String() + `"}`}}},
			fakemodel.Reply{Text: "Not written."},
		)
		s := startTUIAt(t, ws, srv, w, h, false)
		s.keys("write a long file", true)
		scr := s.waitFor("write_file wants to run", 20*time.Second)
		scr = s.waitFor("| n deny", 5*time.Second)
		for _, want := range []string{"Yes, allow once", "Always allow write_file", "No, deny", "long.txt (new file) +49 -0", "line 1"} {
			if !strings.Contains(scr, want) {
				t.Errorf("the approval lacks %q:\n%s", want, scr)
			}
		}
		// The whole diff can be read before answering.
		for i := 0; !strings.Contains(s.screen(), "line 49"); i++ {
			if i > 20 {
				t.Fatalf("the end of the diff is out of reach:\n%s", s.screen())
			}
			s.press("PageDown")
			time.Sleep(typingPause)
		}
		scr = s.screen()
		for _, want := range []string{"Yes, allow once", "No, deny"} {
			if !strings.Contains(scr, want) {
				t.Errorf("after scrolling, the approval lacks %q:\n%s", want, scr)
			}
		}
		s.keys("n", false)
		s.waitFor("Not written.", 20*time.Second)
		s.quit()
	})
}

func TestTUIHelpShowsItsTitleAndScrolls(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		ws := t.TempDir()
		srv := fakemodel.New(t)
		s := startTUIAt(t, ws, srv, w, h, false)
		s.keys("/help", true)
		scr := s.waitFor("esc to dismiss", 10*time.Second)
		for _, want := range []string{"help", "/help", "/model"} {
			if !strings.Contains(scr, want) {
				t.Errorf("/help lacks %q at its top:\n%s", want, scr)
			}
		}
		for i := 0; !strings.Contains(s.screen(), "ctrl-c"); i++ {
			if i > 30 {
				t.Fatalf("the end of /help is out of reach:\n%s", s.screen())
			}
			s.press("PageDown")
			time.Sleep(typingPause)
		}
		if scr := s.screen(); !strings.Contains(scr, "esc to dismiss") {
			t.Errorf("scrolling lost the title:\n%s", scr)
		}
		s.press("Escape")
		s.waitGone("esc to dismiss", 5*time.Second)
		s.quit()
	})
}

func TestTUIResizeDuringAStreamDuplicatesNothing(t *testing.T) {
	t.Parallel()
	eachSize(t, func(t *testing.T, w, h int) {
		ws := t.TempDir()
		stall := make(chan struct{})
		// One long paragraph: it stays in the live area, wider than the
		// terminal it is shrunk to, until the stall ends.
		story := "Once upon a time there was a terminal that was resized in the middle of a story, " +
			"while the story was still being written, and every line of it stayed where it was, " +
			"neither lost nor repeated, however narrow or wide the window became. The end came last."
		srv := fakemodel.New(t, fakemodel.Reply{Text: story, Chunks: 4, Stall: stall})
		s := startTUIAt(t, ws, srv, w, h, false)
		s.keys("tell me a story", true)
		s.waitFor("came last", 20*time.Second)
		// drawnAt waits until shiro has laid the live reply out for width
		// cols: its first row ends with a whole word (a row the terminal
		// rewrapped ends where the width does).
		drawnAt := func(cols int) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for {
				for _, row := range strings.Split(s.screen(), "\n") {
					row = strings.TrimRight(row, " ")
					if strings.HasPrefix(row, "Once upon a time") && len(row) <= cols && len(row) > cols-20 && story[len(row)] == ' ' {
						return
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("the reply was never laid out for %d columns:\n%s", cols, s.screen())
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		drawnAt(w)
		// Grow, then shrink back, while the reply is still live.
		other := map[int][2]int{80: {60, 20}, 60: {100, 30}}[w]
		s.run("resize-window", "-t", s.name, "-x", fmt.Sprint(other[0]), "-y", fmt.Sprint(other[1]))
		drawnAt(other[0])
		s.run("resize-window", "-t", s.name, "-x", fmt.Sprint(w), "-y", fmt.Sprint(h))
		drawnAt(w)
		close(stall)
		s.waitGone("esc to interrupt", 20*time.Second)
		s.waitFor("ask shiro", 5*time.Second)
		all := s.scrollback()
		for what, want := range map[string]int{
			"> tell me a story": 1,
			"Once upon a time":  1,
			"came last":         1,
			"ask shiro":         1,
			"esc to interrupt":  0,
		} {
			if got := strings.Count(all, what); got != want {
				t.Errorf("%q appears %d times, want %d:\n%s", what, got, want, all)
			}
		}
		// The status bar is one row and it is the last.
		lines := strings.Split(strings.TrimRight(s.screen(), "\n"), "\n")
		if last := lines[len(lines)-1]; !strings.Contains(last, "no sandbox") {
			t.Errorf("the last row is not the whole status bar: %q", last)
		}
		s.quit()
	})
}
