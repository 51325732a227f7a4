package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"
)

// Credentials that never enter the sandbox: for the hosts the user names,
// the proxy adds a header (a token, an authorization) to every request it
// carries to that host over TLS. HTTPS to those hosts alone is
// intercepted: the command's TLS ends at the proxy, with a certificate the
// workspace's CA signs for that host, and the proxy makes its own TLS
// connection to the server, verified against the host's trust
// (Config.RootCAs). Every other host is tunnelled untouched. The header is
// added per request by the host the request goes to, so a redirect to
// another host does not carry it.
//
// A plain-HTTP request gets the header only when the entry says so: it
// names "http://" or a port. A host with no port means port 443, over TLS
// only, so that a command cannot make the proxy send the value in
// cleartext (curl http://api.example.com/).

// Credential is a header the proxy adds to the requests to some hosts.
type Credential struct {
	// Host says where the header goes (see ParseCredentialHost):
	// "api.example.com" (HTTPS on 443), "https://api.example.com:8443",
	// "api.example.com:8080" (that port, plain HTTP too),
	// "http://api.example.com" (port 80, plain HTTP too); the host part is
	// a pattern as a Rule's ("*.example.com"), "*" alone is refused.
	Host string
	// Header is the header's name ("Authorization").
	Header string
	// Value yields the header's value; it is asked once, on the first
	// request to the host, and kept for the proxy's life.
	Value func(ctx context.Context) (string, error)
	// Source names the credential in errors ("network.credentials[0]").
	Source string
}

// ErrEveryHost is matched (errors.Is) by the error for a credential whose
// host is "*": it would go to every host.
var ErrEveryHost = errors.New("name hosts, not every host")

// credentialScope is where a credential goes: the host pattern, one port,
// and whether a plain-HTTP request may carry it.
type credentialScope struct {
	host  string // a Rule pattern without a port
	port  int
	plain bool
}

// ParseCredentialHost checks a credential's host and returns it in
// canonical form: an optional scheme ("http://", "https://"), a host
// pattern as a Rule's (not "*" alone) and an optional port. Without a
// scheme or a port the credential goes over TLS to port 443 only; a port
// without a scheme lets plain HTTP to that port carry it too; "https://"
// is TLS only (port 443 unless named); "http://" lets plain HTTP carry it
// (port 80 unless named).
func ParseCredentialHost(h string) (string, error) {
	if _, err := parseCredentialScope(h); err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), "/"), nil
}

// splitScheme cuts "http://" or "https://" off h.
func splitScheme(h string) (scheme, rest string) {
	for _, p := range []string{"http://", "https://"} {
		if r, ok := strings.CutPrefix(h, p); ok {
			return p, r
		}
	}
	return "", h
}

func parseCredentialScope(h string) (credentialScope, error) {
	scheme, rest := splitScheme(strings.ToLower(strings.TrimSpace(h)))
	rest = strings.TrimSuffix(rest, "/")
	if strings.Contains(rest, "://") {
		return credentialScope{}, fmt.Errorf("credential host %q: the scheme is http:// or https://", h)
	}
	host, port, _, err := splitPattern(rest)
	if err != nil {
		return credentialScope{}, err
	}
	if host == "*" {
		return credentialScope{}, fmt.Errorf("credential host %q: %w", h, ErrEveryHost)
	}
	sc := credentialScope{host: host, port: port}
	switch {
	case scheme == "http://":
		sc.plain = true
		if sc.port == 0 {
			sc.port = 80
		}
	case scheme == "https://":
		if sc.port == 0 {
			sc.port = 443
		}
	case sc.port == 0:
		sc.port = 443
	default:
		sc.plain = true // a port the user named: whatever runs there
	}
	if strings.Contains(sc.host, ":") { // an IPv6 address: brackets for the rule
		sc.host = "[" + sc.host + "]"
	}
	return sc, nil
}

// covers reports whether a request to host:port, over TLS or not, gets the
// credential.
func (sc credentialScope) covers(host string, port int, overTLS bool) bool {
	if port != sc.port || !overTLS && !sc.plain {
		return false
	}
	ok, _ := (Rule{Pattern: sc.host}).match(host, port, nil)
	return ok
}

// credential is a configured Credential and its value once fetched.
type credential struct {
	Credential
	scope credentialScope
	mu    sync.Mutex
	value string
	have  bool
}

// get returns the value, fetching it on first use. A failure is not kept:
// the next request asks again.
func (c *credential) get(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.have {
		return c.value, nil
	}
	v, err := c.Value(ctx)
	if err != nil {
		return "", err
	}
	c.value, c.have = v, true
	return v, nil
}

// CredentialError is a request that could not get its host's credential.
type CredentialError struct {
	Host, Source string
	Err          error
}

func (e *CredentialError) Error() string {
	return fmt.Sprintf("shiro could not get the credential for %s (%s): %v", e.Host, e.Source, e.Err)
}

func (e *CredentialError) Unwrap() error { return e.Err }

// credentialFor is the credential configured for host:port over TLS (or
// not), or nil.
func (p *Proxy) credentialFor(host string, port int, overTLS bool) *credential {
	for _, c := range p.creds {
		if c.scope.covers(host, port, overTLS) {
			return c
		}
	}
	return nil
}

