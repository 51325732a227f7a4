package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/testenv"
)

const escapees = "sleep 300 & (setsid sleep 301 &); nohup sleep 302 >/dev/null 2>&1 & echo started; sleep 303"

func TestInterruptKillsTheWholeTree(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)

	r := startShiro(t, ws, "tool", "bash", bashJSON(escapees, 0))
	r.waitLine(t, "started", 2*time.Minute)
	code, took := r.signalAndWait(t, syscall.SIGINT)
	if code != 130 {
		t.Errorf("exit code %d, want 130", code)
	}
	if took > 5*time.Second {
		t.Errorf("took %s after SIGINT to return", took)
	}
	out := r.stdout.String()
	for _, want := range []string{"The user interrupted this command. It did not finish, so its effects are unknown.", "stdout:\nstarted"} {
		if !strings.Contains(out, want) {
			t.Errorf("result lacks %q:\n%s", want, out)
		}
	}
	noneMatch(t, top(t, api, onlyContainer(t, api, ws)), "sleep 300", "sleep 301", "sleep 302", "sleep 303")
}

func TestTimeoutKillsTheWholeTree(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)

	res := shiro(t, ws, nil, "tool", "bash", bashJSON(strings.ReplaceAll(escapees, "30", "31"), 2000))
	if res.code != 0 {
		t.Fatalf("exit %d, stderr: %s", res.code, res.stderr)
	}
	for _, want := range []string{"exit: 137", "(killed by SIGKILL; timeout is 2000ms)", "stdout:\nstarted"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("result lacks %q:\n%s", want, res.stdout)
		}
	}
	noneMatch(t, top(t, api, onlyContainer(t, api, ws)), "sleep 310", "sleep 311", "sleep 312", "sleep 313")
}

func TestBackgroundChildDoesNotHoldTheCall(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	warm := shiro(t, ws, nil, "tool", "bash", bashJSON("true", 0))
	if warm.code != 0 {
		t.Fatalf("warm-up: exit %d: %s", warm.code, warm.stderr)
	}
	res := shiro(t, ws, nil, "tool", "bash", bashJSON("(sleep 30 &); echo done", 0))
	if !strings.Contains(res.stdout, "stdout:\ndone") {
		t.Errorf("result lacks done:\n%s", res.stdout)
	}
	// The behaviour under test: the call does not wait for the grandchild
	// holding the pipe (30 s). A warm start plus the shell is far below.
	if res.took > warm.took+2*time.Second {
		t.Errorf("call took %s (a warm no-op took %s): it waited on the background child", res.took, warm.took)
	}
}

