package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// hostServer is an HTTP server the test starts on the host, at addr, that
// answers with a token and counts the requests it saw.
type hostServer struct {
	url    string
	hp     string // host:port
	answer string
	hits   atomic.Int64
}

func startHostServer(t *testing.T, ip netip.Addr, tlsToo bool) *hostServer {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	s := &hostServer{hp: ln.Addr().String(), answer: token(t, "from-the-host")}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.hits.Add(1)
		fmt.Fprintln(w, s.answer)
	})
	if tlsToo {
		srv := httptest.NewUnstartedServer(h)
		srv.Listener = ln
		srv.StartTLS()
		t.Cleanup(srv.Close)
		s.url = "https://" + s.hp + "/"
		return s
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s.url = "http://" + s.hp + "/"
	return s
}

// TestNetworkAskHasNoRouteOfItsOwn runs, as a normal user, commands that
// ignore the proxy variables and connect to the host's bridge address
// directly: in ask mode (the default) the container has no network
// interface but the loopback, so they fail and the host server sees
// nothing. The same command through the proxy, with the address allowed
// exactly, is answered.
func TestNetworkAskHasNoRouteOfItsOwn(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("ws")
	t.Cleanup(func() { testenv.RemoveContainers(t, h.api, ws) })
	gw := bridgeGateway(t, h.api)
	srv := startHostServer(t, gw, false)
	gwHost, gwPort, _ := net.SplitHostPort(srv.hp)

	direct := h.shiro(ws, nil, "tool", "bash", bashJSON(strings.Join([]string{
		"ls /sys/class/net | tr '\\n' ' '; echo",
		"curl -sS -m 5 --noproxy '*' " + srv.url + " || echo curl-direct-failed",
		"env -u HTTP_PROXY -u http_proxy -u ALL_PROXY -u all_proxy curl -sS -m 5 " + srv.url + " || echo curl-unset-failed",
		"(exec 3<>/dev/tcp/" + gwHost + "/" + gwPort + " && echo tcp-connected) 2>&1 || echo tcp-failed",
		"curl -sS -m 5 --noproxy '*' http://169.254.169.254/ || echo metadata-failed",
	}, "\n"), 0))
	mustContain(t, "direct", direct.stdout, "stdout:\nlo \n", "curl-direct-failed", "curl-unset-failed", "tcp-failed", "metadata-failed")
	if strings.Contains(direct.stdout, srv.answer) || strings.Contains(direct.stdout, "tcp-connected") {
		t.Errorf("a direct connection reached the host:\n%s", direct.stdout)
	}
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("the host server saw %d requests from direct connections", n)
	}

	via := h.shiro(ws, nil, "--allow-host", srv.hp, "tool", "bash", bashJSON("curl -sS -m 10 "+srv.url, 0))
	mustContain(t, "through the proxy", via.stdout, srv.answer)
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("the host server saw %d requests, want 1", n)
	}
}

