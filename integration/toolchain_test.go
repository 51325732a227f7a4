package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// projectWorkspace is a workspace whose containers, and the images shiro
// builds from its files, are removed when the test ends.
func projectWorkspace(t *testing.T, api *client.Client) string {
	t.Helper()
	ws := t.TempDir()
	t.Cleanup(func() {
		testenv.RemoveContainers(t, api, ws)
		for _, img := range projectImages(t, api, ws) {
			if _, err := api.ImageRemove(context.Background(), img.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
				t.Logf("remove image %s: %v", img.ID, err)
			}
		}
	})
	return ws
}

type builtImage struct {
	ID, Source string
	Tags       []string
}

// projectImages lists the images shiro built from files in ws.
func projectImages(t *testing.T, api *client.Client, ws string) []builtImage {
	t.Helper()
	f := client.Filters{}.Add("label", "dev.shiro.built=true")
	res, err := api.ImageList(context.Background(), client.ImageListOptions{Filters: f})
	if err != nil {
		t.Fatalf("list images: %v", err)
	}
	var out []builtImage
	for _, img := range res.Items {
		if src := img.Labels["dev.shiro.source"]; strings.HasPrefix(src, ws+string(filepath.Separator)) {
			out = append(out, builtImage{ID: img.ID, Source: src, Tags: img.RepoTags})
		}
	}
	return out
}

// token is a value no image, file or output holds by chance.
func token(t *testing.T, prefix string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}

func TestDockerfileImageIsBuiltOnceAndUsed(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	ws := projectWorkspace(t, api)
	marker := token(t, "marker")
	writeFiles(t, ws, map[string]string{
		"marker.txt": marker + "\n",
		"Dockerfile": "FROM " + base + "\n" +
			"COPY marker.txt /opt/marker.txt\n" +
			"RUN mkdir -p /opt/tool/bin && printf '#!/bin/sh\\necho tool-from-the-image\\n' > /opt/tool/bin/projtool && chmod 755 /opt/tool/bin/projtool\n" +
			"ENV PATH=/opt/tool/bin:$PATH\n",
		".dockerignore": "scratch/\n.shiro/\n",
		"scratch/big":   "not sent",
	})
	// The command runs in bash's login shell: the image's PATH must survive
	// /etc/profile.
	cmd := bashJSON("cat /opt/marker.txt && projtool", 0)

	first := shiro(t, ws, nil, "--image", "./Dockerfile", "tool", "bash", cmd)
	if first.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", first.code, first.stdout, first.stderr)
	}
	mustContain(t, "the result", first.stdout, "exit: 0", marker, "tool-from-the-image")
	mustContain(t, "the progress", first.stderr, "building shiro-project:", "Step 1/", "built shiro-project:")
	imgs := projectImages(t, api, ws)
	if len(imgs) != 1 || imgs[0].Source != filepath.Join(ws, "Dockerfile") {
		t.Fatalf("built images %+v, want one from the Dockerfile", imgs)
	}

	second := shiro(t, ws, nil, "--image", "./Dockerfile", "tool", "bash", cmd)
	mustContain(t, "the second result", second.stdout, "exit: 0", marker)
	if strings.Contains(second.stderr, "building") || strings.Contains(second.stderr, "Step 1/") {
		t.Errorf("the second run built again:\n%s", second.stderr)
	}
	if again := projectImages(t, api, ws); len(again) != 1 || again[0].ID != imgs[0].ID {
		t.Errorf("the second run has images %+v, want the same %s", again, imgs[0].ID)
	}

	// The same Dockerfile named by the project's configuration.
	writeFiles(t, ws, map[string]string{".shiro/config.json": `{"sandbox": {"image": "Dockerfile"}}`})
	third := shiro(t, ws, nil, "--trust-project", "tool", "bash", bashJSON("cat /opt/marker.txt", 0))
	mustContain(t, "the project-configured result", third.stdout, "exit: 0", marker)
	if strings.Contains(third.stderr, "building") {
		t.Errorf("the project's setting built again:\n%s", third.stderr)
	}
}

