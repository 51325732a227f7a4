package integration

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

// TestTUIPorts drives /ports in a real terminal: the list, add and rm,
// each checked from the host. Without a sandbox (--no-sandbox) the
// sandbox's loopback is this machine's, so a server of the test stands
// for the sandbox's.
func TestTUIPorts(t *testing.T) {
	t.Parallel()
	site, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	go func() {
		for {
			c, err := site.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "site")
			c.Close()
		}
	}()
	sitePort := site.Addr().(*net.TCPAddr).Port
	first, second := freeHostPort(t), freeHostPort(t)
	for second == first {
		second = freeHostPort(t)
	}
	get := func(port int) (string, error) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		return string(b), err
	}

	s := startTUIAt(t, t.TempDir(), fakemodel.New(t), tuiWidth, tuiHeight, false, "--publish", fmt.Sprintf("%d:%d", first, sitePort))
	s.keys("/ports", true)
	s.waitFor(fmt.Sprintf("127.0.0.1:%d", first), 10*time.Second)
	s.waitFor(fmt.Sprintf("sandbox port %d", sitePort), 5*time.Second)
	s.dismiss("/ports add HOST_PORT")

	s.keys(fmt.Sprintf("/ports add %d:%d", second, sitePort), true)
	s.waitFor(fmt.Sprintf("published port %d of the sandbox at 127.0.0.1:%d", sitePort, second), 10*time.Second)
	if got, err := get(second); got != "site" || err != nil {
		t.Errorf("through the added port: %q, %v", got, err)
	}
	s.keys(fmt.Sprintf("/ports add %d", first), true)
	s.waitFor(fmt.Sprintf("host port %d is published already", first), 10*time.Second)

	s.keys(fmt.Sprintf("/ports rm %d", first), true)
	s.waitFor(fmt.Sprintf("host port %d is no longer published", first), 10*time.Second)
	if _, err := get(first); err == nil {
		t.Errorf("port %d still listens after /ports rm", first)
	}
	if got, err := get(second); got != "site" || err != nil {
		t.Errorf("the other port after rm: %q, %v", got, err)
	}
	s.quit()
	if _, err := get(second); err == nil {
		t.Errorf("port %d still listens after the session ended", second)
	}
}

// TestTUIPublishPortAsks: the model's publish_port call asks, naming the
// port, the host address and what listens there; yes publishes it.
func TestTUIPublishPortAsks(t *testing.T) {
	t.Parallel()
	site, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	go func() {
		for {
			c, err := site.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "site")
			c.Close()
		}
	}()
	sitePort := site.Addr().(*net.TCPAddr).Port
	hostPort := freeHostPort(t)
	// A command first: the question reads the listeners of a sandbox that
	// is open (the model starts its server before it publishes it).
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON("true", 0)}}},
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "p1", Name: "publish_port", Input: fmt.Sprintf(`{"container_port": %d, "host_port": %d}`, sitePort, hostPort)}}},
		fakemodel.Reply{Text: "Open it in your browser."},
	)
	s := startTUIAt(t, t.TempDir(), srv, tuiWidth, tuiHeight, false)
	s.keys("show me the site", true)
	s.waitFor("bash wants to run", 20*time.Second)
	s.waitFor("y once", 5*time.Second)
	s.keys("y", false)
	s.waitFor("publish_port wants to run", 20*time.Second)
	scr := s.waitFor(fmt.Sprintf("publish port %d of the sandbox at 127.0.0.1:%d (", sitePort, hostPort), 5*time.Second)
	if strings.Contains(scr, "nothing listens there") {
		t.Errorf("the question does not name the listener:\n%s", scr)
	}
	s.waitFor("y allow once", 5*time.Second)
	s.keys("y", false)
	s.waitFor("Open it in your browser.", 10*time.Second)
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(hostPort), 5*time.Second)
	if err != nil {
		t.Fatalf("the approved port: %v", err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(c); string(b) != "site" || err != nil {
		t.Errorf("through the approved port: %q, %v", b, err)
	}
	c.Close()
	s.quit()
}
