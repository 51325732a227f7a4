package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/internal/dirstate"
)

// The host-write suite replays, as a normal user, the attacks that made
// shiro's own writers on the host (the file tools, undo) write into the
// host's real git directory: an edit of .git/config, a hook written
// through a symlink to .git, a hook put back by an undo through such a
// symlink. After each, the host runs git as a user does; nothing may run
// (the marker directory stays empty) and nothing may appear or change in
// the host's .git but what git itself writes.

// gitOwnFiles are the entries of a git directory that the host's own git
// commands (status, diff, log, commit, checkout -B, submodule status)
// write: they may change between two listings.
func gitOwnFile(rel string) bool {
	switch rel {
	case "index", "index.lock", "HEAD", "ORIG_HEAD", "COMMIT_EDITMSG", "FETCH_HEAD", "logs", "objects", "refs", "refs/heads":
		return true
	}
	for _, dir := range []string{"logs/", "objects/", "refs/heads/"} {
		if strings.HasPrefix(rel, dir) {
			return true
		}
	}
	return false
}

// gitListing describes the host's .git of ws, leaving out what git itself
// changes.
func gitListing(t *testing.T, ws string) map[string]string {
	t.Helper()
	all, err := dirstate.Describe(filepath.Join(ws, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	for k := range all {
		if gitOwnFile(k) {
			delete(all, k)
		}
	}
	return all
}

// sameGit fails when anything but git's own files appeared, changed or
// went in the host's .git.
func sameGit(t *testing.T, before, after map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range after {
		if b, ok := before[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("appeared: %s = %q", k, v))
		} else if b != v {
			diffs = append(diffs, fmt.Sprintf("changed: %s = %q (was %q)", k, v, b))
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			diffs = append(diffs, "went: "+k)
		}
	}
	sort.Strings(diffs)
	for _, d := range diffs {
		t.Errorf("the host's .git: %s", d)
	}
}

// hookRepo is h.repo plus a pre-commit hook the user installed (as a hook
// manager does): executable, so a write that keeps its permission bits
// makes the host's next commit run the new content.
func (h *hostile) hookRepo(ws string) {
	h.t.Helper()
	h.repo(ws)
	hook := filepath.Join(ws, ".git", "hooks", "pre-commit")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Chown(hook, h.uid, h.gid); err != nil {
		h.t.Fatal(err)
	}
}

func toolCall(id, name string, input map[string]any) fakemodel.ToolCall {
	b, _ := json.Marshal(input)
	return fakemodel.ToolCall{ID: id, Name: name, Input: string(b)}
}

// modelGot fails unless the model was sent text as the result of call id.
func modelGot(t *testing.T, srv *fakemodel.Server, id, text string) {
	t.Helper()
	reqs := modelRequests(srv)
	for _, r := range reqs {
		if providers[0].paired(t, r.JSON(), id, text) {
			return
		}
	}
	var last string
	if len(reqs) > 0 {
		// The conversation, without the tools and the system prompt.
		msgs, _ := json.Marshal(reqs[len(reqs)-1].JSON()["messages"])
		last = string(msgs)
	}
	t.Errorf("the model was not sent %q for %s; the last request's messages:\n%s", text, id, last)
}

func TestHostileHostWriteFileTools(t *testing.T) {
	t.Parallel()
	h := newHostile(t)

	t.Run("edit_file of .git/config under --yolo", func(t *testing.T) {
		h := h.with(t)
		ws := h.workspace("edit-config")
		h.hookRepo(ws)
		before := gitListing(t, ws)
		srv := fakemodel.New(t,
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{toolCall("c1", "edit_file", map[string]any{
				"path": ".git/config", "oldString": "[core]", "newString": "[core]\n\tfsmonitor = " + h.plant("edit-config-fsmonitor"),
			})}},
			fakemodel.Reply{Text: "done"},
		)
		res := h.shiro(ws, providers[0].env(srv.URL), "-p", "--yolo", "tune the repository")
		if res.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
		}
		modelGot(t, srv, "c1", "Cannot write .git/config: it is inside the repository's git directory; shiro never writes git metadata on your machine")
		h.hostGit(ws)
		h.noMarker()
		sameGit(t, before, gitListing(t, ws))
	})

	t.Run("a symlink to .git made by a command, then write_file and edit_file through it", func(t *testing.T) {
		h := h.with(t)
		ws := h.workspace("disguised")
		h.hookRepo(ws)
		before := gitListing(t, ws)
		srv := fakemodel.New(t,
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{toolCall("c1", "bash", map[string]any{"command": "ln -s .git d && echo linked"})}},
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{toolCall("c2", "write_file", map[string]any{
				"path": "d/hooks/pre-commit", "content": "#!/bin/sh\n" + h.plant("disguised-hook") + "\n",
			})}},
			fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{toolCall("c3", "edit_file", map[string]any{
				"path": "d/config", "oldString": "[core]", "newString": "[core]\n\tfsmonitor = " + h.plant("disguised-fsmonitor"),
			})}},
			fakemodel.Reply{Text: "done"},
		)
		res := h.shiro(ws, providers[0].env(srv.URL), "-p", "--yolo", "set things up")
		if res.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
		}
		modelGot(t, srv, "c1", "linked")
		modelGot(t, srv, "c2", "Cannot write d/hooks/pre-commit: d is a symlink; shiro writes only through real directories")
		modelGot(t, srv, "c3", "Cannot write d/config: d is a symlink; shiro writes only through real directories")
		h.hostGit(ws)
		h.noMarker()
		sameGit(t, before, gitListing(t, ws))
	})
}

