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
// ports and jobs: a headless --yolo run, as a normal user, whose model
// starts a server in the sandbox in the background; while the run goes on the host reaches it on
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
				noneMatch(t, top(t, h.api, id), "http.server")
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

// publishedSite runs shiro through run with the model of the issue's
// acceptance: it starts a web server in the background (bash with
// run_in_background), runs other commands for 10 s, then reads the
// server's log with job_output and ends. The host reaches the server
// through --publish while the run goes on, the log the model read shows the host's requests,
// and once the run ended the host port is closed.
func publishedSite(t *testing.T, run func(env []string, args ...string) result) {
	t.Helper()
	hostPort := freeHostPort(t)
	start := fmt.Sprintf("cd \"$(mktemp -d)\" && echo '%s' > index.html && exec python3 -m http.server %d --bind 127.0.0.1", siteText, sitePort)
	others := "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1; echo tick $i; done"
	// The model's second request is held until the host reached the
	// server once (a slow start must not eat the other commands' 10 s);
	// the two simultaneous GETs then go while the other commands run.
	asked, hold := make(chan struct{}), make(chan struct{})
	reached := make(chan struct{})
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "b1", Name: "bash", Input: `{"command":` + strconv.Quote(start) + `,"run_in_background":true}`}}},
		fakemodel.Reply{Reached: asked, Hold: hold, ToolCalls: []fakemodel.ToolCall{{ID: "b2", Name: "bash", Input: bashJSON(others, 60000)}}},
		fakemodel.Reply{Reached: reached, ToolCalls: []fakemodel.ToolCall{{ID: "j1", Name: "job_output", Input: `{"id":"job-1","tail":20}`}}},
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
	select {
	case <-asked:
	case <-time.After(2 * time.Minute):
		t.Fatal("the model was not asked again after the background start")
	}
	close(hold)
	// Two at once, through the one published port, while the other
	// commands run.
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
	select {
	case <-reached:
		t.Error("the other commands had ended before the simultaneous GETs did")
	default:
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
	reqs := srv.Requests()
	if len(reqs) < 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	if sent := string(reqs[1].Body); !strings.Contains(sent, "job-1") {
		t.Errorf("the background start's result names no job-1: %s", sent)
	}
	if sent := string(reqs[2].Body); !strings.Contains(sent, "tick 10") {
		t.Errorf("the other commands did not run for their 10 s: %s", sent)
	}
	if sent := string(reqs[3].Body); strings.Count(sent, `GET / HTTP/1.1\" 200`) < 3 {
		t.Errorf("job_output did not show the server's log of the host's three GETs: %s", sent)
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
