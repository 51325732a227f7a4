package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shiroagent/shiro/sandbox"
)

// seen is a test server that keeps the header each request carried.
type seen struct {
	mu      sync.Mutex
	headers []string
}

func (s *seen) handler(name string, then http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Get(name))
		s.mu.Unlock()
		if then != nil {
			then(w, r)
			return
		}
		io.WriteString(w, "ok")
	}
}

func (s *seen) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.headers...)
}

func TestCredentialsAddedForTheirHostOnly(t *testing.T) {
	leakCheck(t)
	const secret = "Bearer s3cret-value"
	var cfgSeen, otherSeen, plainSeen seen
	other := httptest.NewTLSServer(otherSeen.handler("Authorization", nil))
	defer other.Close()
	configured := httptest.NewTLSServer(cfgSeen.handler("Authorization", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, other.URL+"/landed", http.StatusFound)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer configured.Close()
	plain := httptest.NewServer(plainSeen.handler("Authorization", nil))
	defer plain.Close()
	chp, _ := hostport(t, configured.URL)
	ohp, _ := hostport(t, other.URL)
	php, _ := hostport(t, plain.URL)

	caPEM, keyPEM, err := NewCA("shiro test CA")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tls.X509KeyPair(caPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	upstream := x509.NewCertPool()
	upstream.AddCert(configured.Certificate())
	var fetched atomic.Int32
	value := func(context.Context) (string, error) { fetched.Add(1); return secret, nil }
	h := newHarness(t, Config{
		Policy: Policy{Allow: []Rule{{Pattern: chp, Source: "t"}, {Pattern: ohp, Source: "t"}, {Pattern: php, Source: "t"}}},
		Credentials: []Credential{
			{Host: chp, Header: "Authorization", Value: value, Source: "network.credentials[0]"},
			{Host: php, Header: "Authorization", Value: value, Source: "network.credentials[1]"},
		},
		CA:      &ca,
		RootCAs: upstream,
	})
	// The command trusts the workspace's CA and the other server's own
	// certificate, nothing else.
	trust := x509.NewCertPool()
	trust.AppendCertsFromPEM(caPEM)
	trust.AddCert(other.Certificate())
	caller := sandbox.Caller{ID: "call_c", Tool: "bash"}
	token, release := h.p.Register(caller)
	defer release()
	pu, _ := url.Parse(h.url)
	pu.User = url.UserPassword("shiro", token)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: trust}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	// get returns the body and the name of the certificate that ends the
	// chain the command was shown.
	get := func(u string, hdr string) (body, root string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		if hdr != "" {
			req.Header.Set("Authorization", hdr)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.TLS != nil {
			chain := resp.TLS.PeerCertificates
			root = chain[len(chain)-1].Issuer.CommonName
		}
		return string(b), root
	}

	// The configured host is intercepted (its certificate is the CA's);
	// the other is tunnelled untouched (the command sees its own).
	if got, root := get(configured.URL+"/a", ""); got != "ok" || root != "shiro test CA" {
		t.Errorf("configured host answered %q with a certificate from %q, want the workspace CA's", got, root)
	}
	get(configured.URL+"/b", "Bearer forged-by-the-sandbox")
	get(plain.URL+"/", "")
	if _, root := get(other.URL+"/", ""); root == "shiro test CA" {
		t.Errorf("the other host was intercepted")
	}
	get(configured.URL+"/redirect", "") // follows to other: the header stays behind

	if got := cfgSeen.all(); len(got) != 3 || got[0] != secret || got[1] != secret || got[2] != secret {
		t.Errorf("the configured host saw %q, want the credential on every request", got)
	}
	if got := plainSeen.all(); len(got) != 1 || got[0] != secret {
		t.Errorf("the configured plain host saw %q", got)
	}
	if got := otherSeen.all(); len(got) != 2 || got[0] != "" || got[1] != "" {
		t.Errorf("the other host saw %q, want no credential", got)
	}
	if n := fetched.Load(); n != 2 {
		t.Errorf("the values were fetched %d times, want once per credential", n)
	}
	tr.CloseIdleConnections()
	recs := h.wait(t, 5) // three requests intercepted, one plain, one tunnel
	for _, r := range recs {
		if r.Decision != DecisionAllow || r.Caller != caller {
			t.Errorf("record %+v", r)
		}
	}
}

func TestCredentialsInterceptionKeepsThePolicy(t *testing.T) {
	leakCheck(t)
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer backend.Close()
	bhp, _ := hostport(t, backend.URL)
	caPEM, keyPEM, err := NewCA("shiro test CA")
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := tls.X509KeyPair(caPEM, keyPEM)
	failing := func(context.Context) (string, error) { return "", errors.New("exit status 1") }
	h := newHarness(t, Config{
		Credentials: []Credential{{Host: bhp, Header: "X-Token", Value: failing, Source: "network.credentials[0]"}},
		CA:          &ca,
	})
	c := h.client(t, sandbox.Caller{ID: "call_p"})
	_, err = c.Get(backend.URL)
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("an intercepted host no rule allows: %v", err)
	}
	recs := h.wait(t, 1)
	if recs[0].Decision != DecisionDeny {
		t.Errorf("record %+v", recs[0])
	}
	// Allowed, but the value cannot be had: 502 naming the credential.
	h2 := newHarness(t, Config{
		Policy:      Policy{Allow: []Rule{{Pattern: bhp, Source: "t"}}},
		Credentials: []Credential{{Host: bhp, Header: "X-Token", Value: failing, Source: "network.credentials[0]"}},
		CA:          &ca,
	})
	trust := x509.NewCertPool()
	trust.AppendCertsFromPEM(caPEM)
	pu, _ := url.Parse(h2.url)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: trust}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "could not get the credential for "+bhp+" (network.credentials[0])") {
		t.Errorf("status %d, body %q", resp.StatusCode, body)
	}
}

