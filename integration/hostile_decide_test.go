package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

// The routes of this file went through what the host trusted in the
// container when it decided: a helper process a command could trace or
// whose descriptors it could open (PID 1, the forwarder, the shell that
// waited for the next command's script), a scanner that skipped what it
// could not read, a protected repository known by its path, and a final
// scan that a process outliving the session could wait out.

var (
	ptracerOnce sync.Once
	ptracerBin  string
	ptracerErr  error
)

// ptracer builds the in-sandbox attacker (integration/internal/ptracer)
// once, static, and copies it into ws for the sandbox to run.
func (h *hostile) ptracer(ws string) string {
	h.t.Helper()
	ptracerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shiro-ptracer-")
		if err != nil {
			ptracerErr = err
			return
		}
		ptracerBin = filepath.Join(dir, "ptracer")
		cmd := exec.Command("go", "build", "-o", ptracerBin, "./internal/ptracer")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			ptracerErr = fmt.Errorf("build ptracer: %v\n%s", err, out)
		}
	})
	if ptracerErr != nil {
		h.t.Fatal(ptracerErr)
	}
	dst := filepath.Join(ws, "ptracer")
	copyFile(h.t, ptracerBin, dst, 0o755)
	if err := os.Chown(dst, h.uid, h.gid); err != nil {
		h.t.Fatal(err)
	}
	return dst
}

// headless runs one headless turn as the user with the fake model
// answering replies, --yolo, and returns the result and the requests the
// model received.
func (h *hostile) headless(ws string, replies ...fakemodel.Reply) (result, []fakemodel.Request) {
	h.t.Helper()
	srv := fakemodel.New(h.t, replies...)
	home := h.dir("shiro-home-"+filepath.Base(ws), 0o700)
	env := append([]string{"SHIRO_HOME=" + home, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "SHIRO_API_KEY=", "SHIRO_MODEL=", "SHIRO_OPENAI_API="}, providers[0].env(srv.URL)...)
	res := h.shiro(ws, env, "-p", "--yolo", "go")
	return res, srv.Requests()
}

// resultOf is the text of tool call id's result as the model got it.
func resultOf(t *testing.T, reqs []fakemodel.Request, id string) string {
	t.Helper()
	for _, r := range reqs {
		content, _, found := toolResult(r.JSON(), id)
		if !found {
			continue
		}
		// The content is a string or a list of text blocks.
		var blocks []struct{ Text string }
		if json.Unmarshal([]byte(content), &blocks) == nil {
			var b strings.Builder
			for _, x := range blocks {
				b.WriteString(x.Text)
			}
			return b.String()
		}
		return content
	}
	t.Fatalf("no result of %s reached the model", id)
	return ""
}

func bashCall(id, command string) fakemodel.ToolCall {
	return fakemodel.ToolCall{ID: id, Name: "bash", Input: bashJSON(command, 0)}
}

// Route 2 and 6: PID 1, the channel's serve, the forwarder and the reapers
// (the process that waits for the next command) are shiro's: a command of
// the sandbox's user can neither trace them nor open their descriptors,
// environment or memory; and a background process of one command cannot
// write into what the next command runs: its output is its own.
func TestHostileHelperProcessesAreOutOfReach(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("helpers")
	h.repo(ws)
	p := h.ptracer(ws)
	res, reqs := h.headless(ws,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{bashCall("call_bg", fmt.Sprintf("(%s hijack 6s /tmp/hijack.log >/dev/null 2>&1 &); sleep 0.2; echo started", p))}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{bashCall("call_next", "sleep 1; echo mine")}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{bashCall("call_probe", p+" probe; echo ---; cat /tmp/hijack.log")}},
		fakemodel.Reply{Text: "done"},
	)
	if res.code != 0 {
		t.Fatalf("exit %d\nstderr: %s", res.code, res.stderr)
	}
	next := resultOf(t, reqs, "call_next")
	if strings.Contains(next, "HIJACKED") || !strings.Contains(next, "mine") {
		t.Errorf("the next command's result is not its own:\n%s", next)
	}
	probe := resultOf(t, reqs, "call_probe")
	report, log, _ := strings.Cut(probe, "---")
	if strings.Contains(log, "wrote into fd3") {
		t.Errorf("a background process wrote into another process's script:\n%s", log)
	}
	roles := map[string]bool{}
	for _, line := range strings.Split(report, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[2], "attach=") {
			continue
		}
		pid, role := f[0], f[1]
		roles[role] = true
		for _, probe := range f[2:] {
			if strings.HasSuffix(probe, "=ok") || strings.Contains(probe, "=ok:") {
				t.Errorf("the command reached helper %s (pid %s): %s", role, pid, line)
			}
		}
		if pid == "1" {
			roles["pid1"] = true
		}
	}
	for _, want := range []string{"pid1", "init", "serve", "forward", "reap"} {
		if !roles[want] {
			t.Errorf("the probe saw no %s process:\n%s", want, report)
		}
	}
	h.hostGit(ws)
	h.noMarker()
}

