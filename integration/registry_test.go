package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/registrytest"
	"github.com/shiroagent/shiro/integration/testenv"
)

// privateRegistry is a registry with one account and the sandbox image
// pushed to it (and untagged locally), and a normal user to run shiro as.
type privateRegistry struct {
	h        *hostile
	api      *client.Client
	reg      *registrytest.Registry
	ref      string
	user, pw string
}

func newPrivateRegistry(t *testing.T, tls bool) *privateRegistry {
	t.Helper()
	h := newHostile(t)
	img := testenv.RequireImage(t, h.api)
	p := &privateRegistry{h: h, api: h.api, user: "teamuser", pw: token(t, "registry-pw")}
	p.reg = registrytest.Start(t, registrytest.Options{User: p.user, Password: p.pw, TLS: tls})
	p.ref = registrytest.Push(t, h.api, p.reg, img, "team/dev:"+token(t, "tag"))
	return p
}

// dockerConfig writes a docker config directory the user owns and
// returns the environment that points shiro at it.
func (p *privateRegistry) dockerConfig(name string, cfg map[string]any) []string {
	p.h.t.Helper()
	dir := p.h.dir(name, 0o700)
	b, _ := json.Marshal(cfg)
	f := filepath.Join(dir, "config.json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		p.h.t.Fatal(err)
	}
	if err := os.Chown(f, p.h.uid, p.h.gid); err != nil {
		p.h.t.Fatal(err)
	}
	return []string{"DOCKER_CONFIG=" + dir}
}

// auths is a config with the account in auths (password as given).
func (p *privateRegistry) auths(password string) map[string]any {
	enc := base64.StdEncoding.EncodeToString([]byte(p.user + ":" + password))
	return map[string]any{"auths": map[string]any{p.reg.Addr: map[string]string{"auth": enc}}}
}

// helper puts docker-credential-NAME on a PATH of its own: it answers
// get for the registry with the account (fail: with an error), and logs
// every call. It returns the PATH entry and the log file.
func (p *privateRegistry) helper(name string, fail bool) (pathEnv, log string) {
	p.h.t.Helper()
	dir := p.h.dir("bin-"+name, 0o755)
	logDir := p.h.dir("log-"+name, 0o700)
	log = filepath.Join(logDir, "calls")
	answer := fmt.Sprintf(`printf '{"ServerURL":"%%s","Username":"%s","Secret":"%s"}' "$url"`, p.user, p.pw)
	if fail {
		answer = `echo "the store is broken"; exit 1`
	}
	script := fmt.Sprintf(`#!/bin/sh
read -r url
echo "$1 $url" >> '%s'
case "$1 $url" in
"get %s") %s;;
*) echo "credentials not found in native keychain"; exit 1;;
esac
`, log, p.reg.Addr, answer)
	if err := os.WriteFile(filepath.Join(dir, "docker-credential-"+name), []byte(script), 0o755); err != nil {
		p.h.t.Fatal(err)
	}
	return dir, log
}

// pullAsUser runs `shiro image pull` as the user and checks the image
// arrived; the local copy goes again afterwards.
func (p *privateRegistry) pullAsUser(t *testing.T, env []string) result {
	t.Helper()
	h := p.h.with(t)
	res := h.shiro(h.workspace("ws-"+strings.ReplaceAll(t.Name(), "/", "-")), env, "image", "pull", p.ref)
	p.noSecret(t, "the pull's output", res.stdout+res.stderr)
	if res.code != 0 {
		t.Fatalf("shiro image pull %s: exit %d\n%s\n%s", p.ref, res.code, res.stdout, res.stderr)
	}
	if !strings.HasPrefix(res.stdout, p.ref+" sha256:") {
		t.Errorf("stdout %q, want the reference and the image id", res.stdout)
	}
	if _, err := p.api.ImageInspect(context.Background(), p.ref); err != nil {
		t.Errorf("the image is not there after the pull: %v", err)
	}
	registrytest.RemoveLocal(t, p.api, p.ref)
	return res
}

