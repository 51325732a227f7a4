package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// TestHeadlessPublishReachesTheSandboxServer is issue 29's acceptance for
// ports: a headless --yolo run, as a normal user, whose model starts a
// server in the sandbox; while the run goes on the host reaches it on
// 127.0.0.1 through --publish (two requests at once), and once the run
// ends the host port is closed and nothing of the server is left in the
// sandbox. On Docker under the default network mode (ask), and on the
// Kubernetes test cluster.
func TestHeadlessPublishReachesTheSandboxServer(t *testing.T) {
	t.Parallel()
	t.Run("docker", func(t *testing.T) {
		t.Parallel()
		h := newHostile(t)
		ws := h.workspace("ws")
		publishedSite(t, func(env []string, args ...string) result { return h.shiro(ws, env, args...) })
		for _, id := range testenv.ContainerIDs(t, h.api, ws) {
			if info, err := h.api.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{}); err == nil && info.Container.State != nil && info.Container.State.Running {
				noneMatch(t, top(t, h.api, id), "site.pl")
			}
		}
	})
	t.Run("kubernetes", func(t *testing.T) {
		t.Parallel()
		kc := testenv.RequireKube(t)
		h := newHostile(t)
		kubeconfig, _ := h.kubeconfig(kc)
		ws := h.workspace("ws")
		flags := []string{"--backend", "kubernetes", "--memory", "512m", "--cpus", "1", "--network", "none"}
		env := []string{"KUBECONFIG=" + kubeconfig}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if out, err := h.command(ctx, ws, env, h.bin, append([]string{"sandbox", "rm"}, flags...)...).CombinedOutput(); err != nil {
				t.Logf("shiro sandbox rm: %v: %s", err, out)
			}
		})
		publishedSite(t, func(e []string, args ...string) result {
			return h.shiro(ws, append(e, env...), append(flags, args...)...)
		})
	})
}

// publishedSite runs shiro through run with a model whose one command
// serves siteText on sitePort in the sandbox for 15 s, and checks the host
// reaches it through --publish while the run goes on, and not after.
func publishedSite(t *testing.T, run func(env []string, args ...string) result) {
	t.Helper()
	hostPort := freeHostPort(t)
	start := "cat > /tmp/site.pl <<'EOF'\n" + siteServer + "EOF\ntimeout 15 perl /tmp/site.pl; echo server-ended"
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON(start, 120000)}}},
		fakemodel.Reply{Text: "The site ran."},
	)
	done := make(chan result, 1)
	go func() {
		done <- run(providers[0].env(srv.URL), "-p", "--yolo", "--publish", fmt.Sprintf("%d:%d", hostPort, sitePort), "run the site")
	}()

	addr := "127.0.0.1:" + strconv.Itoa(hostPort)
	hc := &http.Client{Timeout: 5 * time.Second}
	var body string
	var last error
	for deadline := time.Now().Add(4 * time.Minute); time.Now().Before(deadline) && body == ""; {
		select {
		case res := <-done:
			t.Fatalf("the run ended before the host reached the server (last: %v)\nstdout: %s\nstderr: %s", last, res.stdout, res.stderr)
		default:
		}
		resp, err := hc.Get("http://" + addr + "/")
		if err != nil {
			last = err
			time.Sleep(200 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			body = string(b)
		}
	}
	if strings.TrimSpace(body) != siteText {
		t.Fatalf("GET %s: %q (last error %v)", addr, body, last)
	}
	// Two at once, through the one published port.
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			resp, err := hc.Get("http://" + addr + "/")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if strings.TrimSpace(string(b)) != siteText {
					err = fmt.Errorf("body %q", b)
				}
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("a simultaneous GET: %v", err)
		}
	}

	var res result
	select {
	case res = <-done:
	case <-time.After(4 * time.Minute):
		t.Fatal("the run did not end")
	}
	if res.code != 0 || !strings.Contains(res.stdout, "The site ran.") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("%s still listens after the run", addr)
	}
}

// freeHostPort is a port of 127.0.0.1 nothing listens on (it did a moment
// ago).
func freeHostPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