// Route 2's end: a process that outlived its session (it had taken over a
// helper process, so neither serve nor init killed it) waited until the
// last session's final scan and then made a repository git on the host
// would use. Here the escaped process is played by an exec of the test's
// own, which init counts as a session and so never kills: it waits for
// the session to end, then plants. The last session's end freezes the
// container and kills everything but init before its scan.
func TestHostileNothingOutlivesTheLastScan(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("outlive")
	h.repo(ws)
	h.bash(ws, "true", nil, nil) // the container
	id := onlyContainer(t, h.api, ws)
	rogue := fmt.Sprintf(`while [ ! -e %[1]s/.start ]; do sleep 0.01; done
while pgrep -f 'helper [s]erve' >/dev/null; do sleep 0.01; done
sleep 0.4
git init -q %[1]s/late && git -C %[1]s/late config core.fsmonitor %[2]q && echo planted > %[1]s/late/planted`, ws, h.plant("outlived-fsmonitor"))
	ctx := t.Context()
	ex, err := h.api.ExecCreate(ctx, id, client.ExecCreateOptions{User: fmt.Sprintf("%d:%d", h.uid, h.gid), Cmd: []string{"sh", "-c", rogue}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.api.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		t.Fatal(err)
	}
	h.bash(ws, "touch .start && sleep 0.3 && echo ran", []string{ws}, nil)
	// The rogue has ended by now, killed or done with what it planted.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		in, err := h.api.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !in.Running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rogue process still runs 30 s after the session")
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "late", "planted")); err == nil {
		t.Error("a process outlived the last session's scan and made a repository")
	}
	h.hostGit(ws)
	h.hostGit(filepath.Join(ws, "late"))
	h.noMarker()
	procs := top(t, h.api, id)
	if len(procs) != 1 || !strings.Contains(procs[0], "helper init") {
		t.Errorf("after the last session the container runs more than its init:\n%s", strings.Join(procs, "\n"))
	}
	// The container is thawed and works for the next session.
	res := h.bash(ws, "echo again", nil, nil)
	mustContain(t, "the next session", res.stdout, "again")
	if st := inspectState(t, h.api, id); st.Paused {
		t.Error("the container was left paused")
	}
}

func inspectState(t *testing.T, api *client.Client, id string) *container.State {
	t.Helper()
	info, err := api.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil || info.Container.State == nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return info.Container.State
}

// Route 3: a directory the scanner could not read (chmod 0300) hid a
// repository below it, and a gitlink in the sandbox's index made git on
// the host go into it. The scanner now makes the directory readable and
// moves the repository; the index with a gitlink the host did not have
// stays in the sandbox.
func TestHostileUnreadableDirectoryHidesNothing(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("unreadable")
	h.repo(ws)
	res := h.bash(ws, fmt.Sprintf(`set -e
git init -q a/b && git -C a/b config core.fsmonitor %q && git -C a/b -c user.email=a@b -c user.name=a commit -q --allow-empty -m x
git update-index --add --cacheinfo 160000,$(git -C a/b rev-parse HEAD),a/b
chmod 0300 a
echo planted`, h.plant("unreadable-fsmonitor")), []string{ws}, []string{ws})
	mustContain(t, "the result", res.stdout, "planted", "a/ was not readable (mode 0300)", "submodule path a/b", "the sandbox made a/b/ a git repository")
	if out := h.git(ws, "ls-files", "--stage", "a/b"); out != "" {
		t.Errorf("the host's index took the gitlink: %s", out)
	}
	os.Chmod(filepath.Join(ws, "a"), 0o755)
	h.hostGit(filepath.Join(ws, "a", "b"))
	h.noMarker()
}

// Route 4: a submodule's gitfile is protected by a read-only mount, which
// moved with its renamed directory; a repository made at the old path was
// taken for the protected one, and git on the host, in the superproject,
// went into it. Every directory on the way to a protected repository is a
// mount point now (it can be neither renamed nor removed), a submodule not
// checked out is read-only, and protection is by identity besides.
func TestHostileProtectedRepositoryCannotBeReplaced(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	lib := h.workspace("ident-lib")
	h.repo(lib)
	ws := h.workspace("ident")
	h.repo(ws)
	for _, sub := range []string{"sub", "deep/er/sub", "unchecked"} {
		h.git(ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, sub)
	}
	h.git(ws, "commit", "-q", "-m", "add the submodules")
	h.git(ws, "submodule", "deinit", "-q", "unchecked") // a gitlink with an empty directory
	plant := func(name string) string { return fmt.Sprintf("%q", h.plant(name)) }
	res := h.bash(ws, fmt.Sprintf(`mv sub sub.orig 2>&1; mv deep deep.orig 2>&1; mv deep/er deep/er.orig 2>&1; rm -rf sub 2>&1
git init -q sub 2>&1; git -C sub config core.fsmonitor %s 2>&1
git init -q unchecked 2>&1; git -C unchecked config core.fsmonitor %s 2>&1
echo done`, plant("identity-fsmonitor"), plant("unchecked-fsmonitor")),
		[]string{ws}, []string{ws, filepath.Join(ws, "sub"), filepath.Join(ws, "deep/er/sub"), filepath.Join(ws, "unchecked")})
	mustContain(t, "the result", res.stdout, "done", "Device or resource busy", "Read-only file system")
	for _, moved := range []string{"sub.orig", "deep.orig", "deep/er.orig"} {
		if _, err := os.Lstat(filepath.Join(ws, moved)); err == nil {
			t.Errorf("%s was renamed on the host", moved)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sub", ".git")); err != nil || !strings.Contains(string(b), "modules/sub") {
		t.Errorf("the submodule's gitfile on the host: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "unchecked", ".git")); err == nil {
		t.Error("a repository was made in the submodule that is not checked out")
	}
	// A second session: the submodules are still the user's, and work.
	res = h.bash(ws, "git -C sub status --short && git -C deep/er/sub rev-parse --git-dir && echo ok", nil, []string{ws})
	mustContain(t, "the second session", res.stdout, "ok")
	if strings.Contains(res.stdout, "the sandbox made") {
		t.Errorf("a repository of the user's was taken for the sandbox's:\n%s", res.stdout)
	}
}