func TestDevcontainerWithBuildArgsAndEnv(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := projectWorkspace(t, api)
	marker := token(t, "arg")
	writeFiles(t, ws, map[string]string{
		".devcontainer/devcontainer.json": `{
	// JSON with comments and trailing commas, as devcontainer.json allows
	"name": "toolchain test",
	"build": {
		"dockerfile": "Dockerfile",
		"context": "..",
		"args": { "MARKER": "` + marker + `", },
	},
	"containerEnv": { "TEAM_VAR": "from-devcontainer", "PATH": "/opt/team/bin:${containerEnv:PATH}" },
	"remoteUser": "vscode",
}`,
		// The stable way to extend shiro's image, whatever its tag.
		".devcontainer/Dockerfile": "ARG SHIRO_BASE_IMAGE\nFROM ${SHIRO_BASE_IMAGE}\nARG MARKER\nRUN echo \"$MARKER\" > /opt/marker\n",
	})
	cmd := bashJSON(`cat /opt/marker; echo "var=$TEAM_VAR"; echo "path=$PATH"`, 0)
	res := shiro(t, ws, nil, "--image", "devcontainer", "tool", "bash", cmd)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "the result", res.stdout, "exit: 0", marker, "var=from-devcontainer", "path=/opt/team/bin:/usr/local/sbin")
	mustContain(t, "stderr", res.stderr, "building shiro-project:", `"remoteUser" "vscode" is not used`)

	again := shiro(t, ws, nil, "--image", ".devcontainer/devcontainer.json", "tool", "bash", cmd)
	mustContain(t, "the second result", again.stdout, "exit: 0", marker)
	if strings.Contains(again.stderr, "building") {
		t.Errorf("the second run built again:\n%s", again.stderr)
	}
	if imgs := projectImages(t, api, ws); len(imgs) != 1 {
		t.Errorf("built images %+v, want one", imgs)
	}
}

func TestDevcontainerCannotRunOnTheHostOrWidenTheSandbox(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	ws := projectWorkspace(t, api)
	hostFile := filepath.Join(t.TempDir(), "initialized-on-the-host")
	writeFiles(t, ws, map[string]string{
		".devcontainer/devcontainer.json": `{
	"image": "` + base + `",
	"initializeCommand": "touch ` + hostFile + `",
	"runArgs": ["--privileged"],
	"privileged": true,
	"capAdd": ["SYS_ADMIN"],
	"mounts": ["source=/,target=/host,type=bind"],
	"postCreateCommand": "touch /tmp/post-created",
}`,
	})
	res := shiro(t, ws, nil, "--image", "devcontainer", "tool", "bash",
		bashJSON("grep CapEff /proc/self/status; test -e /host && echo host-mounted; test -e /tmp/post-created && echo post-created; true", 0))
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "the result", res.stdout, "CapEff:\t0000000000000000")
	for _, bad := range []string{"host-mounted", "post-created"} {
		if strings.Contains(res.stdout, bad) {
			t.Errorf("%s:\n%s", bad, res.stdout)
		}
	}
	if _, err := os.Stat(hostFile); err == nil {
		t.Error("initializeCommand ran on the host")
	}
	mustContain(t, "the notices", res.stderr,
		`[notice] .devcontainer/devcontainer.json: "initializeCommand" is not run`,
		`"runArgs" is ignored`, `"privileged" is ignored`, `"capAdd" is ignored`, `"mounts" is ignored`, `"postCreateCommand" is not run`)
	in, err := api.ContainerInspect(t.Context(), onlyContainer(t, api, ws), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hc := in.Container.HostConfig; hc.Privileged || len(hc.CapAdd) > 0 {
		t.Errorf("privileged %v, capAdd %v", hc.Privileged, hc.CapAdd)
	}
	for _, m := range in.Container.Mounts {
		switch {
		case m.Destination == ws, m.Destination == "/home/shiro", m.Destination == "/.shiro/state":
		case m.Type == "volume" && (m.Destination == filepath.Join(ws, ".git") || m.Destination == "/.shiro/shadow"):
		case m.Destination == "/.shiro/host" && m.Source == filepath.Join(ws, ".git") && !m.RW:
		case m.Destination == "/.shiro/sock" && m.Type == "bind" && !m.RW: // the session sockets (channel, egress proxy)
		default:
			t.Errorf("unexpected mount %+v", m)
		}
	}
}

