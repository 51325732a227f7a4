package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
	"github.com/shiroagent/shiro/sandbox/docker"
)

// The trust suite: a repository's project config asks to start an MCP
// server and to build its image. As a normal user, headless, nothing asked
// happens until the workspace is trusted.

// builtFrom lists the images shiro built from source (a Dockerfile or
// devcontainer.json), and removes them when the test ends.
func builtFrom(t *testing.T, api *client.Client, source string) []string {
	t.Helper()
	f := client.Filters{}.Add("label", docker.LabelSource+"="+source)
	list, err := api.ImageList(context.Background(), client.ImageListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, img := range list.Items {
		ids = append(ids, img.ID)
	}
	return ids
}

func removeProjectImages(t *testing.T, api *client.Client, ws, source string) {
	t.Cleanup(func() {
		testenv.RemoveContainers(t, api, ws) // an image in use stays
		for _, id := range builtFrom(t, api, source) {
			_, _ = api.ImageRemove(context.Background(), id, client.ImageRemoveOptions{Force: true, PruneChildren: true})
		}
	})
}

// writeOwned writes a file in a workspace the user owns.
func (h *hostile) writeOwned(path, content string, mode os.FileMode) {
	h.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		h.t.Fatal(err)
	}
	for p := path; strings.HasPrefix(p, h.base+"/"); p = filepath.Dir(p) {
		os.Chown(p, h.uid, h.gid)
	}
}

// trustRepo makes a repository whose project config declares the MCP
// server srv (it writes started-<marker> in the workspace, then serves)
// and the image (image names a Dockerfile or "devcontainer").
func (h *hostile) trustRepo(ws, marker, image string) {
	h.t.Helper()
	bin := filepath.Join(ws, ".bin", "mcpecho")
	h.writeOwned(bin, "", 0o755)
	copyFile(h.t, mcpecho(h.t), bin, 0o755)
	cfg := fmt.Sprintf(`{"mcpServers": {"srv": {"command": "sh", "args": ["-c", "touch %s/started-%s; exec %s"]}}, "sandbox": {"image": %q}}`,
		ws, marker, bin, image)
	h.writeOwned(filepath.Join(ws, ".shiro", "config.json"), cfg, 0o644)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestTrustHeadless(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	base := testenv.RequireImage(t, h.api)
	dockerfile := fmt.Sprintf("# WS\nFROM %s\nRUN echo built > /built-by-project\n", base)
	for _, c := range []struct {
		name, image, source string
		files               map[string]string
	}{
		{"dockerfile", "./Dockerfile", "Dockerfile", map[string]string{"Dockerfile": dockerfile}},
		{"devcontainer", "devcontainer", ".devcontainer/devcontainer.json", map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
			".devcontainer/Dockerfile":        dockerfile,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := h.with(t)
			ws := h.workspace("trust-" + c.name)
			for name, content := range c.files {
				// The workspace in the file: no earlier run's image fits.
				h.writeOwned(filepath.Join(ws, name), strings.ReplaceAll(content, "WS", ws), 0o644)
			}
			h.trustRepo(ws, "one", c.image)
			source := filepath.Join(ws, c.source)
			removeProjectImages(t, h.api, ws, source)
			// Each run's model looks at the sandbox once (which waits for
			// the image) and answers.
			ask := func(args ...string) result {
				srv := fakemodel.New(t,
					fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "c1", Name: "bash", Input: bashJSON("cat /built-by-project 2>&1; true", 0)}}},
					fakemodel.Reply{Text: "It is a test."})
				return h.shiro(ws, providers[0].env(srv.URL), append([]string{"-p", "--yolo"}, args...)...)
			}

			// Untrusted: nothing starts, nothing is built, each ask is named.
			res := ask("what does this project do?")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			mustContain(t, "stderr", res.stderr,
				"[notice] trust: skipped MCP server srv: sh -c 'touch "+ws+"/started-one; exec "+ws+"/.bin/mcpecho'",
				"[notice] trust: skipped image: build ./"+strings.TrimSuffix(filepath.ToSlash(filepath.Join(filepath.Dir(c.source), "Dockerfile")), "")+"")
			mustContain(t, "stderr", res.stderr, "FROM "+base, "RUN steps run as root inside the build")
			if exists(filepath.Join(ws, "started-one")) {
				t.Error("the untrusted server started")
			}
			if ids := builtFrom(t, h.api, source); len(ids) > 0 || strings.Contains(res.stderr, "building shiro-project") {
				t.Errorf("the untrusted image was built: %v\n%s", ids, res.stderr)
			}
			// doctor reports it and starts nothing either.
			res = h.shiro(ws, nil, "doctor")
			mustContain(t, "doctor", res.stdout, "✓ trust     not trusted")
			if exists(filepath.Join(ws, "started-one")) || len(builtFrom(t, h.api, source)) > 0 {
				t.Error("doctor started the untrusted server or built the image")
			}

			// --trust-project: both happen.
			res = ask("--trust-project", "what does this project do?")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			if strings.Contains(res.stderr, "trust: skipped") {
				t.Errorf("skipped under --trust-project:\n%s", res.stderr)
			}
			if !exists(filepath.Join(ws, "started-one")) {
				t.Errorf("the trusted server did not start:\n%s", res.stderr)
			}
			if len(builtFrom(t, h.api, source)) != 1 {
				t.Errorf("the trusted image was not built:\n%s", res.stderr)
			}
			mustContain(t, "build progress", res.stderr, "build limits: network none")

			// Remembered, then the server's command changes: asked again.
			if res = h.shiro(ws, nil, "trust"); res.code != 0 {
				t.Fatalf("shiro trust: %d %s", res.code, res.stderr)
			}
			h.trustRepo(ws, "two", c.image)
			res = ask("and now?")
			mustContain(t, "stderr", res.stderr,
				"[notice] trust: the project's asks changed since you trusted this workspace:",
				"changed MCP server srv: was sh -c 'touch "+ws+"/started-one;",
				"now sh -c 'touch "+ws+"/started-two;",
				"[notice] trust: skipped MCP server srv")
			if exists(filepath.Join(ws, "started-two")) {
				t.Error("the changed server started without being trusted again")
			}
			// Back to what was trusted: it runs without a flag.
			h.trustRepo(ws, "one", c.image)
			os.Remove(filepath.Join(ws, "started-one"))
			res = ask("once more")
			if strings.Contains(res.stderr, "trust: skipped") || !exists(filepath.Join(ws, "started-one")) {
				t.Errorf("the remembered asks were not trusted:\n%s", res.stderr)
			}
		})
	}
}

