package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/sandbox"
)

// leakCheck fails t if a goroutine started during it outlives its cleanups.
func leakCheck(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// harness runs a Proxy on a loopback listener and collects its records.
type harness struct {
	p       *Proxy
	url     string
	mu      sync.Mutex
	records []Record
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{}
	cfg.OnRecord = func(r Record) {
		h.mu.Lock()
		h.records = append(h.records, r)
		h.mu.Unlock()
	}
	h.p = New(cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.p.Serve(l)
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	h.url = "http://" + l.Addr().String()
	return h
}

// client goes through the proxy with the token of caller.
func (h *harness) client(t *testing.T, caller sandbox.Caller) *http.Client {
	c, release := h.clientAndRelease(t, caller)
	t.Cleanup(func() { release() })
	return c
}

// clientAndRelease also returns the token's release (the refusals).
func (h *harness) clientAndRelease(t *testing.T, caller sandbox.Caller) (*http.Client, func() []string) {
	token, release := h.p.Register(caller)
	u, _ := url.Parse(h.url)
	u.User = url.UserPassword("shiro", token)
	tr := &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the test server's own certificate
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, release
}

func (h *harness) wait(t *testing.T, n int) []Record {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		got := append([]Record(nil), h.records...)
		h.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) < n {
				t.Fatalf("%d records, want %d: %+v", len(got), n, got)
			}
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hostport(t *testing.T, rawURL string) (string, string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host, u.Port()
}

func TestProxyDecidesAndRecords(t *testing.T) {
	leakCheck(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Error("the proxy passed Proxy-Authorization on")
		}
		io.WriteString(w, "hello from the host")
	}))
	defer backend.Close()
	tlsBackend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure hello")
	}))
	defer tlsBackend.Close()
	hp, _ := hostport(t, backend.URL)
	thp, _ := hostport(t, tlsBackend.URL)
	h := newHarness(t, Config{Policy: Policy{Allow: []Rule{{Pattern: hp, Source: "--allow-host"}, {Pattern: thp, Source: "--allow-host"}}}})
	caller := sandbox.Caller{ID: "call_1", Tool: "bash", Summary: "curl"}
	c, release := h.clientAndRelease(t, caller)

	t.Run("an allowed plain request passes", func(t *testing.T) {
		resp, err := c.Get(backend.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello from the host" {
			t.Fatalf("body %q", body)
		}
	})
	t.Run("an allowed tunnel passes", func(t *testing.T) {
		resp, err := c.Get(tlsBackend.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "secure hello" {
			t.Fatalf("body %q", body)
		}
	})
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	t.Run("a loopback port without an exact rule is refused with the policy's words", func(t *testing.T) {
		resp, err := c.Get("http://" + other.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "shiro's network policy refused "+other.Addr().String()) || !strings.Contains(string(body), "--allow-host") {
			t.Fatalf("status %d, body %q", resp.StatusCode, body)
		}
	})
	t.Run("a refused tunnel gets 403", func(t *testing.T) {
		_, err := c.Get("https://" + other.Addr().String() + "/")
		if err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Fatalf("err %v", err)
		}
	})
	recs := h.wait(t, 4)
	var allowed, denied int
	for _, r := range recs {
		if r.Caller != caller {
			t.Errorf("record %+v does not name the call", r)
		}
		switch r.Decision {
		case DecisionAllow:
			allowed++
			if r.Sent == 0 || r.Received == 0 || r.Rule != "--allow-host "+r.Addr+":"+itoa(r.Port) {
				t.Errorf("allowed record %+v", r)
			}
		case DecisionDeny:
			denied++
			if !strings.Contains(r.Rule, "loopback") {
				t.Errorf("denied record %+v", r)
			}
		}
	}
	if allowed != 2 || denied != 2 {
		t.Errorf("%d allowed, %d denied: %+v", allowed, denied, recs)
	}
	// The command learns each refusal once, HTTPS ones included.
	refused := release()
	if len(refused) != 1 || !strings.HasPrefix(refused[0], "shiro's network policy refused "+other.Addr().String()) {
		t.Errorf("refusals for the command: %q", refused)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// publicName makes the proxy resolve name to a documentation address (not
// special, so the policy asks) and connect that address to backend.
func publicName(h *harness, name, backend string) {
	fake := netip.MustParseAddr("203.0.113.10")
	h.p.cfg.Resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == name {
			return []netip.Addr{fake}, nil
		}
		return nil, errors.New("no such host")
	}
	real := h.p.dialTCP
	h.p.dialTCP = func(ctx context.Context, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, fake.String()+":") {
			return real(ctx, backend)
		}
		return nil, errors.New("unexpected dial to " + addr)
	}
}

