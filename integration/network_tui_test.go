package integration

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// remoteServer starts an HTTP server the policy sees as an ordinary host:
// a container on a Docker network of its own whose subnet is neither
// private, reserved nor this machine's (a /28 of the documentation ranges
// 192.0.2.0/24, 198.51.100.0/24 and 203.0.113.0/24, which nothing on the
// internet uses either). It answers every request with answer. It returns
// the server's address.
func remoteServer(t *testing.T, answer string) string {
	t.Helper()
	n, _ := rand.Int(rand.Reader, big.NewInt(48))
	nets := []string{"192.0.2", "198.51.100", "203.0.113"}
	prefix, low := nets[n.Int64()/16], int(n.Int64()%16)*16
	name := fmt.Sprintf("shiro-egress-test-%d-%d", n.Int64(), time.Now().UnixNano()%100000)
	docker := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	docker("network", "create", "--subnet", fmt.Sprintf("%s.%d/28", prefix, low), name)
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", name).Run() })
	ip := fmt.Sprintf("%s.%d", prefix, low+10)
	script := `use IO::Socket::INET; my $s = IO::Socket::INET->new(LocalPort => 8080, Listen => 5, ReuseAddr => 1) or die "listen: $!";
while (my $c = $s->accept) { while (my $l = <$c>) { last if $l =~ /^\r?$/ } print $c "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n` + answer + `\n"; close $c }`
	id := docker("run", "-d", "--rm", "--network", name, "--ip", ip, "--cap-drop", "ALL", "--entrypoint", "perl", images.Tag(), "-e", script)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", ip+":8080", time.Second)
		if err == nil {
			c.Close()
			return ip
		}
		if time.Now().After(deadline) {
			t.Fatalf("the remote server on %s never answered: %v", ip, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTUIAsksForANewHost: a command connects to a host no rule names; the
// chat UI asks, naming the host, the port and the tool call; "always for
// this project" lets it through and is not asked again in a later session;
// "deny" refuses with the policy's error; /network lists them.
func TestTUIAsksForANewHost(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	requireTmux(t)
	ws := testenv.Workspace(t, api)
	answer := token(t, "from-a-remote-host")
	ip := remoteServer(t, answer)

	first := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "net_b1", Name: "bash", Input: bashJSON("curl -sS -m 100 http://"+ip+":8080/", 0)}}},
		fakemodel.Reply{Text: "Fetched it."},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "net_b2", Name: "bash", Input: bashJSON("curl -sS -m 100 http://"+ip+":8081/; echo denied-exit-$?", 0)}}},
		fakemodel.Reply{Text: "That one was refused."},
	)
	env := append(headlessEnv(t, providers[0], first.URL), "TERM=xterm-256color")
	s := newTmux(t, ws, tuiWidth, tuiHeight, env, testenv.Binary(t), "--yolo")
	s.run("set-option", "-t", s.name, "remain-on-exit", "on")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen at the end:\n%s", s.screen())
		}
	})
	s.waitFor("sandbox ready", 2*time.Minute)
	s.waitFor("network: ask", 5*time.Second)
	s.keys("fetch the page", true)
	scr := s.waitFor("the sandbox wants to connect to "+ip+":8080", 30*time.Second)
	scr = s.waitFor("y allow once | a always for this project | n deny | d always deny", 5*time.Second)
	for _, want := range []string{"host " + ip + ", port 8080", "running now (any process in the sandbox may be the one asking):", "bash: curl -sS -m 100 http://" + ip + ":8080/ (tool call net_b1)",
		"Allow once", "Always allow " + ip + ":8080 for this project", "Deny", "Always deny " + ip + ":8080 for this project"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the form lacks %q:\n%s", want, scr)
		}
	}
	s.keys("a", false)
	s.waitFor("Fetched it.", 30*time.Second)
	if req := modelRequests(first); len(req) < 2 || !strings.Contains(string(req[1].Body), answer) {
		t.Errorf("the command did not get the page through the proxy")
	}

	s.keys("and the other port", true)
	s.waitFor("the sandbox wants to connect to "+ip+":8081", 30*time.Second)
	s.waitFor("y allow once | a always for this project", 5*time.Second)
	s.keys("n", false)
	s.waitFor("That one was refused.", 30*time.Second)
	if req := modelRequests(first); len(req) < 4 || !strings.Contains(string(req[3].Body), "shiro's network policy refused "+ip+":8081 (denied when asked)") {
		t.Errorf("the refusal did not reach the model with the policy's words")
	}

	s.keys("/network", true)
	scr = s.waitFor("2 connections: 1 allowed, 1 denied", 10*time.Second)
	for _, want := range []string{"allow " + ip + ":8080", "(allowed always for this project)", "deny  " + ip + ":8081", "(denied when asked)"} {
		if !strings.Contains(scr, want) {
			t.Errorf("/network lacks %q:\n%s", want, scr)
		}
	}
	s.dismiss("2 connections: 1 allowed, 1 denied")
	s.quit()

	// A later session in the same project is not asked again.
	second := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "net_b3", Name: "bash", Input: bashJSON("curl -sS -m 100 http://"+ip+":8080/", 0)}}},
		fakemodel.Reply{Text: "Fetched it again."},
	)
	env2 := append([]string{env[0]}, providers[0].env(second.URL)...)
	env2 = append(env2, "TERM=xterm-256color")
	s2 := newTmux(t, ws, tuiWidth, tuiHeight, env2, testenv.Binary(t), "--yolo")
	s2.run("set-option", "-t", s2.name, "remain-on-exit", "on")
	s2.waitFor("sandbox ready", 2*time.Minute)
	s2.keys("fetch it again", true)
	scr = s2.waitFor("Fetched it again.", 60*time.Second)
	if strings.Contains(scr, "wants to connect") {
		t.Errorf("asked again:\n%s", scr)
	}
	if req := modelRequests(second); len(req) < 2 || !strings.Contains(string(req[1].Body), answer) {
		t.Errorf("the later session did not reach the host")
	}
	s2.quit()
}
