package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// The hostile-repository suite replays, as a normal user, every attack a
// repository (or the model it steers) was seen to make on the host through
// the sandbox, and looks for the effect on the host: a marker directory
// that exists only on the host and that the planted commands write into.
// While each session runs, a loop on the host runs git in the workspace's
// repository as a user's prompt or editor would; after each session it runs
// git in every directory the attack touched. Nothing may ever appear in
// the marker directory.

// hostile is one attack's world: a normal user, its HOME, the shiro
// binary, a workspace and the host-only marker directory.
type hostile struct {
	t        *testing.T
	api      *client.Client
	uid, gid int
	groups   []uint32
	base     string
	bin      string
	home     string
	marker   string
}

func newHostile(t *testing.T) *hostile {
	t.Helper()
	testenv.RequireRoot(t)
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	u := ensureUser(t, "shirotest")
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	base, err := os.MkdirTemp("", "shiro-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &hostile{t: t, api: api, uid: uid, gid: gid, groups: dockerGroup(t), base: base}
	h.bin = hostileBinary(t)
	h.home = h.dir("home", 0o700)
	h.marker = h.dir("marker", 0o700)
	return h
}

var (
	hostileBinOnce sync.Once
	hostileBin     string
)

// hostileBinary copies the shiro binary once to where the normal user can
// run it (copied per test, a parallel test's fork could still hold it open
// for writing when another executes it: "text file busy").
func hostileBinary(t *testing.T) string {
	t.Helper()
	hostileBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shiro-hostile-bin-")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		hostileBin = filepath.Join(dir, "shiro")
		copyFile(t, testenv.Binary(t), hostileBin, 0o755)
	})
	if hostileBin == "" {
		t.Fatal("no shiro binary for the hostile tests")
	}
	return hostileBin
}

// with is h for a subtest (failures go to t).
func (h *hostile) with(t *testing.T) *hostile {
	c := *h
	c.t = t
	return &c
}

// dir makes a directory under base owned by the user.
func (h *hostile) dir(rel string, mode os.FileMode) string {
	h.t.Helper()
	p := filepath.Join(h.base, rel)
	if err := os.MkdirAll(p, mode); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Chown(p, h.uid, h.gid); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// workspace makes a workspace the user owns; its containers and volumes
// go when the test ends.
func (h *hostile) workspace(rel string) string {
	h.t.Helper()
	ws := h.dir(rel, 0o755)
	h.t.Cleanup(func() { testenv.RemoveContainers(h.t, h.api, ws) })
	return ws
}

// command runs name as the user in dir.
func (h *hostile) command(ctx context.Context, dir string, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + h.home, "DOCKER_HOST=" + os.Getenv("DOCKER_HOST"),
		"GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@host", "GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@host",
	}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(h.uid), Gid: uint32(h.gid), Groups: h.groups}}
	return cmd
}

