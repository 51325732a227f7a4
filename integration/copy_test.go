package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// copyWorkspace writes the files copy mode's tests start from, as the
// user's, in a git repository with one commit.
func copyWorkspace(h *hostile, ws string) {
	h.t.Helper()
	for name, content := range map[string]string{
		"a.txt": "alpha\n", "b.txt": "beta\n", "c.txt": "gamma\n", "run.sh": "#!/bin/sh\necho run\n",
		"src/x.go": "package x\n", ".gitignore": "build/\n",
	} {
		h.writeOwned(filepath.Join(ws, name), content, 0o644)
	}
	h.git(ws, "init", "-q", "-b", "main")
	h.git(ws, "add", "-A")
	h.git(ws, "commit", "-q", "-m", "start")
}

// tree is a directory's files with their modes, .git left out.
func (h *hostile) tree(dir string) map[string]string {
	h.t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		data, _ := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = fi.Mode().String() + " " + string(data)
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// noWorkspaceMount fails when a container of ws bind-mounts it.
func noWorkspaceMount(t *testing.T, api *client.Client, ws string) {
	t.Helper()
	id := onlyContainer(t, api, ws)
	in, err := api.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range in.Container.Mounts {
		if m.Type == mount.TypeBind && (m.Source == ws || strings.HasPrefix(ws+"/", m.Source+"/")) {
			t.Errorf("the container bind-mounts the workspace: %+v", m)
		}
	}
}

// TestCopyModeHeadless: a headless session in copy mode edits files and
// runs commands on the sandbox's copy only; the user's edit between turns
// reaches the copy; --apply lands exactly the sandbox's changes; the
// repository on the host is never touched by the sandbox.
func TestCopyModeHeadless(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("ws")
	copyWorkspace(h, ws)
	before := h.tree(ws)
	head := h.git(ws, "rev-parse", "HEAD")

	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w1", Name: "write_file", Input: `{"path":"a.txt","content":"ALPHA\n"}`}}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "e1", Name: "edit_file", Input: `{"path":"b.txt","oldString":"beta","newString":"BETA"}`}}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON("rm c.txt && mkdir -p d && echo new > d/new.txt && chmod +x run.sh && git add -A && git commit -qm sandbox && mkdir -p build && echo o > build/out", 0)}}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "r1", Name: "read_file", Input: `{"path":"a.txt"}`}}},
		fakemodel.Reply{Text: "Changed them."},
	)
	env := providers[0].env(srv.URL)
	res := h.shiro(ws, env, "-p", "--yolo", "--workspace", "copy", "change things")
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if got := h.tree(ws); !sameTree(got, before) {
		t.Errorf("the workspace changed before any apply:\n got %v\nwant %v", got, before)
	}
	if got := h.git(ws, "rev-parse", "HEAD"); got != head {
		t.Errorf("the sandbox's commit reached the host's repository: HEAD %s, was %s", got, head)
	}
	if !strings.Contains(res.stderr, "[changes] 5 files changed: 1 created, 1 deleted, 3 modified in the sandbox's copy, not applied") {
		t.Errorf("the run does not say what waits to be applied:\n%s", res.stderr)
	}
	// The file tools saw the copy: read_file returned the sandbox's write.
	if reqs := srv.Requests(); len(reqs) < 5 || !providers[0].paired(t, reqs[4].JSON(), "r1", "1: ALPHA") {
		t.Errorf("read_file did not read the sandbox's copy")
	}
	noWorkspaceMount(t, h.api, ws)

	// The user edits a file between turns; the next turn sees it in the
	// sandbox; then everything is applied.
	h.secondCopyRun(srv, ws, env, []string{"--workspace", "copy"}, head, map[string]string{
		"a.txt":      "-rw-r--r-- ALPHA\n",
		"b.txt":      "-rw-r--r-- BETA\n",
		"run.sh":     "-rwxr-xr-x #!/bin/sh\necho run\n",
		"d/new.txt":  "-rw-r--r-- new\n",
		"src/x.go":   "-rw-r--r-- package x // the user's\n",
		".gitignore": "-rw-r--r-- build/\n",
	}, "[applied] 5 files changed: 1 created, 1 deleted, 3 modified")
}