func TestProxyAsks(t *testing.T) {
	leakCheck(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer backend.Close()
	bhp, _ := hostport(t, backend.URL)
	tests := []struct {
		name       string
		answer     Answer
		wantStatus []int // of two requests in a row
		wantAsked  int
		remembered string // "allow" or "deny"
		rule       string
	}{
		{name: "allow once asks again", answer: AllowOnce, wantStatus: []int{200, 200}, wantAsked: 2, rule: "allowed once"},
		{name: "always for this project is not asked again", answer: AllowProject, wantStatus: []int{200, 200}, wantAsked: 1, remembered: "allow", rule: "always for this project"},
		{name: "deny refuses and asks again", answer: Deny, wantStatus: []int{403, 403}, wantAsked: 2, rule: "denied when asked"},
		{name: "always deny is not asked again", answer: DenyAlways, wantStatus: []int{403, 403}, wantAsked: 1, remembered: "deny", rule: "always denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var asked []Request
			var remembered []string
			h := newHarness(t, Config{
				Ask: func(ctx context.Context, r Request) Answer {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, r)
					return tt.answer
				},
				Remember: func(r Rule, allow bool) error {
					mu.Lock()
					defer mu.Unlock()
					kind := "deny"
					if allow {
						kind = "allow"
					}
					remembered = append(remembered, kind+" "+r.Pattern)
					return nil
				},
			})
			publicName(h, "api.example.test", bhp)
			c := h.client(t, sandbox.Caller{ID: "call_9", Tool: "bash", Summary: "curl api"})
			for i, want := range tt.wantStatus {
				resp, err := c.Get("http://api.example.test:8080/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != tt.wantAsked {
				t.Fatalf("asked %d times, want %d", len(asked), tt.wantAsked)
			}
			if r := asked[0]; r.Host != "api.example.test" || r.Port != 8080 || len(r.Running) != 1 || r.Running[0].ID != "call_9" || r.Running[0].Summary != "curl api" {
				t.Errorf("asked %+v", r)
			}
			if tt.remembered != "" && (len(remembered) != 1 || remembered[0] != tt.remembered+" api.example.test:8080") {
				t.Errorf("remembered %q", remembered)
			}
			recs := h.wait(t, 2)
			if !strings.Contains(recs[0].Rule, tt.rule) {
				t.Errorf("rule %q, want %q", recs[0].Rule, tt.rule)
			}
		})
	}
}

func TestProxyDeniesWhenNobodyAnswers(t *testing.T) {
	leakCheck(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer backend.Close()
	bhp, _ := hostport(t, backend.URL)
	h := newHarness(t, Config{
		AskTimeout: 100 * time.Millisecond,
		Ask: func(ctx context.Context, r Request) Answer {
			<-ctx.Done() // the form stays open
			return Deny
		},
	})
	publicName(h, "slow.example.test", bhp)
	c := h.client(t, sandbox.Caller{})
	resp, err := c.Get("http://slow.example.test/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), "no answer within 100ms") {
		t.Fatalf("status %d, body %q", resp.StatusCode, body)
	}
}

func TestProxyHeadlessDeniesUnknown(t *testing.T) {
	leakCheck(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer backend.Close()
	bhp, _ := hostport(t, backend.URL)
	h := newHarness(t, Config{Policy: Policy{Allow: []Rule{{Pattern: "*.allowed.test", Source: "network.allow in config.json"}}}})
	publicName(h, "unknown.example.test", bhp)
	c := h.client(t, sandbox.Caller{})
	_, err := c.Get("https://unknown.example.test/")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("err %v", err)
	}
	recs := h.wait(t, 1)
	if recs[0].Decision != DecisionDeny || !strings.Contains(recs[0].Error, "shiro's network policy refused unknown.example.test:443") {
		t.Errorf("record %+v", recs[0])
	}
}

// TestProxyAskNamesWhatRunsNotTheToken: a process left behind by an
// ended command, holding the token of the command running now (read from
// its /proc/<pid>/environ), makes a connection. The ask says which
// commands run, oldest first, and nothing in it takes the token's word
// for who asks; after every command ended it says none runs.
func TestProxyAskNamesWhatRunsNotTheToken(t *testing.T) {
	leakCheck(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer backend.Close()
	bhp, _ := hostport(t, backend.URL)
	var mu sync.Mutex
	var asked []Request
	h := newHarness(t, Config{Ask: func(ctx context.Context, r Request) Answer {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r)
		return Deny
	}})
	publicName(h, "exfil.example.test", bhp)
	approved := sandbox.Caller{ID: "call_ok", Tool: "bash", Summary: "npm test"}
	other := sandbox.Caller{ID: "call_2", Tool: "bash", Summary: "make"}
	leftover, releaseApproved := h.clientAndRelease(t, approved) // the token the leftover process read
	_, releaseOther := h.clientAndRelease(t, other)
	get := func() {
		t.Helper()
		resp, err := leftover.Get("http://exfil.example.test:8080/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get()
	releaseApproved()
	releaseOther()
	get()
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Fatalf("asked %d times", len(asked))
	}
	if got := asked[0].Running; len(got) != 2 || got[0] != approved || got[1] != other {
		t.Errorf("running while both ran: %+v", got)
	}
	if got := asked[1].Running; len(got) != 0 {
		t.Errorf("running after both ended: %+v", got)
	}
}
