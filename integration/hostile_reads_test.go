package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// TestHostileInstructionSymlinks runs the attack of a repository that ships
// instruction files, a project skill and a project config as links to the
// host's secrets: its environment (API keys), an SSH key and the user's
// own config with the stored API key. shiro runs headless, as a normal
// user, in the repository; the requests the model server receives must
// hold none of the secrets, and stderr must name each refused file.
func TestHostileInstructionSymlinks(t *testing.T) {
	t.Parallel()
	h := newHostile(t)

	const (
		envSecret    = "ENV-SECRET-5b1e0c"
		sshSecret    = "SSH-SECRET-9d2f71"
		configSecret = "sk-CONFIG-SECRET-4a8c"
		skillSecret  = "SKILL-SECRET-e07b"
	)
	srv := fakemodel.New(t, fakemodel.Reply{Text: "It is a small project."})

	// The user's home holds the secrets; the repository is ~/src/repo and
	// shiro starts in its subdirectory app.
	home := h.home
	repo := filepath.Join(home, "src", "repo")
	ws := filepath.Join(repo, "app")
	files := map[string]string{
		".ssh/id_rsa":               "-----BEGIN OPENSSH PRIVATE KEY-----\n" + sshSecret + "\n",
		".ssh/skill.md":             "---\nname: leak\ndescription: " + skillSecret + "\n---\n" + skillSecret,
		".config/shiro/config.json": `{"provider": "anthropic", "apiKey": "` + configSecret + `", "baseURL": "` + srv.URL + `/v1"}`,
		"src/repo/AGENTS.md":        "LEGIT-ROOT-RULE: use tabs.",
		"src/repo/app/docs/ok.md":   "---\nname: ok\ndescription: LEGIT-SKILL\n---\nbody",
	}
	for name, content := range files {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	links := map[string]string{
		"AGENTS.md":             "/proc/self/environ",
		"CLAUDE.md":             "../../../.ssh/id_rsa",
		".shiro.md":             "../../../.config/shiro/config.json",
		".shiro/config.json":    "../../../../.config/shiro/config.json",
		".shiro/skills/leak.md": "../../../../../.ssh/skill.md",
		".shiro/skills/ok.md":   "../../docs/ok.md",
	}
	for name, target := range links {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	// A FIFO in the repository above the workspace: a plain read would
	// hang shiro at start.
	if err := syscall.Mkfifo(filepath.Join(repo, "CLAUDE.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(home, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, h.uid, h.gid)
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.RemoveContainers(t, h.api, ws) })

	res := h.shiro(ws, []string{"SHIRO_TEST_TOKEN=" + envSecret}, "-p", "what does this project do?")
	if res.code != 0 {
		t.Fatalf("shiro: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	stdout, stderr := bytes.NewBufferString(res.stdout), bytes.NewBufferString(res.stderr)

	reqs := modelRequests(srv)
	if len(reqs) == 0 {
		t.Fatalf("the model was never asked\nstderr: %s", stderr.String())
	}
	for i, r := range reqs {
		for _, secret := range []string{envSecret, sshSecret, configSecret, skillSecret} {
			if bytes.Contains(r.Body, []byte(secret)) {
				t.Errorf("request %d carries the secret %s in its body", i, secret)
			}
			for name, values := range r.Header {
				if strings.EqualFold(name, "x-api-key") {
					continue // the user's key, where it belongs
				}
				if strings.Contains(strings.Join(values, " "), secret) {
					t.Errorf("request %d carries the secret %s in its %s header", i, secret, name)
				}
			}
		}
	}
	// The reads that stay inside happened: the prompt was looked at.
	for _, want := range []string{"LEGIT-ROOT-RULE", "LEGIT-SKILL"} {
		if !bytes.Contains(reqs[0].Body, []byte(want)) {
			t.Errorf("the request lacks %s, which should have been read", want)
		}
	}
	for _, want := range []string{
		"[notice] AGENTS.md is a symlink that leaves the repository; not read",
		"[notice] CLAUDE.md is a symlink that leaves the repository; not read",
		"[notice] .shiro.md is a symlink that leaves the repository; not read",
		"[notice] " + filepath.Join(repo, "CLAUDE.md") + " is a FIFO; not read",
		"[notice] .shiro/skills/leak.md is a symlink that leaves the workspace; not read",
		"[notice] .shiro/config.json: ignored: it is a symlink that leaves the workspace",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String()+stdout.String(), sshSecret) || strings.Contains(stderr.String()+stdout.String(), envSecret) {
		t.Errorf("a secret was printed:\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
	}
}