func TestProjectImagePathCannotLeaveTheWorkspace(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	parent := t.TempDir()
	writeFiles(t, parent, map[string]string{"outside/Dockerfile": "FROM " + base + "\nCOPY secret /secret\n", "outside/secret": "s"})
	ws := filepath.Join(parent, "ws")
	writeFiles(t, ws, map[string]string{".shiro/config.json": `{"sandbox": {"image": "../outside/Dockerfile"}}`})
	t.Cleanup(func() { testenv.RemoveContainers(t, api, ws) })
	// Trusted or not: the path is refused either way.
	res := shiro(t, ws, nil, "--trust-project", "tool", "bash", bashJSON("true", 0))
	if res.code != 1 {
		t.Errorf("exit %d, want 1", res.code)
	}
	mustContain(t, "stderr", res.stderr, `sandbox image "../outside/Dockerfile" is outside the workspace`)
	if imgs := projectImages(t, api, parent); len(imgs) != 0 {
		t.Errorf("built %+v", imgs)
	}
}

func TestMissingImageIsAClearError(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	ws := testenv.Workspace(t, api)
	ref := "shiro-test-missing-" + strconv.Itoa(os.Getpid()) + ":nope"
	res := shiro(t, ws, nil, "--image", ref, "tool", "bash", bashJSON("true", 0))
	if res.code != 1 {
		t.Errorf("exit %d, want 1", res.code)
	}
	mustContain(t, "stderr", res.stderr, "image "+ref+": it is not present locally", "docker build -t "+ref, "docker load", "Dockerfile or devcontainer.json")
	if strings.Contains(res.stderr, "panic") || strings.Contains(res.stderr, "goroutine") {
		t.Errorf("stack trace:\n%s", res.stderr)
	}
}

// bridgeGateway is the host's address on the engine's default bridge: the
// network's gateway, or the host interface inside its subnet.
func bridgeGateway(t *testing.T, api *client.Client) netip.Addr {
	t.Helper()
	res, err := api.NetworkInspect(t.Context(), "bridge", client.NetworkInspectOptions{})
	if err != nil {
		t.Fatalf("inspect the bridge network: %v", err)
	}
	var subnets []netip.Prefix
	for _, c := range res.Network.IPAM.Config {
		if c.Gateway.IsValid() {
			return c.Gateway
		}
		subnets = append(subnets, c.Subnet)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		for _, s := range subnets {
			if s.Contains(ip) {
				return ip
			}
		}
	}
	t.Fatalf("no host address on the bridge network (subnets %v)", subnets)
	return netip.Addr{}
}

func TestNetworkNoneAndBridge(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)

	// A server on the host's bridge address only, never a public one.
	gw := bridgeGateway(t, api)
	ln, err := net.Listen("tcp", netip.AddrPortFrom(gw, 0).String())
	if err != nil {
		t.Fatalf("listen on %s: %v", gw, err)
	}
	answer := token(t, "from-the-host")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, answer) }), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	url := "http://" + ln.Addr().String() + "/"

	probe := bashJSON("ls /sys/class/net | tr '\\n' ' '; echo; curl -sS -m 5 "+url+" || echo curl-failed-$?", 0)
	bridge := shiro(t, ws, nil, "--network", "bridge", "tool", "bash", probe)
	mustContain(t, "bridge", bridge.stdout, answer)

	none := shiro(t, ws, nil, "--network", "none", "tool", "bash", probe)
	mustContain(t, "none", none.stdout, "stdout:\nlo \n", "curl-failed-")
	if strings.Contains(none.stdout, answer) {
		t.Errorf("--network none reached the host:\n%s", none.stdout)
	}

	// Loopback works with no network: a git daemon inside the sandbox,
	// listening on 127.0.0.1, answers git over it.
	loop := shiro(t, ws, nil, "--network", "none", "tool", "bash", bashJSON(`set -e
git init -q --bare /tmp/srv/r.git
git daemon --reuseaddr --listen=127.0.0.1 --port=19418 --base-path=/tmp/srv --export-all --detach --pid-file=/tmp/gd.pid
for i in $(seq 100); do
  if git ls-remote git://127.0.0.1:19418/r.git >/dev/null 2>&1; then echo loopback-ok; break; fi
  sleep 0.1
done
kill "$(cat /tmp/gd.pid)"`, 30000))
	mustContain(t, "loopback", loop.stdout, "loopback-ok")

	// The network is part of the container's settings: two containers.
	if ids := testenv.ContainerIDs(t, api, ws); len(ids) != 2 {
		t.Errorf("%d containers, want one per network", len(ids))
	}
}