// TestTrustBuildIsSandboxed: a trusted project build gets the session's
// network and memory limit.
func TestTrustBuildIsSandboxed(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	base := testenv.RequireImage(t, h.api)

	// A service on the host, reached from a build at the bridge's address.
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("host-secret\n"))
			c.Close()
		}
	}()
	// The default bridge's address on the host (docker0).
	gateway := ""
	if ifc, err := net.InterfaceByName("docker0"); err == nil {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				gateway = ipn.IP.String()
			}
		}
	}
	if gateway == "" {
		t.Fatal("no IPv4 address on docker0, the default bridge")
	}
	port := ln.Addr().(*net.TCPAddr).Port

	t.Run("network", func(t *testing.T) {
		h := h.with(t)
		ws := h.workspace("trust-net")
		h.writeOwned(filepath.Join(ws, "Dockerfile"), fmt.Sprintf("# %s\nFROM %s\nRUN bash -c 'exec 3<>/dev/tcp/%s/%d && cat <&3 > /answer' && grep host-secret /answer\n", ws, base, gateway, port), 0o644)
		h.writeOwned(filepath.Join(ws, ".shiro", "config.json"), `{"sandbox": {"image": "./Dockerfile"}}`, 0o644)
		removeProjectImages(t, h.api, ws, filepath.Join(ws, "Dockerfile"))
		res := h.shiro(ws, nil, "--trust-project", "--network", "none", "tool", "bash", bashJSON("cat /answer", 0))
		if res.code == 0 {
			t.Fatalf("the build fetched from the host under --network none:\n%s\n%s", res.stdout, res.stderr)
		}
		mustContain(t, "stderr", res.stderr, "build limits: network none", "the build has no network")
		if len(builtFrom(t, h.api, filepath.Join(ws, "Dockerfile"))) > 0 {
			t.Error("the failed build left an image tagged")
		}
		// The same build with the network reaches the service: the
		// failure above is the network's.
		res = h.shiro(ws, nil, "--trust-project", "--network", "bridge", "tool", "bash", bashJSON("cat /answer", 0))
		mustContain(t, "with the network", res.stdout, "host-secret")
	})

	t.Run("memory", func(t *testing.T) {
		h := h.with(t)
		ws := h.workspace("trust-mem")
		h.writeOwned(filepath.Join(ws, "Dockerfile"), fmt.Sprintf("# %s\nFROM %s\nRUN head -c 400m /dev/zero | tail > /dev/null\n", ws, base), 0o644)
		h.writeOwned(filepath.Join(ws, ".shiro", "config.json"), `{"sandbox": {"image": "./Dockerfile"}}`, 0o644)
		removeProjectImages(t, h.api, ws, filepath.Join(ws, "Dockerfile"))
		res := h.shiro(ws, nil, "--trust-project", "--memory", "128m", "tool", "bash", bashJSON("true", 0))
		if res.code == 0 {
			t.Fatalf("the build allocated past the limit:\n%s", res.stderr)
		}
		mustContain(t, "stderr", res.stderr, "(RUN head -c 400m", "ran past the build's memory limit of 128m")
		if len(builtFrom(t, h.api, filepath.Join(ws, "Dockerfile"))) > 0 {
			t.Error("the failed build left an image tagged")
		}
	})
}

