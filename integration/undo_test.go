package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/internal/dirstate"
)

// wsState describes a workspace: path -> mode and content (a symlink's
// target), directories as "dir".
func wsState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out, err := dirstate.Describe(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// undoWorkspace is the workspace the undo tests start from.
func undoWorkspace(t *testing.T, ws string) {
	t.Helper()
	files := map[string]string{"a.txt": "alpha\n", "b.txt": "beta\n", "c.txt": "gamma\n", "src/x.go": "package x\n", "src/deep/y.go": "package y\n", "run.sh": "#!/bin/sh\n"}
	for name, content := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range []error{
		os.Chmod(filepath.Join(ws, "run.sh"), 0o755),
		os.Symlink("a.txt", filepath.Join(ws, "link")),
		os.Symlink("x.go", filepath.Join(ws, "src", "xlink")),
		os.Symlink("src", filepath.Join(ws, "srclink")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// editTurn is the model's side of a turn that edits two files with file
// tools and changes more through bash.
func editTurn() []fakemodel.Reply {
	return []fakemodel.Reply{
		{ToolCalls: []fakemodel.ToolCall{
			{ID: "call_edit_1", Name: "edit_file", Input: `{"path":"a.txt","oldString":"alpha","newString":"ALPHA"}`},
			{ID: "call_write_2", Name: "write_file", Input: `{"path":"b.txt","content":"BETA\n"}`},
		}},
		{ToolCalls: []fakemodel.ToolCall{{ID: "call_bash_3", Name: "bash", Input: bashJSON("rm src/x.go src/xlink src/deep/y.go && rmdir src/deep src && touch new && chmod +x c.txt", 0)}}},
		{Text: "Edited."},
	}
}

func TestUndoPutsTheWorkspaceBackHeadless(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	undoWorkspace(t, ws)
	before := wsState(t, ws)

	replies := append([]fakemodel.Reply{{Text: "first answer"}}, editTurn()...)
	replies = append(replies, fakemodel.Reply{Text: "after the undo"})
	srv := fakemodel.New(t, replies...)
	env := headlessEnv(t, providers[0], srv.URL)

	if res := shiro(t, ws, env, "-p", "the first prompt"); res.code != 0 {
		t.Fatalf("first turn: exit %d: %s", res.code, res.stderr)
	}
	res := shiro(t, ws, env, "-c", "-p", "--yolo", "edit the files please")
	if res.code != 0 {
		t.Fatalf("edit turn: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	during := wsState(t, ws)
	if during["a.txt"] != "-rw-r--r-- ALPHA\n" || during["c.txt"] != "-rwxr-xr-x gamma\n" || during["new"] == "" || during["src/x.go"] != "" {
		t.Fatalf("the turn did not change the workspace as scripted: %v\nstderr: %s", during, res.stderr)
	}

	// The listing names the turn's changes and what made them.
	res = shiro(t, ws, env, "undo", "--list", "--json")
	if res.code != 0 {
		t.Fatalf("undo --list: exit %d: %s", res.code, res.stderr)
	}
	var listing struct {
		Turns []struct {
			Turn    int    `json:"turn"`
			Prompt  string `json:"prompt"`
			Changes []struct {
				Path   string   `json:"path"`
				Action string   `json:"action"`
				Tools  []string `json:"tools"`
			} `json:"changes"`
		} `json:"turns"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &listing); err != nil {
		t.Fatalf("undo --list --json: %v\n%s", err, res.stdout)
	}
	if n := len(listing.Turns); n != 2 || listing.Turns[1].Prompt != "edit the files please" {
		t.Fatalf("listing: %s", res.stdout)
	}
	by := map[string]string{}
	for _, c := range listing.Turns[1].Changes {
		by[c.Path] = c.Action + " " + strings.Join(c.Tools, ",")
	}
	for path, want := range map[string]string{"a.txt": "modified edit_file", "b.txt": "modified write_file", "c.txt": "modified bash", "new": "created bash", "src/x.go": "deleted bash", "src/xlink": "deleted bash"} {
		if by[path] != want {
			t.Errorf("listing says %s: %q, want %q", path, by[path], want)
		}
	}

	res = shiro(t, ws, env, "undo")
	if res.code != 0 {
		t.Fatalf("undo: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	after := wsState(t, ws)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %q after undo, want %q", k, after[k], v)
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s (%q) is left after undo", k, v)
		}
	}

	// The next request no longer holds the undone turn.
	if res := shiro(t, ws, env, "-c", "-p", "what now?"); res.code != 0 {
		t.Fatalf("next turn: exit %d: %s", res.code, res.stderr)
	}
	reqs := modelRequests(srv)
	body := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(body, "the first prompt") || !strings.Contains(body, "what now?") {
		t.Errorf("the next request lacks the turns that stay: %s", body)
	}
	for _, gone := range []string{"edit the files please", "call_edit_1", "call_bash_3", "Edited."} {
		if strings.Contains(body, gone) {
			t.Errorf("the next request still holds %q of the undone turn", gone)
		}
	}
}

func TestUndoLeavesTheUsersChangesUnlessAsked(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	undoWorkspace(t, ws)
	srv := fakemodel.New(t, editTurn()...)
	env := headlessEnv(t, providers[0], srv.URL)
	if res := shiro(t, ws, env, "-p", "--yolo", "--no-sandbox", "edit the files please"); res.code != 0 {
		t.Fatalf("edit turn: exit %d: %s", res.code, res.stderr)
	}
	// The user edits a file the turn changed, after the turn.
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("the user's words\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := shiro(t, ws, env, "undo")
	if res.code != 0 {
		t.Fatalf("undo: exit %d: %s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "These files changed after the turn ended:\n  a.txt\n") || !strings.Contains(res.stderr, "left as they are") {
		t.Errorf("undo did not name the user's file: %s", res.stderr)
	}
	got := wsState(t, ws)
	if got["a.txt"] != "-rw-r--r-- the user's words\n" {
		t.Errorf("the user's file was overwritten: %q", got["a.txt"])
	}
	if got["b.txt"] != "-rw-r--r-- beta\n" || got["src/x.go"] != "-rw-r--r-- package x\n" || got["new"] != "" {
		t.Errorf("the rest was not undone: %v", got)
	}
}

func TestTUIUndoAndDiff(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	undoWorkspace(t, ws)
	before := wsState(t, ws)
	srv := fakemodel.New(t, append(editTurn(), fakemodel.Reply{Text: "after the undo"})...)
	s := startTUI(t, ws, srv, "--yolo")
	s.keys("edit the files please", true)
	s.waitFor("Edited.", 60*time.Second)

	// The user changes a file the turn changed.
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("the user's words\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	s.keys("/diff", true)
	s.waitFor("changes of this session", 20*time.Second)
	s.waitFor("deleted src/x.go (bash)", 5*time.Second)
	s.waitFor("+BETA", 5*time.Second)
	s.dismiss("changes of this session")

	s.keys("/undo", true)
	s.waitFor("Undo turn 1 (", 20*time.Second)
	scr := s.screen()
	for _, want := range []string{"created new (by bash)", "modified b.txt (by write_file)", "modified a.txt (by edit_file; changed since the turn)", "deleted src/xlink (by bash)", "not packages installed in the container"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the undo preview lacks %q:\n%s", want, scr)
		}
	}
	// The form takes answers once the typing that opened it has paused.
	s.waitFor("enter choose", 5*time.Second)
	s.press("Enter") // Undo
	s.waitFor("These files changed after the turn ended: a.txt", 10*time.Second)
	s.waitFor("enter choose", 5*time.Second)
	s.press("Down", "Enter") // Overwrite them too
	s.waitFor("undone:", 20*time.Second)
	s.waitFor("the conversation is back to before", 5*time.Second)

	after := wsState(t, ws)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %q after /undo, want %q", k, after[k], v)
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s (%q) is left after /undo", k, v)
		}
	}

	s.keys("what now?", true)
	s.waitFor("after the undo", 30*time.Second)
	reqs := modelRequests(srv)
	body := string(reqs[len(reqs)-1].Body)
	for _, gone := range []string{"edit the files please", "call_edit_1", "Edited."} {
		if strings.Contains(body, gone) {
			t.Errorf("the request after /undo still holds %q", gone)
		}
	}
	s.quit()
}