func TestEnvValueReachesTheSandboxButNoRecord(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	p := providers[0]
	secret := token(t, "s3cr3t-value")
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "count1", Name: "bash", Input: `{"command":"echo $FOO | wc -c"}`}}},
		fakemodel.Reply{Text: "counted"},
	)
	env := append(headlessEnv(t, p, srv.URL), "FOO="+secret)
	home := strings.TrimPrefix(env[0], "SHIRO_HOME=")
	res := shiro(t, ws, env, "-p", "--json", "--yolo", "--env", "FOO", "count the characters of FOO")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	reqs := modelRequests(srv)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	// The count proves the value reached the sandbox.
	if want := strconv.Itoa(len(secret) + 1); !p.paired(t, reqs[1].JSON(), "count1", want) {
		t.Errorf("the tool result does not carry the count %s:\n%s", want, reqs[1].Body)
	}
	for what, s := range map[string]string{"--json output": res.stdout, "stderr": res.stderr} {
		if strings.Contains(s, secret) {
			t.Errorf("the value is in the %s", what)
		}
	}
	files := 0
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("the value is in %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Error("no session file was written")
	}
	inspect, err := api.ContainerInspect(t.Context(), onlyContainer(t, api, ws), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(inspect.Raw), secret) {
		t.Error("the value is in the container's configuration")
	}
}

// doctorEnv isolates shiro's configuration and points the provider at a
// fake server.
func doctorEnv(t *testing.T, srv *fakemodel.Server, key string) []string {
	t.Helper()
	return []string{"SHIRO_HOME=" + t.TempDir(), "SHIRO_PROVIDER=anthropic", "SHIRO_BASE_URL=" + srv.URL + "/v1",
		"ANTHROPIC_API_KEY=" + key, "SHIRO_API_KEY=", "SHIRO_MODEL="}
}

// doctorLines maps each check's name to its line.
func doctorLines(t *testing.T, out string) map[string]string {
	t.Helper()
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || (f[0] != "✓" && f[0] != "✗") {
			t.Errorf("not a check line: %q", l)
			continue
		}
		lines[f[1]] = l
	}
	return lines
}

func TestDoctorAllGood(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	base := testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	srv := fakemodel.New(t)
	res := shiro(t, ws, doctorEnv(t, srv, "test-key"), "doctor")
	if res.code != 0 {
		t.Errorf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	lines := doctorLines(t, res.stdout)
	for _, name := range []string{"engine", "image", "tools", "workspace", "container", "helper", "git", "others", "repositories", "sandbox", "key", "endpoint"} {
		if !strings.HasPrefix(lines[name], "✓") {
			t.Errorf("%s: %q", name, lines[name])
		}
	}
	mustContain(t, "the engine line", lines["engine"], "API 1.")
	mustContain(t, "the image line", lines["image"], base, "the built-in image")
	mustContain(t, "the tools line", lines["tools"], "bash ", "rg ", "git ")
	mustContain(t, "the workspace line", lines["workspace"], fmt.Sprintf("belong to you (%d:%d)", os.Getuid(), os.Getgid()))
	mustContain(t, "the git line", lines["git"], "its own copy of "+filepath.Join(ws, ".git"))
	mustContain(t, "the container line", lines["container"], "/tmp limited to 1g")
	if strings.Contains(res.stdout, "test-key") || strings.Contains(res.stderr, "test-key") {
		t.Error("the key was printed")
	}
	var sawModels bool
	for _, r := range srv.Requests() {
		if r.Method == "GET" && r.Path == "/v1/models" && r.Header.Get("x-api-key") == "test-key" {
			sawModels = true
		}
	}
	if !sawModels {
		t.Error("the endpoint was not asked for its models with the key")
	}
	if matches, _ := filepath.Glob(filepath.Join(ws, ".shiro-doctor-*")); len(matches) > 0 {
		t.Errorf("left behind: %v", matches)
	}
	if matches, _ := filepath.Glob(filepath.Join(ws, ".git", "hooks", ".shiro-doctor-*")); len(matches) > 0 {
		t.Errorf("left behind: %v", matches)
	}
}

func TestDoctorReportsEachFailure(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("busybox is missing (make deps installs busybox-static)")
		}
		t.Skip("no busybox")
	}
	tiny := "shiro-test-nogit:" + strconv.Itoa(os.Getpid())
	importTinyImage(t, api, busybox, tiny)
	srv := fakemodel.New(t)

	tests := []struct {
		name    string
		env     func(t *testing.T) []string
		args    []string
		failing string // the check that fails
		want    []string
		passing []string
	}{
		{
			name:    "engine unreachable",
			env:     func(t *testing.T) []string { return append(doctorEnv(t, srv, "k"), "DOCKER_HOST=tcp://127.0.0.1:1") },
			failing: "engine",
			want:    []string{"DOCKER_HOST=tcp://127.0.0.1:1", "--no-sandbox"},
			passing: []string{"key", "endpoint"},
		},
		{
			name:    "image without git",
			env:     func(t *testing.T) []string { return doctorEnv(t, srv, "k") },
			args:    []string{"--image", tiny},
			failing: "tools",
			want:    []string{"lacks bash, rg, git", "fix: install them in the image"},
			passing: []string{"engine", "image", "workspace", "key", "endpoint"},
		},
		{
			name:    "missing key",
			env:     func(t *testing.T) []string { return doctorEnv(t, srv, "") },
			failing: "key",
			want:    []string{"anthropic: no API key", "fix: Set ANTHROPIC_API_KEY"},
			passing: []string{"engine", "image", "tools", "workspace", "endpoint"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws := testenv.Workspace(t, api)
			res := shiro(t, ws, tc.env(t), append(tc.args, "doctor")...)
			if res.code != 1 {
				t.Errorf("exit %d, want 1\n%s\n%s", res.code, res.stdout, res.stderr)
			}
			lines := doctorLines(t, res.stdout)
			if !strings.HasPrefix(lines[tc.failing], "✗") {
				t.Errorf("%s: %q, want ✗\n%s", tc.failing, lines[tc.failing], res.stdout)
			}
			mustContain(t, "the "+tc.failing+" line", lines[tc.failing], tc.want...)
			for _, name := range tc.passing {
				if !strings.HasPrefix(lines[name], "✓") {
					t.Errorf("%s: %q, want ✓\n%s", name, lines[name], res.stdout)
				}
			}
		})
	}
}