func TestHostileHostWriteShiroTool(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("tool")
	h.hookRepo(ws)
	before := gitListing(t, ws)
	hook := func(path, marker string) string {
		b, _ := json.Marshal(map[string]string{"path": path, "content": "#!/bin/sh\n" + h.plant(marker) + "\n"})
		return string(b)
	}

	res := h.shiro(ws, nil, "tool", "write_file", hook(".git/hooks/pre-commit", "tool-hook"))
	if res.code != 1 {
		t.Errorf("shiro tool write_file .git/hooks/pre-commit: exit %d, want 1\n%s%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "what shiro printed", res.stdout, "Cannot write .git/hooks/pre-commit: it is inside the repository's git directory; shiro never writes git metadata on your machine")
	h.hostGit(ws)
	h.noMarker()
	sameGit(t, before, gitListing(t, ws))

	h.bash(ws, "ln -s .git d && echo linked", nil, nil)
	res = h.shiro(ws, nil, "tool", "write_file", hook("d/hooks/pre-commit", "tool-link-hook"))
	if res.code != 1 {
		t.Errorf("shiro tool write_file d/hooks/pre-commit: exit %d, want 1\n%s%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "what shiro printed", res.stdout, "Cannot write d/hooks/pre-commit: d is a symlink; shiro writes only through real directories")
	h.hostGit(ws)
	h.noMarker()
	sameGit(t, before, gitListing(t, ws))
}

// Route 5: the hostile repository tracks d/hooks/pre-commit; a turn moves
// d away, puts a symlink to .git in its place and has the walker ignore
// it. Undoing the turn used to put the hook back into the host's
// .git/hooks.
func TestHostileHostWriteUndoThroughASymlink(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("undo")
	h.repo(ws)
	hook := filepath.Join(ws, "d", "hooks", "pre-commit")
	if err := os.MkdirAll(filepath.Dir(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n"+h.plant("undo-hook")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(ws, "d"), filepath.Dir(hook), hook} {
		os.Chown(p, h.uid, h.gid)
	}
	h.git(ws, "add", "d")
	h.git(ws, "commit", "-q", "-m", "a hook of the repository's own")
	before := gitListing(t, ws)

	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{toolCall("c1", "bash", map[string]any{
			"command": "mv d /tmp && ln -s .git d && echo /d >> .gitignore && echo swapped",
		})}},
		fakemodel.Reply{Text: "done"},
	)
	env := providers[0].env(srv.URL)
	res := h.shiro(ws, env, "-p", "--yolo", "tidy up")
	if res.code != 0 {
		t.Fatalf("turn: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	modelGot(t, srv, "c1", "swapped")
	if target, err := os.Readlink(filepath.Join(ws, "d")); err != nil || target != ".git" {
		t.Fatalf("the turn did not leave d -> .git: %q, %v", target, err)
	}

	res = h.shiro(ws, env, "undo", "--yes")
	if res.code == 0 {
		t.Errorf("undo succeeded through d -> .git\nstdout: %s\nstderr: %s", res.stdout, res.stderr)
	}
	mustContain(t, "what shiro undo printed", res.stderr, "nothing was changed", "d/hooks/pre-commit: d is a symlink; shiro writes only through real directories")
	h.hostGit(ws)
	h.noMarker()
	sameGit(t, before, gitListing(t, ws))
	// Nothing else was lost: the workspace is as the turn left it.
	if b, err := os.ReadFile(filepath.Join(ws, ".gitignore")); err != nil || string(b) != "/d\n" {
		t.Errorf(".gitignore after the refused undo: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "README")); err != nil || string(b) != "hello\n" {
		t.Errorf("README after the refused undo: %q, %v", b, err)
	}
}