func TestFilesBelongToTheHostUser(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("ws")
	res := h.shiro(ws, nil, "tool", "bash", bashJSON("touch made-here && id -u && echo $HOME && touch $HOME/home-ok", 0))
	if res.code != 0 || !strings.Contains(res.stdout, "exit: 0") || !strings.Contains(res.stdout, strconv.Itoa(h.uid)) {
		t.Fatalf("unexpected result (exit %d):\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	fi, err := os.Stat(filepath.Join(ws, "made-here"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if int(st.Uid) != h.uid || int(st.Gid) != h.gid {
		t.Errorf("made-here is owned by %d:%d, want %d:%d", st.Uid, st.Gid, h.uid, h.gid)
	}
}

// ensureUser creates a normal user (once per machine).
func ensureUser(t *testing.T, name string) *user.User {
	t.Helper()
	if u, err := user.Lookup(name); err == nil {
		return u
	}
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
		if _, lerr := user.Lookup(name); lerr != nil { // a parallel test may have made it
			t.Fatalf("useradd %s: %v\n%s", name, err, out)
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// dockerGroup is the group that may use the engine's socket, if any.
func dockerGroup(t *testing.T) []uint32 {
	t.Helper()
	g, err := user.LookupGroup("docker")
	if err != nil {
		return nil
	}
	id, _ := strconv.Atoi(g.Gid)
	return []uint32{uint32(id)}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

func TestHardening(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	before, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))

	cases := []struct {
		name, command, want string
	}{
		{"no effective capabilities", "grep CapEff /proc/self/status", "CapEff:\t0000000000000000"},
		{"no new privileges", "grep NoNewPrivs /proc/self/status", "NoNewPrivs:\t1"},
		// The sandbox's .git is its own copy: the writes succeed there and
		// never reach the host's (checked below).
		{"hooks stay in the sandbox", "echo evil > .git/hooks/pre-commit", "the change stays in the sandbox"},
		{"git config stays in the sandbox", "echo '[core] fsmonitor = evil' >> .git/config", "the change stays in the sandbox"},
		{"tmp is writable", "echo x > /tmp/x && cat /tmp/x", "stdout:\nx"},
		{"workspace is writable", "echo y > y.txt && cat y.txt", "stdout:\ny"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := shiro(t, ws, nil, "tool", "bash", bashJSON(tc.command, 0))
			if !strings.Contains(res.stdout, tc.want) {
				t.Errorf("want %q in:\n%s\nstderr: %s", tc.want, res.stdout, res.stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "hooks", "pre-commit")); err == nil {
		t.Error("a hook was planted")
	}
	after, _ := os.ReadFile(filepath.Join(ws, ".git", "config"))
	if !bytes.Equal(before, after) {
		t.Error(".git/config changed")
	}
}

func TestForkBombIsContained(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	res := shiro(t, ws, nil, "--pids", "256", "tool", "bash", bashJSON("bomb() { bomb | bomb & }; bomb", 5000))
	if res.code != 0 && res.code != 1 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	next := shiro(t, ws, nil, "--pids", "256", "tool", "bash", bashJSON("echo still-alive", 0))
	if !strings.Contains(next.stdout, "exit: 0") || !strings.Contains(next.stdout, "still-alive") {
		t.Fatalf("the next command failed:\n%s\n%s", next.stdout, next.stderr)
	}
}

func TestMemoryHogIsKilledWithANote(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	// tail keeps a whole "line" in memory; /dev/zero has no newline.
	res := shiro(t, ws, nil, "--memory", "64m", "tool", "bash", bashJSON("head -c 512m /dev/zero | tail", 0))
	for _, want := range []string{"exit: 137", "out of memory"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("want %q in:\n%s\nstderr: %s", want, res.stdout, res.stderr)
		}
	}
}

func TestHostEnvironmentStaysOut(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	secret := []string{"SHIRO_TEST_SECRET=hunter2"}
	res := shiro(t, ws, secret, "tool", "bash", bashJSON(`echo "[$SHIRO_TEST_SECRET]"; env | grep -c hunter2 || true`, 0))
	if !strings.Contains(res.stdout, "[]") || strings.Contains(res.stdout, "hunter2") {
		t.Errorf("the secret reached the sandbox:\n%s", res.stdout)
	}
	res = shiro(t, ws, secret, "--env", "SHIRO_TEST_SECRET", "--env", "OTHER=x", "tool", "bash", bashJSON(`echo "[$SHIRO_TEST_SECRET] [$OTHER]"`, 0))
	if !strings.Contains(res.stdout, "[hunter2] [x]") {
		t.Errorf("--env did not pass the variables:\n%s", res.stdout)
	}
	inspect, err := api.ContainerInspect(t.Context(), onlyContainer(t, api, ws), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(inspect.Raw), "hunter2") {
		t.Error("the secret is in the container's configuration")
	}
}

func TestContainerReuseAndReplacement(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	img := testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)

	shiro(t, ws, nil, "tool", "bash", bashJSON("true", 0))
	first := onlyContainer(t, api, ws)
	shiro(t, ws, nil, "tool", "bash", bashJSON("true", 0))
	if again := onlyContainer(t, api, ws); again != first {
		t.Fatalf("the second command made a new container %s (first %s)", again, first)
	}

	other := "shiro-test-other:" + strconv.Itoa(os.Getpid())
	if _, err := api.ImageTag(t.Context(), client.ImageTagOptions{Source: img, Target: other}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = api.ImageRemove(context.Background(), other, client.ImageRemoveOptions{}) })
	res := shiro(t, ws, nil, "--image", other, "tool", "bash", bashJSON("true", 0))
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if ids := testenv.ContainerIDs(t, api, ws); len(ids) != 2 {
		t.Fatalf("another image should make a second container; have %d", len(ids))
	}

	// Removed behind shiro's back: the next call makes it again.
	if _, err := api.ContainerRemove(t.Context(), first, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	res = shiro(t, ws, nil, "tool", "bash", bashJSON("echo back", 0))
	if !strings.Contains(res.stdout, "back") {
		t.Fatalf("after removal: %s %s", res.stdout, res.stderr)
	}
}

func TestPruneRemovesStoppedAndOrphaned(t *testing.T) {
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	stopped := testenv.Workspace(t, api)
	orphan := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(orphan, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.RemoveContainers(t, api, orphan) })
	kept := testenv.Workspace(t, api)
	for _, ws := range []string{stopped, orphan, kept} {
		if res := shiro(t, ws, nil, "tool", "bash", bashJSON("true", 0)); res.code != 0 {
			t.Fatalf("exit %d: %s", res.code, res.stderr)
		}
	}
	shiro(t, stopped, nil, "sandbox", "stop")
	if err := os.Remove(orphan); err != nil {
		t.Fatal(err)
	}
	res := shiro(t, kept, nil, "sandbox", "prune")
	if res.code != 0 {
		t.Fatalf("prune: exit %d: %s", res.code, res.stderr)
	}
	if n := len(testenv.ContainerIDs(t, api, stopped)); n != 0 {
		t.Errorf("stopped container not pruned")
	}
	if n := len(testenv.ContainerIDs(t, api, orphan)); n != 0 {
		t.Errorf("orphaned container not pruned")
	}
	if n := len(testenv.ContainerIDs(t, api, kept)); n != 1 {
		t.Errorf("running container of a live workspace was pruned")
	}
}

func TestIdleContainerStopsItself(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	if res := shiro(t, ws, nil, "--idle-timeout", "2s", "tool", "bash", bashJSON("true", 0)); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	id := onlyContainer(t, api, ws)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		in, err := api.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !in.Container.State.Running {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatal("the idle container did not stop itself within 60 s")
}

func TestUnreachableEngineIsOneClearLine(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	res := shiro(t, ws, []string{"DOCKER_HOST=tcp://127.0.0.1:1"}, "tool", "bash", bashJSON("true", 0))
	if res.code != 1 {
		t.Errorf("exit %d, want 1", res.code)
	}
	lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "DOCKER_HOST=tcp://127.0.0.1:1") || !strings.Contains(lines[0], "--no-sandbox") {
		t.Errorf("want one line naming DOCKER_HOST and what to do, got:\n%s", res.stderr)
	}
	if strings.Contains(res.stderr, "goroutine") || strings.Contains(res.stderr, "panic") {
		t.Errorf("stack trace:\n%s", res.stderr)
	}
}

func TestImageWithoutBashUsesSh(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("busybox is missing (make deps installs busybox-static)")
		}
		t.Skip("no busybox")
	}
	tag := "shiro-test-nobash:" + strconv.Itoa(os.Getpid())
	importTinyImage(t, api, busybox, tag)
	ws := testenv.Workspace(t, api)
	res := shiro(t, ws, nil, "--image", tag, "tool", "bash", bashJSON("echo from-$((40+2))", 0))
	if !strings.Contains(res.stdout, "from-42") || !strings.Contains(res.stdout, "no bash") {
		t.Errorf("want the command run by sh with a note:\n%s\nstderr: %s", res.stdout, res.stderr)
	}
}