// scopeReq is a request to host:port, over TLS or not, and whether it
// carries the credential.
type scopeReq struct {
	host    string
	port    int
	overTLS bool
	want    bool
}

func TestCredentialScope(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, host string
		err        bool
		reqs       []scopeReq
	}{
		{name: "a portless host is TLS on 443 only", host: "api.example.com", reqs: []scopeReq{{"api.example.com", 443, true, true}, {"api.example.com", 443, false, false}, {"api.example.com", 80, false, false}, {"api.example.com", 8443, true, false}, {"other.example.com", 443, true, false}}},
		{name: "a port names where plain HTTP may carry it", host: "api.example.com:8080", reqs: []scopeReq{{"api.example.com", 8080, false, true}, {"api.example.com", 8080, true, true}, {"api.example.com", 443, true, false}}},
		{name: "http:// lets plain HTTP on 80 carry it", host: "http://api.example.com", reqs: []scopeReq{{"api.example.com", 80, false, true}, {"api.example.com", 443, true, false}}},
		{name: "https:// with a port is TLS only", host: "https://api.example.com:8443", reqs: []scopeReq{{"api.example.com", 8443, true, true}, {"api.example.com", 8443, false, false}}},
		{name: "a wildcard keeps the rule", host: "*.example.com", reqs: []scopeReq{{"a.example.com", 443, true, true}, {"a.example.com", 80, false, false}}},
		{name: "an IPv6 address", host: "[::1]", reqs: []scopeReq{{"::1", 443, true, true}, {"::1", 80, false, false}}},
		{name: "every host is refused", host: "*", err: true},
		{name: "every host with a scheme is refused", host: "https://*", err: true},
		{name: "another scheme is refused", host: "ftp://api.example.com", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseCredentialHost(tt.host)
			sc, err2 := parseCredentialScope(tt.host)
			if (err != nil) != tt.err || (err2 != nil) != tt.err {
				t.Fatalf("ParseCredentialHost(%q): %v, %v", tt.host, err, err2)
			}
			for _, r := range tt.reqs {
				if got := sc.covers(r.host, r.port, r.overTLS); got != r.want {
					t.Errorf("%s:%d over TLS %v: %v, want %v", r.host, r.port, r.overTLS, got, r.want)
				}
			}
		})
	}
}

// TestCredentialsOnlyOverTLS: a credential whose host names no port is
// not added to a plain-HTTP request, on any port (443 included), and is
// added over an intercepted TLS connection to port 443. The servers are on
// 127.0.0.1; the proxy's dial of port 443 and 80 is redirected to them.
func TestCredentialsOnlyOverTLS(t *testing.T) {
	leakCheck(t)
	const secret = "Bearer only-over-tls"
	var tlsSeen, plainSeen seen
	tlsSrv := httptest.NewTLSServer(tlsSeen.handler("Authorization", nil))
	defer tlsSrv.Close()
	plainSrv := httptest.NewServer(plainSeen.handler("Authorization", nil))
	defer plainSrv.Close()
	thp, _ := hostport(t, tlsSrv.URL)
	php, pport := hostport(t, plainSrv.URL)
	caPEM, keyPEM, err := NewCA("shiro test CA")
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := tls.X509KeyPair(caPEM, keyPEM)
	upstream := x509.NewCertPool()
	upstream.AddCert(tlsSrv.Certificate())
	h := newHarness(t, Config{
		Policy: Policy{Allow: []Rule{{Pattern: "127.0.0.1", Source: "t"}}},
		Credentials: []Credential{{Host: "127.0.0.1", Header: "Authorization", Source: "network.credentials[0]",
			Value: func(context.Context) (string, error) { return secret, nil }}},
		CA:      &ca,
		RootCAs: upstream,
	})
	// Each request's dial goes to the server the test names for it.
	var mu sync.Mutex
	target := ""
	real := h.p.dialTCP
	h.p.dialTCP = func(ctx context.Context, _ string) (net.Conn, error) {
		mu.Lock()
		to := target
		mu.Unlock()
		return real(ctx, to)
	}
	trust := x509.NewCertPool()
	trust.AppendCertsFromPEM(caPEM)
	token, release := h.p.Register(sandbox.Caller{ID: "call_t"})
	defer release()
	pu, _ := url.Parse(h.url)
	pu.User = url.UserPassword("shiro", token)
	tr := &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: trust}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for _, r := range []struct{ url, server string }{
		{"http://127.0.0.1:" + pport + "/", php}, // the plain server's own port
		{"http://127.0.0.1/", php},               // port 80
		{"http://127.0.0.1:443/", php},           // plain HTTP to port 443
		{"https://127.0.0.1/", thp},              // TLS to 443, intercepted
	} {
		mu.Lock()
		target = r.server
		mu.Unlock()
		resp, err := c.Get(r.url)
		if err != nil {
			t.Fatalf("GET %s: %v", r.url, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := plainSeen.all(); len(got) != 3 || got[0] != "" || got[1] != "" || got[2] != "" {
		t.Errorf("plain HTTP carried %q, want three requests without the credential", got)
	}
	if got := tlsSeen.all(); len(got) != 1 || got[0] != secret {
		t.Errorf("the intercepted TLS request carried %q, want the credential", got)
	}
	h.wait(t, 4)
}
