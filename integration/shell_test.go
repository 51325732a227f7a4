package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/testenv"
)

// requireTmux skips without tmux, except under CI where it must be there.
func requireTmux(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tmux")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("tmux is missing (make deps installs it)")
		}
		t.Skip("no tmux")
	}
	return p
}

// tmuxSession starts cmd in a detached tmux session of the given size, on a
// private server socket, and kills it when the test ends.
type tmuxSession struct {
	t      *testing.T
	socket string
	name   string
}

func newTmux(t *testing.T, dir string, width, height int, env []string, cmd ...string) *tmuxSession {
	t.Helper()
	tmux := requireTmux(t)
	s := &tmuxSession{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock"), name: "shiro"}
	args := []string{"-S", s.socket, "new-session", "-d", "-s", s.name, "-x", strconv.Itoa(width), "-y", strconv.Itoa(height), "-c", dir}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(args, cmd...)
	if out, err := exec.Command(tmux, args...).CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", s.socket, "kill-server").Run() })
	return s
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// keys types literal text, then presses Enter when enter is set.
func (s *tmuxSession) keys(text string, enter bool) {
	s.t.Helper()
	s.run("send-keys", "-t", s.name, "-l", text)
	if enter {
		s.run("send-keys", "-t", s.name, "Enter")
	}
}

func (s *tmuxSession) screen() string { return s.run("capture-pane", "-p", "-t", s.name) }

// waitFor polls the screen until it contains want.
func (s *tmuxSession) waitFor(want string, within time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		scr := s.screen()
		if strings.Contains(scr, want) {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %q:\n%s", want, scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitForText polls the screen, its lines joined, until it holds every
// want: a frame drawn before the UI learnt the terminal's size may cut a
// wrapped line that the next frame shows whole.
func (s *tmuxSession) waitForText(within time.Duration, wants ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		scr := strings.ReplaceAll(s.screen(), "\n", "")
		missing := ""
		for _, w := range wants {
			if !strings.Contains(scr, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %q:\n%s", missing, scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSandboxShellIsARealTerminal(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	s := newTmux(t, ws, 100, 30, nil, testenv.Binary(t), "sandbox", "shell")
	s.keys("echo answer-$((6*7)); stty size", true)
	s.waitFor("answer-42", 2*time.Minute)
	s.waitFor("30 100", 10*time.Second)
	// Resizes are followed.
	s.run("resize-window", "-t", s.name, "-x", "120", "-y", "40")
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.keys("stty size", true)
		if strings.Contains(s.screen(), "40 120") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resize did not reach the shell:\n%s", s.screen())
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.keys("id -u; pwd", true)
	s.waitFor(ws, 10*time.Second)
	s.waitFor(strconv.Itoa(os.Getuid()), 10*time.Second)
}

func TestSandboxLsJSON(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	if res := shiro(t, ws, nil, "tool", "bash", bashJSON("true", 0)); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	res := shiro(t, ws, nil, "sandbox", "ls", "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &list); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, res.stdout)
	}
	for _, c := range list {
		if c["workspace"] != ws {
			continue
		}
		for _, k := range []string{"container", "image", "state", "created", "lastUsed"} {
			if c[k] == nil || c[k] == "" {
				t.Errorf("%s missing in %v", k, c)
			}
		}
		if c["state"] != "running" {
			t.Errorf("state %v", c["state"])
		}
		return
	}
	t.Fatalf("the workspace's container is not listed:\n%s", res.stdout)
}

func TestStartupSweepRemovesStoppedOrphans(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.RemoveContainers(t, api, gone) })
	if res := shiro(t, gone, nil, "tool", "bash", bashJSON("true", 0)); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	shiro(t, gone, nil, "sandbox", "stop")
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	// Any sandbox start elsewhere sweeps it.
	other := testenv.Workspace(t, api)
	if res := shiro(t, other, nil, "tool", "bash", bashJSON("true", 0)); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if n := len(testenv.ContainerIDs(t, api, gone)); n != 0 {
		t.Errorf("the stopped container of a deleted workspace survived the start-up sweep")
	}
}