// intercepts reports whether a CONNECT to hostport is intercepted: a
// credential names the host and a CA can sign for it.
func (p *Proxy) intercepts(hostport string) bool {
	if p.cfg.CA == nil {
		return false
	}
	host, port, err := splitHostPort(hostport)
	return err == nil && p.credentialFor(host, port, true) != nil
}

// intercepted is a CONNECT the proxy intercepts: the command's token and
// the policy's decision, which the requests inside it reuse (the user is
// not asked again for each).
type intercepted struct {
	token   string
	allowed allowed
}

// dialInfo rides in a proxied request's context to the transport's dial.
type dialInfo struct {
	token string
	in    *intercepted
}

// hostPortOf is the host and port a request goes to, the port by its
// scheme when the URL has none.
func hostPortOf(u *url.URL) (string, int, error) {
	hp := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		hp = net.JoinHostPort(u.Hostname(), port)
	}
	return splitHostPort(hp)
}

// addCredential puts the credential of the host r goes to, if any, on r;
// an error response when the value cannot be had.
func (p *Proxy) addCredential(r *http.Request) *http.Response {
	host, port, err := hostPortOf(r.URL)
	if err != nil {
		return nil
	}
	// An intercepted request, or one the proxy sends upstream over TLS
	// itself (an https:// URL asked of the proxy in plain text): both
	// leave this machine encrypted.
	c := p.credentialFor(host, port, r.URL.Scheme == "https")
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	v, err := c.get(ctx)
	if err != nil {
		ce := &CredentialError{Host: net.JoinHostPort(host, strconv.Itoa(port)), Source: c.Source, Err: err}
		return goproxy.NewResponse(r, goproxy.ContentTypeText, http.StatusBadGateway, ce.Error()+"\n")
	}
	r.Header.Set(c.Header, v)
	return nil
}

// handleConnect decides a CONNECT goproxy is to intercept (Serve sends it
// only those): refused as a tunnel would be, or intercepted with a
// certificate the CA signs for the host.
func (p *Proxy) handleConnect(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	token := tokenOf(ctx.Req)
	a, err := p.decide(ctx.Req.Context(), token, host)
	if err != nil {
		ctx.Resp = errorResponse(ctx.Req, err)
		return goproxy.RejectConnect, host
	}
	ctx.UserData = &intercepted{token: token, allowed: a}
	return &goproxy.ConnectAction{Action: goproxy.ConnectMitm, TLSConfig: p.mitmTLS}, host
}

// errorResponse is the answer to a CONNECT that cannot be carried: 403
// with the policy's words, 502 otherwise.
func errorResponse(req *http.Request, err error) *http.Response {
	code := http.StatusBadGateway
	if _, ok := err.(*PolicyError); ok {
		code = http.StatusForbidden
	}
	resp := goproxy.NewResponse(req, goproxy.ContentTypeText, code, err.Error()+"\n")
	resp.Close = true
	return resp
}

// intercept hands an intercepted CONNECT to goproxy and waits until its
// interception loop (a goroutine of goproxy's) has closed the connection.
func (p *Proxy) intercept(ts *tunnels, w http.ResponseWriter, r *http.Request) {
	hw := &watchedHijack{ResponseWriter: w, ts: ts, closed: make(chan struct{})}
	p.gp.ServeHTTP(hw, r)
	if hw.conn != nil {
		<-hw.closed
	}
}

// watchedHijack lets intercept know when the connection goproxy hijacked
// is closed, and lets Serve close it when it ends.
type watchedHijack struct {
	http.ResponseWriter
	ts     *tunnels
	conn   *watchedConn
	closed chan struct{}
}

func (h *watchedHijack) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := h.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("this connection cannot be hijacked")
	}
	c, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.conn = &watchedConn{Conn: c, ts: h.ts, closed: h.closed}
	if !h.ts.track(h.conn) {
		_ = h.conn.Close()
	}
	return h.conn, rw, nil
}

// watchedConn closes its channel on Close.
type watchedConn struct {
	net.Conn
	ts     *tunnels
	once   sync.Once
	closed chan struct{}
}

func (c *watchedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.ts.untrack(c)
		close(c.closed)
	})
	return err
}

// certStore keeps the certificates signed for intercepted hosts.
type certStore struct {
	mu    sync.Mutex
	certs map[string]*tls.Certificate
}

func (s *certStore) Fetch(host string, gen func() (*tls.Certificate, error)) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.certs[host]; c != nil {
		return c, nil
	}
	c, err := gen()
	if err != nil {
		return nil, err
	}
	if s.certs == nil {
		s.certs = map[string]*tls.Certificate{}
	}
	s.certs[host] = c
	return c, nil
}

// NewCA makes a certificate authority for intercepting the credentials'
// hosts: an ECDSA P-256 key and a self-signed certificate valid for ten
// years, both PEM-encoded. Only the certificate may enter the sandbox.
func NewCA(name string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"shiro"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// CACert is the PEM certificate of the CA that signs for intercepted
// hosts, for the sandbox's trust; nil when nothing is intercepted. The key
// stays here.
func (p *Proxy) CACert() []byte {
	if p.cfg.CA == nil || len(p.cfg.CA.Certificate) == 0 || len(p.creds) == 0 {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.cfg.CA.Certificate[0]})
}