// git runs git as the user and fails the test when it fails.
func (h *hostile) git(dir string, args ...string) string {
	h.t.Helper()
	out, err := h.command(h.t.Context(), dir, nil, "git", args...).CombinedOutput()
	if err != nil {
		h.t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// shiro runs the shiro binary as the user.
func (h *hostile) shiro(ws string, env []string, args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.t.Context(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := h.command(ctx, ws, env, h.bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("run shiro %v: %v", args, err)
	}
	return r
}

// bash runs one command through the sandbox while the host loop runs git
// status in during (the workspace's own repository, as a prompt would),
// then runs git once more in during and the whole set (hostGit) in each of
// after, and checks the marker directory.
func (h *hostile) bash(ws, command string, during, after []string) result {
	h.t.Helper()
	stop := h.gitLoop(during)
	res := h.shiro(ws, nil, "tool", "bash", bashJSON(command, 0))
	stop()
	for _, dir := range during {
		_ = h.command(h.t.Context(), dir, nil, "git", "status").Run()
	}
	for _, dir := range after {
		h.hostGit(dir)
	}
	h.noMarker()
	return res
}

// hostGit runs what a git-aware prompt, an editor and a user run in dir:
// status (fsmonitor), diff and log (drivers, pagers), a commit and a
// checkout (hooks). Failures are fine (dir may be no repository); code
// running is not.
func (h *hostile) hostGit(dir string) {
	ctx, cancel := context.WithTimeout(h.t.Context(), time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"status"}, {"diff", "HEAD"}, {"log", "-1", "-p"},
		{"commit", "-q", "--allow-empty", "-m", "host"},
		{"checkout", "-q", "-B", "host-branch"},
		{"submodule", "status", "--recursive"},
	} {
		_ = h.command(ctx, dir, []string{"GIT_PAGER=cat"}, "git", args...).Run()
	}
}

// gitLoop runs git status in dirs every 100 ms until stopped.
func (h *hostile) gitLoop(dirs []string) (stop func()) {
	if len(dirs) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(h.t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, dir := range dirs {
				_ = h.command(ctx, dir, nil, "git", "status").Run()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// noMarker fails the test when anything appeared in the marker directory.
func (h *hostile) noMarker() {
	h.t.Helper()
	entries, err := os.ReadDir(h.marker)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range entries {
		h.t.Errorf("a command the sandbox planted ran on the host: %s", e.Name())
	}
}

// repo makes a repository with one commit in ws, as the user.
func (h *hostile) repo(ws string) {
	h.t.Helper()
	h.git(ws, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(ws, "README"), []byte("hello\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
	os.Chown(filepath.Join(ws, "README"), h.uid, h.gid)
	h.git(ws, "add", "README")
	h.git(ws, "commit", "-q", "-m", "first")
}

// plant is the shell snippet that makes a command write name into the
// marker directory.
func (h *hostile) plant(name string) string { return "touch " + filepath.Join(h.marker, name) }

func TestHostileGitMetadata(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	q := strconv.Quote

	t.Run("commondir pointing at a planted config", func(t *testing.T) {
		h := h.with(t)
		ws := h.workspace("commondir")
		h.repo(ws)
		res := h.bash(ws, fmt.Sprintf(`mkdir -p evil && cp -r .git/objects .git/refs evil/ && printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = %s\n' > evil/config && echo "$PWD/evil" > .git/commondir && echo planted`,
			h.plant("commondir-fsmonitor")), []string{ws}, []string{ws, filepath.Join(ws, "evil")})
		mustContain(t, "the result", res.stdout, "planted", ".git/commondir; the change stays in the sandbox")
		if _, err := os.Stat(filepath.Join(ws, ".git", "commondir")); err == nil {
			t.Error("the commondir reached the host's .git")
		}
	})

	t.Run("a renamed and replaced .git", func(t *testing.T) {
		h := h.with(t)
		ws := h.workspace("renamed")
		h.repo(ws)
		res := h.bash(ws, fmt.Sprintf(`mv .git .git-old; cp -a .git .git-copy; cp -a .git-copy/. .git/ ; printf '#!/bin/sh\n%s\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; git config core.fsmonitor %s; echo done`,
			h.plant("renamed-hook"), q(h.plant("renamed-fsmonitor"))), []string{ws}, []string{ws, filepath.Join(ws, ".git-copy"), filepath.Join(ws, ".git-old")})
		mustContain(t, "the result", res.stdout, "Device or resource busy", "done")
		if _, err := os.Stat(filepath.Join(ws, ".git-old")); err == nil {
			t.Error(".git was renamed on the host")
		}
	})

	t.Run("a submodule's config, hooks and gitfile", func(t *testing.T) {
		h := h.with(t)
		lib := h.workspace("sub-origin")
		h.repo(lib)
		ws := h.workspace("submodule")
		h.repo(ws)
		h.git(ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
		h.git(ws, "commit", "-q", "-m", "add lib")
		res := h.bash(ws, fmt.Sprintf(`git config -f .git/modules/lib/config core.fsmonitor %s; printf '#!/bin/sh\n%s\n' > .git/modules/lib/hooks/post-checkout; chmod +x .git/modules/lib/hooks/post-checkout; git init -q evilgd; git -C evilgd config core.fsmonitor %s; echo "gitdir: ../evilgd/.git" > lib/.git; echo done`,
			q(h.plant("submodule-fsmonitor")), h.plant("submodule-hook"), q(h.plant("gitfile-fsmonitor"))),
			[]string{ws, filepath.Join(ws, "lib")}, []string{ws, filepath.Join(ws, "lib"), filepath.Join(ws, "evilgd")})
		mustContain(t, "the result", res.stdout, "done")
		b, _ := os.ReadFile(filepath.Join(ws, "lib", ".git"))
		if !strings.Contains(string(b), "modules/lib") {
			t.Errorf("the submodule's gitfile changed on the host: %q", b)
		}
	})

	t.Run("a linked worktree's common and own git directories", func(t *testing.T) {
		h := h.with(t)
		main := h.workspace("wt-main")
		h.repo(main)
		wt := h.dir("wt-linked", 0o755)
		h.git(main, "worktree", "add", "-q", wt, "-b", "linked")
		t.Cleanup(func() { testenv.RemoveContainers(t, h.api, wt) })
		common := filepath.Join(main, ".git")
		res := h.bash(wt, `echo x > x && git add x && git -c user.email=a@b -c user.name=a commit -qm "from the linked worktree" && echo committed`, []string{wt, main}, nil)
		mustContain(t, "the result", res.stdout, "committed")
		if got := h.git(main, "log", "--format=%s", "-1", "linked"); got != "from the linked worktree" {
			t.Errorf("the linked worktree's branch on the host: %q\n%s", got, res.stdout)
		}
		res = h.bash(wt, fmt.Sprintf(`git config core.fsmonitor %s; printf '#!/bin/sh\n%s\n' > %s/hooks/post-commit; chmod +x %s/hooks/post-commit; echo %s > %s/worktrees/wt-linked/commondir; echo "gitdir: %s" > .git; echo attacked`,
			q(h.plant("worktree-fsmonitor")), h.plant("worktree-hook"), common, common, filepath.Join(wt, "evil"), common, filepath.Join(wt, "evil")),
			[]string{wt, main}, []string{wt, main})
		mustContain(t, "the result", res.stdout, "Read-only file system", "attacked")
	})

	t.Run("git init where the workspace has no repository of its own", func(t *testing.T) {
		h := h.with(t)
		top := h.workspace("outer")
		h.repo(top)
		ws := h.dir("outer/sub", 0o755)
		t.Cleanup(func() { testenv.RemoveContainers(t, h.api, ws) })
		res := h.bash(ws, fmt.Sprintf(`git init -q . && git config core.fsmonitor %s && printf '#!/bin/sh\n%s\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo made; git -C .. status --short >/dev/null && echo "outer repository visible"`,
			q(h.plant("init-fsmonitor")), h.plant("init-hook")), []string{top}, []string{top, ws})
		mustContain(t, "the result", res.stdout, "made", "outer repository visible", "the sandbox made the workspace a git repository")
		// The rest of the outer repository is read-only in the sandbox.
		res = h.bash(ws, "touch ../outside.txt 2>&1; echo rc=$?", nil, []string{ws})
		mustContain(t, "the result", res.stdout, "Read-only file system")
		// A second session: the repository still works in the sandbox.
		res = h.bash(ws, "git status --short && git rev-parse --git-dir", nil, []string{ws})
		mustContain(t, "the result", res.stdout, "exit: 0", ".git")
	})

	t.Run("an unpacked tarball turned into a repository", func(t *testing.T) {
		h := h.with(t)
		ws := h.workspace("tarball")
		res := h.bash(ws, fmt.Sprintf(`git init -q && git config core.fsmonitor %s && echo made`, q(h.plant("tarball-fsmonitor"))), nil, []string{ws})
		mustContain(t, "the result", res.stdout, "made")
	})

	t.Run("nested repositories, a bare one, a gitfile and a .git symlink", func(t *testing.T) {
		h := h.with(t)
		ws := h.workspace("nested")
		h.repo(ws)
		res := h.bash(ws, fmt.Sprintf(`set -e
git init -q a/b/nested && git -C a/b/nested config core.fsmonitor %[1]s
git init -q --bare bare.git && git -C bare.git config core.worktree "$PWD/wt" && git -C bare.git config core.bare false && git -C bare.git config core.fsmonitor %[2]s
mkdir -p wt gf && cp bare.git/HEAD wt/ 2>/dev/null || true
echo "gitdir: ../bare.git" > gf/.git
mkdir -p ln && ln -s ../bare.git ln/.git
mkdir -p node_modules/pkg && git init -q node_modules/pkg && git -C node_modules/pkg config core.fsmonitor %[3]s
echo planted`, q(h.plant("nested-fsmonitor")), q(h.plant("bare-fsmonitor")), q(h.plant("ignored-fsmonitor"))),
			[]string{ws}, []string{ws, filepath.Join(ws, "a/b/nested"), filepath.Join(ws, "bare.git"), filepath.Join(ws, "wt"), filepath.Join(ws, "gf"), filepath.Join(ws, "ln"), filepath.Join(ws, "node_modules/pkg")})
		mustContain(t, "the result", res.stdout, "planted", "a/b/nested/", "bare.git/", "gf/", "ln/", "node_modules/pkg/")
		// In the sandbox they still work.
		res = h.bash(ws, "git -C a/b/nested status --short && git -C node_modules/pkg rev-parse --git-dir && echo nested-ok", nil, nil)
		mustContain(t, "the result", res.stdout, "nested-ok")
	})

	t.Run("a repository made by a background process after the command", func(t *testing.T) {
		h := h.with(t)
		ws := h.workspace("background")
		h.repo(ws)
		h.bash(ws, fmt.Sprintf(`(sleep 1; git init -q late; git -C late config core.fsmonitor %s) >/dev/null 2>&1 &`, q(h.plant("late-fsmonitor"))), []string{ws}, nil)
		// The session is over: the background process was killed, and
		// whatever it made before that was caught by the last scan.
		h.hostGit(filepath.Join(ws, "late"))
		h.noMarker()
	})
}

func TestHostileAgentGitWorkLandsOnTheHost(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("work")
	h.repo(ws)
	res := h.bash(ws, `echo change >> README && git add README && git -c user.email=agent@sandbox -c user.name=agent commit -q -m "agent's commit" && git checkout -q -b feature && echo wip > wip.txt && git add wip.txt && git stash -q && echo ok`, []string{ws}, nil)
	mustContain(t, "the result", res.stdout, "ok")
	if got := h.git(ws, "log", "--format=%s", "-2", "feature"); got != "agent's commit\nfirst" {
		t.Errorf("host git log:\n%s", got)
	}
	if got := h.git(ws, "rev-parse", "--abbrev-ref", "HEAD"); got != "feature" {
		t.Errorf("host HEAD: %s", got)
	}
	if got := h.git(ws, "stash", "list"); !strings.Contains(got, "stash@{0}") {
		t.Errorf("host stash list: %q", got)
	}
	if got := h.git(ws, "status", "--porcelain"); got != "" {
		t.Errorf("host status:\n%s", got)
	}
	h.git(ws, "fsck", "--strict")
}

func TestHostileGitSymlinkMountsNothing(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	kube := h.dir("home/.kube", 0o700)
	if err := os.WriteFile(filepath.Join(kube, "config"), []byte("secret-cluster-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(kube, "config"), h.uid, h.gid)
	ws := h.workspace("kube")
	// The sandbox plants .git pointing at the host's ~/.kube.
	h.bash(ws, "ln -s "+kube+" .git && echo planted", nil, nil)
	res := h.bash(ws, "cat "+filepath.Join(kube, "config")+" 2>&1; ls -la .git; mount | grep -c kube; true", nil, nil)
	if strings.Contains(res.stdout, "secret-cluster-token") {
		t.Error("the host's ~/.kube/config was readable in the sandbox")
	}
	if _, err := os.Stat(filepath.Join(kube, "hooks")); err == nil {
		t.Error("~/.kube/hooks was created on the host")
	}
	// A .git symlink the user made on the host is refused with the way out.
	ws2 := h.workspace("kube2")
	os.Symlink(kube, filepath.Join(ws2, ".git"))
	res = h.shiro(ws2, nil, "tool", "bash", bashJSON("true", 0))
	if res.code == 0 || !strings.Contains(res.stderr, ".git: it is a symlink") || !strings.Contains(res.stderr, "--no-sandbox") {
		t.Errorf("exit %d, stderr %s", res.code, res.stderr)
	}
}

func TestHostileHelperCannotBeReplaced(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("helper")
	res := h.bash(ws, `H=$(ls /.shiro/bin/shiro-*); sha256sum "$H" | cut -d' ' -f1 > helper.sum
printf '#!/bin/sh\nenv > /home/shiro/seen-env\nexec /bin/true\n' > /tmp/wrapper; chmod +x /tmp/wrapper
cp /tmp/wrapper "$H" 2>&1; mv "$H" "$H.real" 2>&1; chmod 777 "$H" 2>&1; cp /tmp/wrapper /.shiro/bin/shiro-new 2>&1; ln -sf /tmp/wrapper /.shiro/bin/x 2>&1; true`, nil, nil)
	for _, want := range []string{"cp:", "mv:", "chmod:", "ln:"} {
		mustContain(t, "the result", res.stdout, want)
	}
	before, _ := os.ReadFile(filepath.Join(ws, "helper.sum"))
	res = h.shiro(ws, []string{"SHIRO_TEST_SECRET=hunter2"}, "--env", "SHIRO_TEST_SECRET", "tool", "bash",
		bashJSON(`H=$(ls /.shiro/bin/shiro-*); sha256sum "$H" | cut -d' ' -f1; cat /home/shiro/seen-env 2>/dev/null | grep -c hunter2; ls /.shiro/bin`, 0))
	if !strings.Contains(res.stdout, strings.TrimSpace(string(before))) {
		t.Errorf("the helper changed:\n%s", res.stdout)
	}
	if strings.Contains(res.stdout, "shiro-new") || strings.Contains(res.stdout, "\nx\n") {
		t.Errorf("something was planted beside the helper:\n%s", res.stdout)
	}
	if strings.Contains(res.stdout, "stdout:\n"+strings.TrimSpace(string(before))+"\n1") {
		t.Error("a wrapper saw a value passed later with --env")
	}
}

func TestHostileEscapedLoopDies(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("loop")
	h.bash(ws, `setsid env -u SHIRO_CMD sh -c 'while sleep 0.2; do date >> loop.txt; done' >/dev/null 2>&1 & (nohup setsid env -i /bin/sh -c 'while sleep 0.2; do date >> loop2.txt; done' >/dev/null 2>&1 &); sleep 1; echo started`, nil, nil)
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(ws, name))
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	// The session is over: whatever it started is gone, so the files stop
	// growing (checked on the host) and nothing is left in the container.
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, b := size("loop.txt"), size("loop2.txt")
		time.Sleep(time.Second)
		if size("loop.txt") == a && size("loop2.txt") == b {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an escaped loop still writes the workspace after the session ended")
		}
	}
	for _, id := range testenv.ContainerIDs(t, h.api, ws) {
		top, err := h.api.ContainerTop(t.Context(), id, client.ContainerTopOptions{Arguments: []string{"-eo", "pid,args"}})
		if err != nil {
			continue // stopped
		}
		for _, p := range top.Processes {
			if line := strings.Join(p, " "); strings.Contains(line, "while sleep") || strings.Contains(line, "sleep 0.2") {
				t.Errorf("left in the container: %s", line)
			}
		}
	}
}

func TestHostileNewRepositoryGetsAFreshHome(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("reborn")
	h.repo(ws)
	h.bash(ws, `echo 'echo pwned > "$PWD/pwned.txt"' >> ~/.profile; echo planted`, nil, nil)
	// The repository is removed and another made at the same path.
	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	ws = h.workspace("reborn")
	h.repo(ws)
	res := h.bash(ws, "cat ~/.profile 2>/dev/null | grep -c pwned; true", nil, nil)
	if _, err := os.Stat(filepath.Join(ws, "pwned.txt")); err == nil {
		t.Errorf("the old repository's ~/.profile ran in the new one:\n%s", res.stdout)
	}
	// sandbox rm takes HOME with the container.
	h.bash(ws, `echo 'echo pwned > "$PWD/pwned.txt"' >> ~/.profile`, nil, nil)
	if r := h.shiro(ws, nil, "sandbox", "rm"); r.code != 0 {
		t.Fatalf("sandbox rm: %d %s", r.code, r.stderr)
	}
	h.bash(ws, "true", nil, nil)
	if _, err := os.Stat(filepath.Join(ws, "pwned.txt")); err == nil {
		t.Error("HOME survived shiro sandbox rm")
	}
}

func TestHostileContainersAreNotAdopted(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("adopt")
	h.bash(ws, "true", nil, nil)
	id := onlyContainer(t, h.api, ws)
	in, err := h.api.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(in.Container.Name, "/")
	// Someone removes it and makes one under the same name, with every
	// label copied, that mounts the host's root.
	if _, err := h.api.ContainerRemove(t.Context(), id, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	cfg := *in.Container.Config
	hc := *in.Container.HostConfig
	hc.Binds = []string{"/:/host"}
	squat, err := h.api.ContainerCreate(t.Context(), client.ContainerCreateOptions{Name: name, Config: &cfg, HostConfig: &hc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.api.ContainerRemove(context.Background(), squat.ID, client.ContainerRemoveOptions{Force: true})
	})
	res := h.bash(ws, "test -d /host/etc && echo adopted; true", nil, nil)
	if strings.Contains(res.stdout, "adopted") {
		t.Fatal("the squatting container was used as the sandbox")
	}
	mustContain(t, "the notice", res.stderr, "is not one shiro would make")
	// An image carrying shiro's labels does not make its containers
	// shiro's to prune.
	imgCfg := container.Config{Image: testenv.RequireImage(t, h.api), Labels: map[string]string{
		"dev.shiro.managed": "true", "dev.shiro.workspace": "/nonexistent", "dev.shiro.config": "x", "dev.shiro.owner": "forged"}, Cmd: []string{"true"}}
	other, err := h.api.ContainerCreate(t.Context(), client.ContainerCreateOptions{Config: &imgCfg, HostConfig: &container.HostConfig{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.api.ContainerRemove(context.Background(), other.ID, client.ContainerRemoveOptions{Force: true})
	})
	if r := h.shiro(ws, nil, "sandbox", "prune"); r.code != 0 {
		t.Fatalf("prune: %d %s", r.code, r.stderr)
	}
	for _, keep := range []string{squat.ID, other.ID} {
		if _, err := h.api.ContainerInspect(t.Context(), keep, client.ContainerInspectOptions{}); err != nil {
			t.Errorf("prune removed %s, which is not this user's shiro's: %v", keep[:12], err)
		}
	}
}

func TestHostileTmpFillIsNoSpace(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("tmpfill")
	res := h.shiro(ws, nil, "--memory", "512m", "tool", "bash", bashJSON("dd if=/dev/zero of=/tmp/fill bs=1M count=1024 2>&1 | grep -i 'no space'; rm -f /tmp/fill", 0))
	mustContain(t, "the result", res.stdout, "No space left on device")
	id := onlyContainer(t, h.api, ws)
	res = h.shiro(ws, nil, "--memory", "512m", "tool", "bash", bashJSON("cat /proc/1/cmdline | tr '\\0' ' '", 0))
	mustContain(t, "the second command", res.stdout, "helper init")
	if again := onlyContainer(t, h.api, ws); again != id {
		t.Error("the container was replaced: filling /tmp killed it")
	}
}

func TestHostileGuardUnderYolo(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("guard")
	precious := filepath.Join(ws, "precious")
	if err := os.MkdirAll(filepath.Join(precious, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(precious, h.uid, h.gid)
	evasions := []string{`/bin/rm -rf precious`, `command rm -rf precious`, `\rm -rf precious`, `"rm" -rf precious`,
		`env rm -rf precious`, `echo precious | xargs rm -rf`, `bash -c "rm -rf precious"`, `x=$(rm -rf precious)`}
	var replies []fakemodel.Reply
	for i, e := range evasions {
		replies = append(replies, fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: fmt.Sprintf("c%d", i), Name: "bash", Input: bashJSON(e, 0)}}})
	}
	replies = append(replies, fakemodel.Reply{Text: "done"})
	srv := fakemodel.New(t, replies...)
	res := h.shiro(ws, providers[0].env(srv.URL), "-p", "--yolo", "clean up")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(precious, "keep")); err != nil {
		t.Fatalf("an evasion got through the guard: %v\n%s", err, res.stderr)
	}
	if n := strings.Count(res.stderr, "[notice] Blocked by the guard plugin"); n != len(evasions) {
		t.Errorf("%d refusals, want %d:\n%s", n, len(evasions), res.stderr)
	}
}