// TestTrustBuildCancels: ctrl-c during a project build ends shiro at once,
// and the build: no container of it goes on running, no image is tagged.
func TestTrustBuildCancels(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	base := testenv.RequireImage(t, h.api)
	ws := h.workspace("trust-cancel")
	token := filepath.Base(h.base)
	h.writeOwned(filepath.Join(ws, "Dockerfile"), fmt.Sprintf("FROM %s\nRUN echo %s && sleep 300\n", base, token), 0o644)
	h.writeOwned(filepath.Join(ws, ".shiro", "config.json"), `{"sandbox": {"image": "./Dockerfile"}}`, 0o644)
	source := filepath.Join(ws, "Dockerfile")
	removeProjectImages(t, h.api, ws, source)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := h.command(ctx, ws, nil, h.bin, "--trust-project", "tool", "bash", bashJSON("true", 0))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), "sleep 300") {
		n, err := stderr.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("the build did not reach its RUN step: %v\n%s", err, seen.String())
		}
	}
	time.Sleep(time.Second) // the step's container runs
	sent := time.Now()
	cmd.Process.Signal(os.Interrupt)
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	err = cmd.Wait()
	took := time.Since(sent)
	if took > 30*time.Second {
		t.Errorf("shiro took %s to end after ctrl-c", took)
	}
	if err == nil {
		t.Error("shiro succeeded after ctrl-c")
	}
	if len(builtFrom(t, h.api, source)) > 0 {
		t.Error("the cancelled build left an image tagged")
	}
	// The step's container is gone (the engine stops the build when its
	// client leaves).
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := h.api.ContainerList(context.Background(), client.ContainerListOptions{All: true})
		if err != nil {
			t.Fatal(err)
		}
		running := ""
		for _, c := range list.Items {
			if strings.Contains(c.Command, token) {
				running = c.ID + " " + string(c.State)
			}
		}
		if running == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the build's step container is still there: %s", running)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestTrustTUIForm: the chat UI asks with a form that lists each command