// TestNetworkAskHeadless runs a headless session whose one command reaches
// an allowed host (plain and TLS), an unknown one, and the host's loopback
// and bridge address under a wildcard rule: only the exactly allowed ones
// pass; the others fail at once with the policy's error; --json and the
// session record list every connection with its decision and tool call.
func TestNetworkAskHeadless(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	gw := bridgeGateway(t, api)
	allowed := startHostServer(t, gw, false)
	allowedTLS := startHostServer(t, gw, true)
	unknown := startHostServer(t, gw, false)
	loop := startHostServer(t, netip.MustParseAddr("127.0.0.1"), false)

	command := strings.Join([]string{
		"curl -sS -m 10 " + allowed.url,
		"curl -sS -k -m 10 " + allowedTLS.url,
		"curl -sS -m 10 " + unknown.url + "; echo unknown-exit-$?",
		"curl -sS -k -m 10 https://" + unknown.hp + "/; echo unknown-tls-exit-$?",
		"curl -sS -m 10 --noproxy '' " + loop.url + "; echo loop-exit-$?",
	}, "\n")
	srv := fakemodel.New(t,
		fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{ID: "call_net_1", Name: "bash", Input: bashJSON(command, 0)}}},
		fakemodel.Reply{Text: "Done."},
	)
	env := headlessEnv(t, providers[0], srv.URL)
	start := time.Now()
	res := shiro(t, ws, env, "-p", "--yolo", "--json",
		"--allow-host", allowed.hp, "--allow-host", allowedTLS.hp, "--allow-host", "*", "fetch")
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if res.took > 2*time.Minute {
		t.Errorf("took %s: a refusal waited", time.Since(start))
	}

	// What the command saw.
	var result string
	type netEvent struct {
		Type, Host, Decision, Rule, CallID, Tool, Command, Addr string
		Port                                                    int
		Sent, Received                                          int64
	}
	var events []netEvent
	sc := bufio.NewScanner(strings.NewReader(res.stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("not JSON: %q", sc.Text())
		}
		switch e["type"] {
		case "tool-result", "tool-error":
			result += fmt.Sprint(e["output"], e["error"])
		case "network":
			var ne netEvent
			_ = json.Unmarshal(sc.Bytes(), &ne)
			events = append(events, ne)
		}
	}
	mustContain(t, "tool result", result, allowed.answer, allowedTLS.answer,
		"shiro's network policy refused "+unknown.hp, "--allow-host "+unknown.hp, "unknown-exit-0", // curl prints the 403's body
		"unknown-tls-exit-56", "loop-exit-",
		"[notice] shiro's network policy refused "+unknown.hp, "[notice] shiro's network policy refused "+loop.hp) // HTTPS clients show only the 403
	if strings.Contains(result, unknown.answer) || strings.Contains(result, loop.answer) {
		t.Errorf("a refused host answered:\n%s", result)
	}
	if unknown.hits.Load() != 0 || loop.hits.Load() != 0 {
		t.Errorf("refused servers saw requests: unknown %d, loopback %d", unknown.hits.Load(), loop.hits.Load())
	}

	check := func(what string, got []netEvent) {
		t.Helper()
		want := map[string]string{ // host:port → decision
			allowed.hp: "allow", allowedTLS.hp: "allow", unknown.hp: "deny", loop.hp: "deny",
		}
		seen := map[string]int{}
		for _, e := range got {
			hp := net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
			seen[hp]++
			if d, ok := want[hp]; !ok || d != e.Decision {
				t.Errorf("%s: %s %s (%s), want %q", what, e.Decision, hp, e.Rule, want[hp])
			}
			if e.CallID != "call_net_1" || e.Tool != "bash" || !strings.Contains(e.Command, "curl") {
				t.Errorf("%s: %s does not name its tool call: %+v", what, hp, e)
			}
			if e.Decision == "allow" && (e.Received == 0 || e.Sent == 0 || e.Rule != "--allow-host "+hp) {
				t.Errorf("%s: allowed %s: %+v", what, hp, e)
			}
		}
		for hp := range want {
			if seen[hp] == 0 {
				t.Errorf("%s: no record of %s in %+v", what, hp, got)
			}
		}
	}
	check("--json", events)
	for _, e := range events {
		if e.Host == "127.0.0.1" && !strings.Contains(e.Rule, "loopback") {
			t.Errorf("the loopback was refused for another reason: %q", e.Rule)
		}
		if e.Host == gw.String() && e.Port != 0 && net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) == unknown.hp && !strings.Contains(e.Rule, "private address") {
			t.Errorf("the unknown bridge port was refused for another reason: %q", e.Rule)
		}
	}

	// The session record keeps them.
	home := strings.TrimPrefix(env[0], "SHIRO_HOME=")
	files, _ := filepath.Glob(filepath.Join(home, "sessions", "*.json"))
	if len(files) != 1 {
		t.Fatalf("session records: %v", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Network []netEvent }
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	check("session record", rec.Network)
}

// TestNetworkLoopbackSpellings: IPv6 spellings of the host's loopback
// (IPv4-compatible, IPv4-mapped, in either notation) are refused under
// --allow-host '*', plain and over CONNECT, as 127.0.0.1 is; the server
// on 127.0.0.1 sees nothing. Only loopback spellings are dialled here:
// NAT64, 6to4 and the reserved ranges are tested on the policy's decision
// (sandbox/egress), so that a policy that wrongly allowed one could not
// send anything off this machine.
func TestNetworkLoopbackSpellings(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	ws := testenv.Workspace(t, api)
	loop := startHostServer(t, netip.MustParseAddr("127.0.0.1"), false)
	_, port, _ := net.SplitHostPort(loop.hp)
	spellings := []string{"[::127.0.0.1]", "[::7f00:1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]"}
	var lines []string
	for i, s := range spellings {
		lines = append(lines,
			fmt.Sprintf("curl -sS -m 10 http://%s:%s/; echo plain-%d-exit-$?", s, port, i),
			fmt.Sprintf("curl -sS -k -m 10 https://%s:%s/ 2>&1; echo tls-%d-exit-$?", s, port, i))
	}
	res := shiro(t, ws, []string{"SHIRO_HOME=" + t.TempDir()}, "--allow-host", "*", "tool", "bash", bashJSON(strings.Join(lines, "\n"), 0))
	if strings.Contains(res.stdout, loop.answer) || loop.hits.Load() != 0 {
		t.Errorf("the loopback server answered %d requests:\n%s", loop.hits.Load(), res.stdout)
	}
	for i := range spellings {
		mustContain(t, spellings[i], res.stdout, fmt.Sprintf("plain-%d-exit-0", i), fmt.Sprintf("tls-%d-exit-56", i))
	}
	// Each plain request gets the policy's words (curl prints the 403's
	// body); the CONNECTs add a notice each.
	if n := strings.Count(res.stdout, "loopback address "); n < 2*len(spellings) {
		t.Errorf("%d refusals name the loopback, want %d:\n%s", n, 2*len(spellings), res.stdout)
	}
	mustContain(t, "the refusal", res.stdout, "(which carries 127.0.0.1)")
}