func TestDoctorSaysWhatProtectionIsMissing(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	img := testenv.RequireImage(t, api)
	srv := fakemodel.New(t)

	t.Run("a symlinked .git", func(t *testing.T) {
		t.Parallel()
		ws := testenv.Workspace(t, api)
		other := t.TempDir()
		if out, err := exec.Command("git", "init", "-q", other).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		if err := os.Symlink(filepath.Join(other, ".git"), filepath.Join(ws, ".git")); err != nil {
			t.Fatal(err)
		}
		res := shiro(t, ws, doctorEnv(t, srv, "k"), "doctor", "--no-mcp")
		if res.code != 1 {
			t.Errorf("exit %d, want 1\n%s", res.code, res.stdout)
		}
		mustContain(t, "the output", res.stdout, "✗", ".git: it is a symlink", "--no-sandbox")
	})

	t.Run("another container with the workspace mounted", func(t *testing.T) {
		t.Parallel()
		ws := testenv.Workspace(t, api)
		if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		// As an older shiro left it: the workspace mounted writable,
		// .git and all, still running.
		c, err := api.ContainerCreate(t.Context(), client.ContainerCreateOptions{
			Config:     &container.Config{Image: img, Cmd: []string{"sleep", "600"}, Labels: map[string]string{"dev.shiro.managed": "true", "dev.shiro.workspace": ws, "dev.shiro.config": "old"}},
			HostConfig: &container.HostConfig{Binds: []string{ws + ":" + ws}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { api.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true}) })
		if _, err := api.ContainerStart(t.Context(), c.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		res := shiro(t, ws, doctorEnv(t, srv, "k"), "doctor", "--no-mcp")
		if res.code != 1 {
			t.Errorf("exit %d, want 1\n%s", res.code, res.stdout)
		}
		in, err := api.ContainerInspect(t.Context(), c.ID, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lines := doctorLines(t, res.stdout)
		mustContain(t, "the others line", lines["others"], "✗", "other containers can write the workspace", strings.TrimPrefix(in.Container.Name, "/"))
		for _, name := range []string{"container", "helper", "git", "repositories"} {
			if !strings.HasPrefix(lines[name], "✓") {
				t.Errorf("%s: %q", name, lines[name])
			}
		}
	})
}