// line; "no" starts with the default image and no project server; "trust
// and remember" is not asked again.
func TestTrustTUIForm(t *testing.T) {
	t.Parallel()
	api, ws := tuiSetup(t)
	base := testenv.RequireImage(t, api)
	bin := filepath.Join(ws, ".bin", "mcpecho")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, mcpecho(t), bin, 0o755)
	marker := filepath.Join(ws, "started")
	writeJSON(t, filepath.Join(ws, ".shiro", "config.json"), map[string]any{
		"mcpServers": map[string]any{"srv": map[string]any{"command": "sh", "args": []string{"-c", "touch " + marker + "; exec " + bin}}},
		"sandbox":    map[string]any{"image": "./Dockerfile"},
	})
	if err := os.WriteFile(filepath.Join(ws, "Dockerfile"), []byte(fmt.Sprintf("# %s\nFROM %s\nRUN echo built > /built-by-project\n", ws, base)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Instruction files need no trust; the header and /context name them.
	if err := os.WriteFile(filepath.Join(ws, "AGENTS.md"), []byte("Be brief.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	removeProjectImages(t, api, ws, filepath.Join(ws, "Dockerfile"))
	srv := fakemodel.New(t)
	env := append(headlessEnv(t, providers[0], srv.URL), "TERM=xterm-256color") // one SHIRO_HOME for every start
	start := func() *tmuxSession {
		s := newTmux(t, ws, tuiWidth, tuiHeight, env, testenv.Binary(t))
		s.run("set-option", "-t", s.name, "remain-on-exit", "on")
		return s
	}

	// No: the default image, no project server.
	s := start()
	s.waitFor("No (start without them)", time.Minute)
	s.waitForText(10*time.Second, "Trust and remember", "This time only",
		"MCP server srv: sh -c 'touch "+marker+"; exec "+bin+"'",
		"image: build ./Dockerfile FROM "+base, "RUN steps run as root")
	s.press("Enter") // "No" is the default
	scr := s.waitFor("sandbox ready", 2*time.Minute)
	mustContain(t, "the header", scr, "sandbox: "+base)
	s.quit()
	if exists(marker) {
		t.Error("the project's server started after no")
	}
	if ids := builtFrom(t, api, filepath.Join(ws, "Dockerfile")); len(ids) > 0 {
		t.Error("the project's image was built after no")
	}

	// Trust and remember: both happen.
	s = start()
	s.waitFor("No (start without them)", time.Minute)
	s.press("Up")
	s.press("Up")
	s.press("Enter")
	scr = s.waitFor("sandbox ready", 3*time.Minute)
	mustContain(t, "the header", scr, "sandbox: shiro-project:")
	deadline := time.Now().Add(time.Minute)
	for !exists(marker) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !exists(marker) {
		t.Errorf("the trusted server did not start:\n%s", s.screen())
	}
	s.quit()
	if len(builtFrom(t, api, filepath.Join(ws, "Dockerfile"))) != 1 {
		t.Error("the trusted image was not built")
	}

	// Not asked again.
	s = start()
	scr = s.waitFor("sandbox ready", 2*time.Minute)
	if strings.Contains(scr, "Trust and remember") {
		t.Errorf("asked again:\n%s", scr)
	}
	mustContain(t, "the header", scr, "sandbox: shiro-project:", "instructions: AGENTS.md")
	s.keys("/context", true)
	scr = s.waitFor("pruning threshold", 10*time.Second)
	if strings.Count(scr, "instructions: AGENTS.md") < 2 {
		t.Errorf("/context does not name the instruction file:\n%s", scr)
	}
	s.dismiss("pruning threshold")
	s.quit()
}

// sourcingServer makes the project config of a server that runs
// .shiro/srv.sh, which sources .shiro/lib.sh; lib.sh writes
// started-<marker> in the workspace before the server starts.
func sourcingServer(t *testing.T, write func(path, content string, mode os.FileMode), ws, marker string) {
	t.Helper()
	bin := filepath.Join(ws, ".bin", "mcpecho")
	write(bin, "", 0o755)
	copyFile(t, mcpecho(t), bin, 0o755)
	write(filepath.Join(ws, ".shiro", "config.json"), `{"mcpServers": {"srv": {"command": "sh", "args": [".shiro/srv.sh"]}}}`, 0o644)
	write(filepath.Join(ws, ".shiro", "srv.sh"), ". .shiro/lib.sh\nexec .bin/mcpecho\n", 0o644)
	setMarker(write, ws, marker)
}

func setMarker(write func(path, content string, mode os.FileMode), ws, marker string) {
	write(filepath.Join(ws, ".shiro", "lib.sh"), "touch started-"+marker+"\n", 0o644)
}

// TestTrustCoversWhatTheServerRuns: the trust of a server covers the
// script its command line names and the file beside it that the script
// sources. When the sourced file changes after the trust, neither shiro
// -p nor shiro doctor starts the server, and both say what changed, until
// the user trusts again; the chat UI asks before anything starts.
func TestTrustCoversWhatTheServerRuns(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	testenv.RequireImage(t, h.api)
	ws := h.workspace("trust-files")
	sourcingServer(t, h.writeOwned, ws, "one")
	ask := func(args ...string) result {
		srv := fakemodel.New(t, fakemodel.Reply{Text: "It is a test."})
		return h.shiro(ws, providers[0].env(srv.URL), append([]string{"-p", "--yolo"}, args...)...)
	}
	res := h.shiro(ws, nil, "trust")
	if res.code != 0 {
		t.Fatalf("shiro trust: %d %s", res.code, res.stderr)
	}
	mustContain(t, "shiro trust", res.stdout, "also covers the workspace files it may run, as they are now: ", ".shiro/lib.sh", ".shiro/srv.sh")
	if res = ask("what does this project do?"); res.code != 0 || !exists(filepath.Join(ws, "started-one")) {
		t.Fatalf("the trusted server did not start: %d\n%s", res.code, res.stderr)
	}

	// The sandbox, a pull or an attacker edits the sourced file.
	setMarker(h.writeOwned, ws, "two")
	const changed = "changed since you trusted it: .shiro/lib.sh of MCP server srv"
	res = ask("and now?")
	mustContain(t, "stderr", res.stderr,
		"[notice] trust: the project's asks changed since you trusted this workspace:",
		"[notice] trust:   "+changed,
		"[notice] trust: skipped MCP server srv")
	if exists(filepath.Join(ws, "started-two")) {
		t.Fatal("shiro -p started the server after its sourced file changed")
	}
	res = h.shiro(ws, nil, "doctor")
	mustContain(t, "doctor", res.stdout, "not trusted: the project's asks changed since you trusted it", changed)
	if exists(filepath.Join(ws, "started-two")) {
		t.Fatal("shiro doctor started the server after its sourced file changed")
	}

	// Trusted again, it runs.
	if res = h.shiro(ws, nil, "trust"); res.code != 0 {
		t.Fatalf("shiro trust: %d %s", res.code, res.stderr)
	}
	mustContain(t, "shiro trust", res.stdout, "Changed since you last trusted it:", changed)
	if res = ask("once more"); strings.Contains(res.stderr, "trust: skipped") || !exists(filepath.Join(ws, "started-two")) {
		t.Fatalf("the trusted-again server did not start:\n%s", res.stderr)
	}
}

// TestTrustChangedFileAsksInTheChatUI: in the chat UI, a server whose
// script changed since the trust is asked about again, naming the file,
// and answering no starts the session without it.
func TestTrustChangedFileAsksInTheChatUI(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	write := func(p, content string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	sourcingServer(t, write, ws, "one")
	srv := fakemodel.New(t, fakemodel.Reply{Text: "Nothing to do."})
	env := append(headlessEnv(t, providers[0], srv.URL), "TERM=xterm-256color")
	trust := exec.Command(testenv.Binary(t), "trust")
	trust.Dir, trust.Env = ws, append(os.Environ(), env...)
	if out, err := trust.CombinedOutput(); err != nil {
		t.Fatalf("shiro trust: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(ws, ".shiro", "srv.sh"), []byte(". .shiro/lib.sh\n: changed\nexec .bin/mcpecho\n"), 0o644)

	s := newTmux(t, ws, tuiWidth, tuiHeight, env, testenv.Binary(t))
	s.run("set-option", "-t", s.name, "remain-on-exit", "on")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen at the end:\n%s", s.screen())
		}
	})
	s.waitForText(time.Minute, "Changed since you trusted it:", "changed since you trusted it: .shiro/srv.sh of MCP server srv", "> No (start without them)")
	if exists(filepath.Join(ws, "started-one")) {
		t.Fatal("the server started while the question waited")
	}
	s.press("Enter") // "No (start without them)" is the default
	s.waitFor("sandbox ready", 2*time.Minute)
	if exists(filepath.Join(ws, "started-one")) {
		t.Fatal("the server started after the answer no")
	}
	s.quit()
}