// removeBuilt removes ws's containers and then the images shiro built
// for it.
func (p *privateRegistry) removeBuilt(t *testing.T, ws string) {
	t.Helper()
	testenv.RemoveContainers(t, p.api, ws)
	for _, img := range projectImages(t, p.api, ws) {
		if _, err := p.api.ImageRemove(context.Background(), img.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
			t.Errorf("remove image %s: %v", img.ID, err)
		}
	}
}

// noSecret fails when text holds the password or the base64 of the
// account.
func (p *privateRegistry) noSecret(t *testing.T, what, text string) {
	t.Helper()
	enc := base64.StdEncoding.EncodeToString([]byte(p.user + ":" + p.pw))
	if strings.Contains(text, p.pw) || strings.Contains(text, enc) {
		t.Errorf("%s shows the registry password:\n%s", what, text)
	}
}

// noSecretIn fails when a file under dir holds the password.
func (p *privateRegistry) noSecretIn(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		p.noSecret(t, path, string(b))
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s: %v", dir, err)
	}
	if n == 0 {
		t.Errorf("%s holds no files to look at", dir)
	}
}

func TestPrivateRegistryPull(t *testing.T) {
	t.Parallel()
	p := newPrivateRegistry(t, false)

	t.Run("auths in the config file", func(t *testing.T) {
		p.pullAsUser(t, p.dockerConfig("docker-auths", p.auths(p.pw)))
	})
	t.Run("the credsStore helper on PATH", func(t *testing.T) {
		bin, log := p.helper("teamstore", false)
		env := append(p.dockerConfig("docker-store", map[string]any{"credsStore": "teamstore"}), "PATH="+bin+":/usr/local/bin:/usr/bin:/bin")
		p.pullAsUser(t, env)
		if calls, _ := os.ReadFile(log); !strings.Contains(string(calls), "get "+p.reg.Addr) {
			t.Errorf("the helper was not asked for %s: %q", p.reg.Addr, calls)
		}
	})
	t.Run("credHelpers for the registry, before a broken credsStore", func(t *testing.T) {
		bin, log := p.helper("teamhelper", false)
		broken, brokenLog := p.helper("broken", true)
		cfg := map[string]any{"credsStore": "broken", "credHelpers": map[string]string{p.reg.Addr: "teamhelper"}}
		env := append(p.dockerConfig("docker-helpers", cfg), "PATH="+bin+":"+broken+":/usr/local/bin:/usr/bin:/bin")
		p.pullAsUser(t, env)
		if calls, _ := os.ReadFile(log); !strings.Contains(string(calls), "get "+p.reg.Addr) {
			t.Errorf("the helper was not asked for %s: %q", p.reg.Addr, calls)
		}
		if calls, err := os.ReadFile(brokenLog); err == nil {
			t.Errorf("credsStore was asked although credHelpers names the registry's: %q", calls)
		}
	})
	t.Run("a wrong password names the registry, the config file and docker login", func(t *testing.T) {
		h := p.h.with(t)
		env := p.dockerConfig("docker-wrong", p.auths("not-the-password"))
		res := h.shiro(h.workspace("ws-wrong"), env, "image", "pull", p.ref)
		p.noSecret(t, "the error", res.stdout+res.stderr)
		if res.code == 0 {
			t.Fatalf("the pull worked with a wrong password:\n%s", res.stderr)
		}
		cfgFile := filepath.Join(strings.TrimPrefix(env[0], "DOCKER_CONFIG="), "config.json")
		mustContain(t, "the error", res.stderr, "the registry "+p.reg.Addr+" refused", "auths in "+cfgFile, "docker login "+p.reg.Addr)
		if strings.Contains(res.stderr, "not-the-password") {
			t.Errorf("the error shows the wrong password:\n%s", res.stderr)
		}
	})
	t.Run("no credentials say none were found", func(t *testing.T) {
		h := p.h.with(t)
		env := p.dockerConfig("docker-none", map[string]any{})
		res := h.shiro(h.workspace("ws-none"), env, "image", "pull", p.ref)
		if res.code == 0 {
			t.Fatalf("the pull worked without credentials:\n%s", res.stderr)
		}
		mustContain(t, "the error", res.stderr, "the registry "+p.reg.Addr+" refused", "none found in ", "docker login "+p.reg.Addr)
	})
}