// importTinyImage makes an image holding only a static busybox as /bin/sh.
func importTinyImage(t *testing.T, api *client.Client, busybox, tag string) {
	t.Helper()
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "etc/", "tmp/", "home/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		_ = tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: mode})
	}
	_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	_, _ = tw.Write(bb)
	for _, l := range []string{"sh", "echo", "cat", "sleep", "ps", "id"} {
		_ = tw.WriteHeader(&tar.Header{Name: "bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox"})
	}
	passwd := []byte("root:x:0:0:root:/root:/bin/sh\n")
	_ = tw.WriteHeader(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(passwd))})
	_, _ = tw.Write(passwd)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	rc, err := api.ImageImport(t.Context(), client.ImageImportSource{Source: &buf, SourceName: "-"}, tag, client.ImageImportOptions{})
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	_, _ = bytes.NewBuffer(nil).ReadFrom(rc)
	rc.Close()
	t.Cleanup(func() { _, _ = api.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true}) })
}

func TestOldEngineAPI(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	res := shiro(t, ws, []string{"DOCKER_API_VERSION=1.41"}, "tool", "bash", bashJSON("echo api-ok", 0))
	if !strings.Contains(res.stdout, "api-ok") {
		t.Errorf("with API 1.41: %s\n%s", res.stdout, res.stderr)
	}
}

// A container that only inherited dev.shiro.managed from its image (a build
// step, someone's `docker run` of the sandbox image) is not shiro's to prune.
func TestPruneLeavesContainersThatAreNotAWorkspaces(t *testing.T) {
	api := testenv.RequireDocker(t)
	img := testenv.RequireImage(t, api)
	res, err := api.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Config: &container.Config{Image: img, Cmd: []string{"true"}, Labels: map[string]string{"dev.shiro.managed": "true"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = api.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
	})
	if out := shiro(t, t.TempDir(), nil, "sandbox", "prune"); out.code != 0 {
		t.Fatalf("prune: exit %d: %s", out.code, out.stderr)
	}
	if _, err := api.ContainerInspect(t.Context(), res.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("prune removed a container that is not a workspace's: %v", err)
	}
}

// TestContainersGetTheSmallHelper checks that a new container receives the
// small shiro-helper built beside shiro, not shiro itself: the copy is part
// of every cold start (and an upload to a remote engine).
func TestContainersGetTheSmallHelper(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)

	r := shiro(t, ws, nil, "tool", "bash", bashJSON("stat -c 'size=%s' /.shiro/bin/shiro-*", 0))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var size int64 = -1
	for _, f := range strings.Fields(r.stdout) {
		if v, ok := strings.CutPrefix(f, "size="); ok {
			size, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if size <= 0 || size > 10<<20 {
		t.Fatalf("helper in the container is %d bytes, want at most 10 MiB:\n%s", size, r.stdout)
	}
}
