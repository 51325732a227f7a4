package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

// engineSocket is the local engine's Unix socket.
func engineSocket(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		if p, ok := strings.CutPrefix(h, "unix://"); ok {
			return p
		}
		t.Fatalf("DOCKER_HOST=%s: the remote-engine tests need the local engine's socket", h)
	}
	return "/var/run/docker.sock"
}

// tcpEngine serves the local engine on a TCP port of 127.0.0.1, as a
// remote engine would be reached (shiro cannot tell it is on this
// machine, and must not bind-mount the workspace). It stops with the test.
func tcpEngine(t *testing.T) string {
	t.Helper()
	sock := engineSocket(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				u, err := net.Dial("unix", sock)
				if err != nil {
					return
				}
				defer u.Close()
				track(c, true)
				track(u, true)
				defer track(c, false)
				defer track(u, false)
				done := make(chan struct{}, 2)
				go func() { io.Copy(u, c); u.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
				go func() { io.Copy(c, u); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
				<-done
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "tcp://" + ln.Addr().String()
}

// remoteTurn is a headless turn that writes and runs something.
func remoteTurn() []fakemodel.Reply {
	return []fakemodel.Reply{
		{ToolCalls: []fakemodel.ToolCall{{ID: "w1", Name: "write_file", Input: `{"path":"a.txt","content":"remote\n"}`}}},
		{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON("echo ran > ran.txt", 0)}}},
		{Text: "Done remotely."},
	}
}

// checkRemoteRun checks a headless run against a remote engine: copy mode
// chosen by itself, nothing written in the workspace before --apply, then
// exactly the turn's files after.
func checkRemoteRun(t *testing.T, h *hostile, ws string, env []string) {
	t.Helper()
	h.writeOwned(filepath.Join(ws, "a.txt"), "local\n", 0o644)
	srv := fakemodel.New(t, remoteTurn()...)
	env = append(env, providers[0].env(srv.URL)...)
	res := h.shiro(ws, env, "-p", "--yolo", "write it")
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stderr, "is not on this machine: the sandbox works on a copy of the workspace") {
		t.Errorf("the run does not say it works on a copy:\n%s", res.stderr)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(data) != "local\n" {
		t.Errorf("the remote sandbox wrote the workspace: %q", data)
	}
	noWorkspaceMount(t, h.api, ws)
	srv.Push(fakemodel.Reply{Text: "Nothing more."})
	if res := h.shiro(ws, env, "-c", "-p", "--yolo", "--apply", "apply it"); res.code != 0 || !strings.Contains(res.stderr, "[applied] 2 files changed: 1 created, 1 modified") {
		t.Fatalf("--apply: exit %d\n%s", res.code, res.stderr)
	}
	for name, want := range map[string]string{"a.txt": "remote\n", "ran.txt": "ran\n"} {
		if data, _ := os.ReadFile(filepath.Join(ws, name)); string(data) != want {
			t.Errorf("%s = %q after --apply, want %q", name, data, want)
		}
	}
	h.ownedByUser(ws)
}

func TestRemoteEngineOverTCP(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("ws")
	checkRemoteRun(t, h, ws, []string{"DOCKER_HOST=" + tcpEngine(t)})
}

func TestRemoteEngineFromADockerContext(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("ws")
	cfg := h.dir("docker-config", 0o700)
	sum := sha256.Sum256([]byte("far"))
	meta := filepath.Join(cfg, "contexts", "meta", hex.EncodeToString(sum[:]), "meta.json")
	h.writeOwned(meta, `{"Name":"far","Metadata":{},"Endpoints":{"docker":{"Host":"`+tcpEngine(t)+`","SkipTLSVerify":false}}}`, 0o600)
	h.writeOwned(filepath.Join(cfg, "config.json"), `{"currentContext":"far"}`, 0o600)
	checkRemoteRun(t, h, ws, []string{"DOCKER_HOST=", "DOCKER_CONFIG=" + cfg})
}

// TestRemoteEngineOverSSH reaches the engine through a real sshd on
// 127.0.0.1 (the user's key in an agent), as DOCKER_HOST=ssh://... does
// on a laptop: every connection is `docker system dial-stdio` over ssh.
// sshConfigMu serializes the runs of TestRemoteEngineOverSSH (go test
// -count runs them in parallel): each writes the test user's own
// ~/.ssh/config, which ssh reads from the passwd home whatever HOME says.
var sshConfigMu sync.Mutex

func TestRemoteEngineOverSSH(t *testing.T) {
	t.Parallel()
	sshConfigMu.Lock()
	t.Cleanup(sshConfigMu.Unlock)
	h := newHostile(t)
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/sshd"); statErr != nil {
			t.Fatalf("sshd is missing (make deps installs openssh-server): %v", err)
		}
		sshd = "/usr/sbin/sshd"
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatalf("the docker CLI is missing (dial-stdio runs it on the engine's side): %v", err)
	}
	ws := h.workspace("ws")
	keys := h.dir("ssh", 0o700)
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(keys, "host"))
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(keys, "user"))
	pub, err := os.ReadFile(filepath.Join(keys, "user.pub"))
	if err != nil {
		t.Fatal(err)
	}
	h.writeOwned(filepath.Join(keys, "authorized_keys"), string(pub), 0o600)
	for _, f := range []string{"user", "user.pub"} {
		os.Chown(filepath.Join(keys, f), h.uid, h.gid)
	}
	// useradd leaves the account locked ("!"), which sshd refuses even for
	// keys; "*" is no password but not locked.
	// Over ssh the user's groups are /etc/group's: it needs docker's to
	// reach the engine, as on a machine where it runs docker.
	if out, err := exec.Command("usermod", "-p", "*", "-a", "-G", "docker", u0(t, h)).CombinedOutput(); err != nil {
		t.Fatalf("usermod: %v\n%s", err, out)
	}
	port := freePort(t)
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := user.LookupId(fmt.Sprint(h.uid))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := exec.CommandContext(ctx, sshd, "-D", "-e", "-f", "/dev/null",
		"-o", "ListenAddress=127.0.0.1", "-o", "Port="+port, "-o", "HostKey="+filepath.Join(keys, "host"),
		"-o", "AuthorizedKeysFile="+filepath.Join(keys, "authorized_keys"), "-o", "StrictModes=no", "-o", "UsePAM=no",
		"-o", "PasswordAuthentication=no", "-o", "AllowUsers="+u.Username, "-o", "PidFile=none")
	var sshdLog strings.Builder
	d.Stderr = &sshdLog
	if err := d.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = d.Wait()
		if t.Failed() {
			t.Logf("sshd:\n%s", sshdLog.String())
		}
	})
	waitPort(t, "127.0.0.1:"+port)
	// The client's host key check and identity come from the user's own
	// ssh configuration (its passwd home, as ssh reads it).
	hostPub, err := os.ReadFile(filepath.Join(keys, "host.pub"))
	if err != nil {
		t.Fatal(err)
	}
	h.writeOwned(filepath.Join(keys, "known_hosts"), "[127.0.0.1]:"+port+" "+string(hostPub), 0o600)
	sshHome := filepath.Join(u.HomeDir, ".ssh")
	if err := os.MkdirAll(sshHome, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(u.HomeDir, h.uid, h.gid)
	os.Chown(sshHome, h.uid, h.gid)
	conf := filepath.Join(sshHome, "config")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("Host 127.0.0.1\n  IdentityFile %s\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
		filepath.Join(keys, "user"), filepath.Join(keys, "known_hosts"))), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(conf, h.uid, h.gid)
	t.Cleanup(func() { os.Remove(conf) })
	checkRemoteRun(t, h, ws, []string{"DOCKER_HOST=ssh://" + u.Username + "@127.0.0.1:" + port})
}

// u0 is the test user's name.
func u0(t *testing.T, h *hostile) string {
	t.Helper()
	u, err := user.LookupId(fmt.Sprint(h.uid))
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func waitPort(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