func TestPrivateRegistryBehindTLS(t *testing.T) {
	t.Parallel()
	p := newPrivateRegistry(t, true)
	env := p.dockerConfig("docker-tls", p.auths(p.pw))
	p.pullAsUser(t, env)

	// It is the test's CA that the engine trusts: without it the pull
	// fails on the certificate (no fallback to plain HTTP).
	ca := filepath.Join(registrytest.CertsDir, p.reg.Addr, "ca.crt")
	if err := os.Rename(ca, ca+".off"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(ca+".off", ca)
	h := p.h
	res := h.shiro(h.workspace("ws-no-ca"), env, "image", "pull", p.ref)
	if res.code == 0 || !strings.Contains(res.stderr, "certificate") {
		t.Errorf("without the CA: exit %d\n%s", res.code, res.stderr)
	}
}

// A session whose image is in the private registry: pulled with the
// credentials, which reach neither the sandbox, the output nor the
// session's record.
func TestPrivateRegistrySessionKeepsTheSecret(t *testing.T) {
	t.Parallel()
	p := newPrivateRegistry(t, false)
	h := p.h
	ws := h.workspace("ws-session")
	home := h.dir("shiro-home", 0o700)
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON("env; cat /proc/1/environ | tr '\\0' '\\n'; echo in-the-private-image", 0)}}},
		fakemodel.Reply{Text: "Done."},
	)
	env := append(p.dockerConfig("docker-session", p.auths(p.pw)), "SHIRO_HOME="+home,
		"SHIRO_PROVIDER=anthropic", "ANTHROPIC_API_KEY=test-key", "SHIRO_BASE_URL="+srv.URL+"/v1")
	res := h.shiro(ws, env, "-p", "--yolo", "--image", p.ref, "run env in the sandbox")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "stderr", res.stderr, "pulling "+p.ref)
	var sawOutput bool
	for _, r := range srv.Requests() {
		sawOutput = sawOutput || strings.Contains(string(r.Body), "in-the-private-image")
		p.noSecret(t, "a model request (the sandbox's environment)", string(r.Body))
	}
	if !sawOutput {
		t.Error("the model never saw the command's output")
	}
	p.noSecret(t, "the output", res.stdout+res.stderr)
	p.noSecretIn(t, home)
}

// A project Dockerfile FROM the private image builds with the classic
// builder, which gets the registry's credentials.
func TestPrivateRegistryProjectDockerfile(t *testing.T) {
	t.Parallel()
	p := newPrivateRegistry(t, false)
	h := p.h
	ws := h.workspace("ws-build")
	t.Cleanup(func() { p.removeBuilt(t, ws) })
	marker := token(t, "built")
	files := map[string]string{
		"Dockerfile":         "FROM " + p.ref + "\nRUN echo " + marker + " > /opt/built\n",
		".shiro/config.json": `{"sandbox": {"image": "Dockerfile"}}`,
	}
	for name, content := range files {
		f := filepath.Join(ws, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(filepath.Dir(f), h.uid, h.gid)
		os.Chown(f, h.uid, h.gid)
	}
	env := p.dockerConfig("docker-build", p.auths(p.pw))
	res := h.shiro(ws, env, "--trust-project", "tool", "bash", bashJSON("cat /opt/built", 0))
	p.noSecret(t, "the build's output", res.stdout+res.stderr)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	mustContain(t, "the result", res.stdout, "exit: 0", marker)
	mustContain(t, "the progress", res.stderr, "building shiro-project:", "Step 1/")

	// Without credentials the build's error names the registry.
	registrytest.RemoveLocal(t, p.api, p.ref)
	p.removeBuilt(t, ws)
	res = h.shiro(ws, p.dockerConfig("docker-build-none", map[string]any{}), "--trust-project", "tool", "bash", bashJSON("true", 0))
	if res.code == 0 {
		t.Fatalf("the build worked without credentials:\n%s", res.stderr)
	}
	mustContain(t, "the error", res.stderr, "the registry "+p.reg.Addr+" refused", "docker login "+p.reg.Addr)
}
