package integration

import (
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
// ports: a headless --yolo run under the default network mode (ask) whose
// model starts a server in the sandbox; while the run goes on the host
// reaches it on 127.0.0.1 through --publish, and once the run ends the
// host port is closed and nothing of the server is left in the container.
func TestHeadlessPublishReachesTheSandboxServer(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	hostPort := freeHostPort(t)
	// The server runs for 15 s in the one bash call; the run ends after it.
	start := "cat > /tmp/site.pl <<'EOF'\n" + siteServer + "EOF\ntimeout 15 perl /tmp/site.pl; echo server-ended"
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: bashJSON(start, 60000)}}},
		fakemodel.Reply{Text: "The site ran."},
	)
	done := make(chan result, 1)
	go func() {
		done <- shiro(t, ws, headlessEnv(t, providers[0], srv.URL), "-p", "--yolo",
			"--publish", fmt.Sprintf("%d:%d", hostPort, sitePort), "run the site")
	}()

	addr := "127.0.0.1:" + strconv.Itoa(hostPort)
	hc := &http.Client{Timeout: 5 * time.Second}
	var body string
	var last error
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && body == ""; {
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
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not end")
	}
	if res.code != 0 || !strings.Contains(res.stdout, "The site ran.") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		c.Close()
		t.Errorf("%s still listens after the run", addr)
	}
	// The container may stay for the next session; no server of this one
	// runs in it.
	for _, id := range testenv.ContainerIDs(t, api, ws) {
		if info, err := api.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{}); err == nil && info.Container.State != nil && info.Container.State.Running {
			noneMatch(t, top(t, api, id), "site.pl")
		}
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