// secondCopyRun edits src/x.go as the user, runs a turn that reads it in
// the sandbox with --apply (flags choose the sandbox), and checks that the
// edit reached the sandbox, that the workspace holds want and the user's
// files only, that stat was printed, and that the host's repository is
// still at head and runs nothing of the sandbox's.
func (h *hostile) secondCopyRun(srv *fakemodel.Server, ws string, env, flags []string, head string, want map[string]string, stat string) {
	t := h.t
	t.Helper()
	h.writeOwned(filepath.Join(ws, "src/x.go"), "package x // the user's\n", 0o644)
	srv.Push(
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "c2", Name: "bash", Input: bashJSON("cat src/x.go", 0)}}},
		fakemodel.Reply{Text: "Seen."},
	)
	res := h.shiro(ws, env, append(append([]string{"-c", "-p", "--yolo", "--apply"}, flags...), "look at x.go")...)
	if res.code != 0 {
		t.Fatalf("second run: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	reqs := srv.Requests()
	if last := reqs[len(reqs)-1]; !providers[0].paired(t, last.JSON(), "c2", "the user's") {
		t.Errorf("the user's edit did not reach the sandbox: the model was sent %s\nstderr: %s", last.Body, res.stderr)
	}
	if got := h.tree(ws); !sameTree(got, want) {
		t.Errorf("after --apply the workspace holds\n %v\nwant\n %v\nstderr: %s", got, want, res.stderr)
	}
	if !strings.Contains(res.stderr, stat) {
		t.Errorf("the apply's diff stat (%q) is missing:\n%s", stat, res.stderr)
	}
	h.ownedByUser(ws)
	if got := h.git(ws, "rev-parse", "HEAD"); got != head {
		t.Errorf("the apply moved the host's HEAD: %s", got)
	}
	h.hostGit(ws)
	h.noMarker()
}

func sameTree(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// ownedByUser fails for each file under dir that is not the user's.
func (h *hostile) ownedByUser(dir string) {
	h.t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != h.uid {
			h.t.Errorf("%s belongs to uid %d, not the user's %d", p, st.Uid, h.uid)
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// TestCopyModeTUIChangesAndApply: in the chat UI, /changes shows the
// sandbox's diff, /apply asks and lands it, /undo takes the apply back.
func TestCopyModeTUIChangesAndApply(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	for name, content := range map[string]string{"a.txt": "alpha\n", "keep.txt": "keep\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "w1", Name: "write_file", Input: `{"path":"a.txt","content":"ALPHA\n"}`}}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON("echo made > made.txt", 0)}}},
		fakemodel.Reply{Text: "Edited the copy."},
	)
	s := startTUI(t, ws, srv, "--yolo", "--workspace", "copy")
	s.waitFor("workspace: a copy in the sandbox", 10*time.Second)
	s.keys("change a.txt", true)
	s.waitFor("Edited the copy.", 60*time.Second)
	if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(data) != "alpha\n" {
		t.Fatalf("the turn wrote the workspace: %q", data)
	}

	s.keys("/changes", true)
	s.waitFor("the sandbox's changes: 2 files changed: 1 created, 1 modified", 30*time.Second)
	s.waitFor("+ALPHA", 5*time.Second)
	s.waitFor("created made.txt", 5*time.Second)
	s.dismiss("the sandbox's changes:")

	s.keys("/apply", true)
	s.waitFor("Apply 2 file(s) to", 30*time.Second)
	s.waitFor("enter choose", 5*time.Second)
	s.press("Enter") // Apply
	s.waitFor("applied: 2 files changed", 30*time.Second)
	for name, want := range map[string]string{"a.txt": "ALPHA\n", "made.txt": "made\n", "keep.txt": "keep\n"} {
		if data, _ := os.ReadFile(filepath.Join(ws, name)); string(data) != want {
			t.Errorf("%s = %q after /apply, want %q", name, data, want)
		}
	}

	// /undo takes the apply back; the sandbox keeps its version, so the
	// change waits to be applied again.
	s.keys("/undo", true)
	s.waitFor("Undo turn 2 (", 20*time.Second)
	s.waitFor("enter choose", 5*time.Second)
	s.press("Enter")
	s.waitFor("undone:", 20*time.Second)
	if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(data) != "alpha\n" {
		t.Errorf("a.txt = %q after undoing the apply", data)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); !os.IsNotExist(err) {
		t.Errorf("made.txt is still there after undoing the apply: %v", err)
	}
	s.keys("/changes", true)
	s.waitFor("the sandbox's changes: 2 files changed", 30*time.Second)
	s.quit()
}
