package egress

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/sandbox"
)

// Decisions as recorded.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// Record is one connection a command asked for.
type Record struct {
	Time     time.Time `json:"time"`
	Host     string    `json:"host"`
	Port     int       `json:"port"`
	Addr     string    `json:"addr,omitempty"`
	Decision string    `json:"decision"`
	Rule     string    `json:"rule"`
	Sent     int64     `json:"sent"`
	Received int64     `json:"received"`
	sandbox.Caller
	Error string `json:"error,omitempty"`
}

// Request is a connection the policy does not decide, put to the user.
//
// It does not say which command asks: the token a connection presents is
// in every command's environment, which any process of the sandbox's user
// can read (/proc/<pid>/environ), so a process an earlier command left
// behind can present the token of the command running now. What the host
// knows of its own is which commands are running when the connection
// comes: Running, oldest first. (Records keep the token's tool call, as
// the connection claimed it: docs/network.md.)
type Request struct {
	Host    string
	Port    int
	Addr    netip.Addr
	Running []sandbox.Caller
}

// Answer is the user's answer to a Request.
type Answer int

// The answers.
const (
	Deny Answer = iota
	AllowOnce
	AllowProject // allow host:port in this project from now on
	DenyAlways   // deny host:port in this project from now on
)

// AskTimeout is how long a connection waits for an answer before it is
// denied.
const AskTimeout = 2 * time.Minute

// Config configures a Proxy.
type Config struct {
	Policy Policy
	// Ask puts an unknown connection to the user; nil denies it (headless).
	// It must return when ctx ends.
	Ask func(ctx context.Context, r Request) Answer
	// Remember stores an "always" answer as a rule of the project; nil
	// keeps it for this process only.
	Remember func(r Rule, allow bool) error
	// OnRecord receives every connection once it is decided (denied) or
	// closed (allowed). It may be called from many goroutines at once.
	OnRecord func(Record)
	// Resolve looks a name up; default net.DefaultResolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// AskTimeout bounds the wait for an answer; default AskTimeout.
	AskTimeout time.Duration
	// HowToAllow ends the refusal message; default names --allow-host and
	// network.allow.
	HowToAllow func(hostport string) string
	// Credentials are headers added to the requests to some hosts
	// (credentials.go); HTTPS to those hosts is intercepted with
	// certificates CA signs, and without CA only plain HTTP gets them.
	Credentials []Credential
	// CA signs the certificates of the intercepted hosts.
	CA *tls.Certificate
	// RootCAs verifies the servers of intercepted hosts; nil: the system's
	// (which SSL_CERT_FILE and SSL_CERT_DIR change).
	RootCAs *x509.CertPool
}

// Proxy is the egress proxy of one shiro process. Serve it on as many
// listeners as there are sessions.
type Proxy struct {
	cfg Config
	gp  *goproxy.ProxyHttpServer

	// dialTCP connects to a checked address (tests redirect it).
	dialTCP func(ctx context.Context, addr string) (net.Conn, error)

	creds   []*credential
	mitmTLS func(host string, ctx *goproxy.ProxyCtx) (*tls.Config, error)

	mu      sync.Mutex
	policy  Policy
	callers map[string]*registered
	seq     uint64
}

// registered is a command's token: its tool call and the refusals its
// connections met.
type registered struct {
	caller  sandbox.Caller
	seq     uint64 // order of registration
	refused []string
}

// PolicyError is a connection the policy refused.
type PolicyError struct {
	HostPort string
	Rule     string
	How      string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("shiro's network policy refused %s (%s); %s", termsafe.Name(e.HostPort), e.Rule, e.How)
}

// New makes a proxy.
func New(cfg Config) *Proxy {
	p := &Proxy{cfg: cfg, policy: cfg.Policy, callers: map[string]*registered{}}
	p.dialTCP = func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	if p.cfg.Resolve == nil {
		p.cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if p.cfg.AskTimeout == 0 {
		p.cfg.AskTimeout = AskTimeout
	}
	if p.cfg.HowToAllow == nil {
		p.cfg.HowToAllow = func(hp string) string {
			return fmt.Sprintf("to allow it, run shiro with --allow-host %s or add it to \"network.allow\" in your configuration", hp)
		}
	}
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = discardLogger{}
	gp.Tr = &http.Transport{
		Proxy:              nil,
		DialContext:        p.dialHTTP,
		DisableKeepAlives:  true,
		DisableCompression: true,
		ReadBufferSize:     64 << 10,
		WriteBufferSize:    64 << 10,
		TLSClientConfig:    &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
	}
	for _, c := range cfg.Credentials {
		sc, err := parseCredentialScope(c.Host)
		if err != nil {
			continue // never sent; the configuration's reader refuses it first
		}
		p.creds = append(p.creds, &credential{Credential: c, scope: sc})
	}
	if cfg.CA != nil {
		p.mitmTLS = goproxy.TLSConfigFromCA(cfg.CA)
		gp.CertStore = &certStore{}
		gp.OnRequest().HandleConnectFunc(p.handleConnect)
	}
	gp.ConnectDial = nil
	gp.ConnectDialWithReq = func(req *http.Request, _, addr string) (net.Conn, error) {
		return p.dial(req.Context(), tokenOf(req), addr)
	}
	gp.ConnectionErrHandler = func(w io.Writer, _ *goproxy.ProxyCtx, err error) {
		writeError(w, err)
	}
	gp.OnRequest().DoFunc(func(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		info := dialInfo{token: tokenOf(r)}
		if in, ok := ctx.UserData.(*intercepted); ok {
			info = dialInfo{token: in.token, in: in}
		}
		r.Header.Del("Proxy-Authorization")
		if resp := p.addCredential(r); resp != nil {
			return r, resp
		}
		if info.in == nil && usePlainTrip(r) {
			ctx.RoundTripper = goproxy.RoundTripperFunc(p.plainTrip)
		}
		return r.WithContext(context.WithValue(r.Context(), dialKey{}, info)), nil
	})
	gp.OnResponse().DoFunc(func(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
		var pe *PolicyError
		if resp == nil && errors.As(ctx.Error, &pe) {
			return refusal(ctx.Req, pe)
		}
		return resp
	})
	p.gp = gp
	return p
}

// Serve answers proxy requests on l until l is closed, then ends the
// connections it carries.
func (p *Proxy) Serve(l net.Listener) error {
	ts := &tunnels{}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodConnect {
				// The request's body is still being sent upstream while the
				// response comes back.
				_ = http.NewResponseController(w).EnableFullDuplex()
				p.gp.ServeHTTP(w, r)
				return
			}
			if !ts.start() {
				http.Error(w, "the sandbox's session is over", http.StatusServiceUnavailable)
				return
			}
			defer ts.end()
			if p.intercepts(r.URL.Host) {
				p.intercept(ts, w, r)
				return
			}
			p.tunnel(ts, w, r)
		}),
		ReadHeaderTimeout: readHeaderTimeout,
	}
	err := srv.Serve(serveListener{l})
	_ = srv.Close()
	ts.closeAll()
	return err
}

// Register gives c a token to put in a command's proxy URL (as its
// password), so the connections the command makes name its tool call;
// release forgets it and returns the refusals its connections met (each
// once), for the command's result: an HTTPS client shows only the 403.
func (p *Proxy) Register(c sandbox.Caller) (token string, release func() []string) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	token = hex.EncodeToString(b[:])
	p.mu.Lock()
	p.seq++
	reg := &registered{caller: c, seq: p.seq}
	p.callers[token] = reg
	p.mu.Unlock()
	return token, func() []string {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.callers, token)
		return slices.Compact(reg.refused)
	}
}

// refused notes a refusal for the command whose token r carries.
func (p *Proxy) refused(token, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if reg := p.callers[token]; reg != nil && !slices.Contains(reg.refused, msg) {
		reg.refused = append(reg.refused, msg)
	}
}

// caller finds the tool call a request's Proxy-Authorization names.
func (p *Proxy) caller(r *http.Request) sandbox.Caller {
	reg := p.lookup(tokenOf(r))
	if reg == nil {
		return sandbox.Caller{}
	}
	return reg.caller
}

// running lists the tool calls of the commands registered now, oldest
// first.
func (p *Proxy) running() []sandbox.Caller {
	p.mu.Lock()
	regs := make([]*registered, 0, len(p.callers))
	for _, r := range p.callers {
		regs = append(regs, r)
	}
	p.mu.Unlock()
	slices.SortFunc(regs, func(a, b *registered) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]sandbox.Caller, len(regs))
	for i, r := range regs {
		out[i] = r.caller
	}
	return out
}

func (p *Proxy) lookup(token string) *registered {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.callers[token]
}

// tokenOf is the password of a request's Proxy-Authorization.
func tokenOf(r *http.Request) string {
	auth := r.Header.Get("Proxy-Authorization")
	scheme, cred, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return ""
	}
	_, token, _ := strings.Cut(string(raw), ":")
	return token
}

// Policy returns the rules in force (the configured ones and the answers
// given since).
func (p *Proxy) Policy() Policy {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.policy
}

// dialKey carries a proxied request's dialInfo to the transport's dial.
type dialKey struct{}

// dialHTTP connects a request goproxy carries: one inside an intercepted
// CONNECT to the address decided for the CONNECT, any other as decided now.
func (p *Proxy) dialHTTP(ctx context.Context, _, addr string) (net.Conn, error) {
	info, _ := ctx.Value(dialKey{}).(dialInfo)
	if in := info.in; in != nil {
		host, port, err := splitHostPort(addr)
		if err == nil && host == in.allowed.rec.Host && port == in.allowed.rec.Port {
			a := in.allowed
			a.rec.Time = time.Now()
			conn, done, err := p.open(ctx, a)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: conn, done: done}, nil
		}
	}
	return p.dial(ctx, info.token, addr)
}

// dial decides host:port for the command whose token it is and connects
// to the checked address; the connection's record is kept when it closes.
func (p *Proxy) dial(ctx context.Context, token, hostport string) (net.Conn, error) {
	conn, done, err := p.connect(ctx, token, hostport)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, done: done}, nil
}

// connect decides host:port for the command whose token it is and connects
// to the checked address. The connection is the dialer's own (a
// *net.TCPConn, which the kernel can splice); done records it with the
// bytes sent and received, once it is over.
func (p *Proxy) connect(ctx context.Context, token, hostport string) (net.Conn, func(sent, recv int64), error) {
	a, err := p.decide(ctx, token, hostport)
	if err != nil {
		return nil, nil, err
	}
	return p.open(ctx, a)
}

// allowed is a connection the policy allowed: its record so far and the
// checked address to connect to.
type allowed struct {
	rec  Record
	addr netip.AddrPort
}

// decide applies the policy to host:port for the command whose token it
// is, asking when no rule decides. A refusal is recorded here; an allowed
// connection when it is over.
func (p *Proxy) decide(ctx context.Context, token, hostport string) (allowed, error) {
	var c sandbox.Caller
	if reg := p.lookup(token); reg != nil {
		c = reg.caller
	}
	host, port, err := splitHostPort(hostport)
	if err != nil {
		return allowed{}, err
	}
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	rec := Record{Time: time.Now(), Host: host, Port: port, Caller: c}
	deny := func(rule string) (allowed, error) {
		rec.Decision, rec.Rule = DecisionDeny, rule
		pe := &PolicyError{HostPort: hp, Rule: rule, How: p.cfg.HowToAllow(hp)}
		rec.Error = pe.Error()
		p.record(rec)
		p.refused(token, pe.Error())
		return allowed{}, pe
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		addrs, err = p.cfg.Resolve(rctx, host)
		cancel()
		if err != nil {
			rec.Decision, rec.Rule, rec.Error = DecisionDeny, "name not resolved", err.Error()
			p.record(rec)
			return allowed{}, fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	pol := p.Policy()
	d := pol.Decide(host, port, addrs)
	if d.Addr.IsValid() {
		rec.Addr = d.Addr.String()
	}
	switch d.Verdict {
	case Denied:
		return deny(d.Rule)
	case Unknown:
		if p.cfg.Ask == nil {
			return deny("no rule allows it and nobody can be asked")
		}
		actx, cancel := context.WithTimeout(ctx, p.cfg.AskTimeout)
		ans := p.cfg.Ask(actx, Request{Host: host, Port: port, Addr: d.Addr, Running: p.running()})
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		switch ans {
		case AllowOnce:
			d.Rule = "allowed once"
		case AllowProject:
			d.Rule = "allowed always for this project"
			p.remember(Rule{Pattern: hp, Source: "always for this project"}, true)
		case DenyAlways:
			p.remember(Rule{Pattern: hp, Source: "always denied for this project"}, false)
			return deny("always denied for this project")
		default:
			if timedOut {
				return deny(fmt.Sprintf("no answer within %s", p.cfg.AskTimeout))
			}
			return deny("denied when asked")
		}
	}
	rec.Decision = DecisionAllow
	rec.Rule = d.Rule
	return allowed{rec: rec, addr: netip.AddrPortFrom(d.Addr, uint16(port))}, nil
}

// open connects to an allowed connection's address.
func (p *Proxy) open(ctx context.Context, a allowed) (net.Conn, func(sent, recv int64), error) {
	rec := a.rec
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := p.dialTCP(dctx, a.addr.String())
	if err != nil {
		rec.Error = err.Error()
		p.record(rec)
		return nil, nil, err
	}
	return conn, func(sent, recv int64) {
		rec.Sent, rec.Received = sent, recv
		p.record(rec)
	}, nil
}

// splitHostPort reads a request's host:port (port 80 when it has none) in
// the policy's form: lower case, no brackets, no trailing dot.
func splitHostPort(hostport string) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		host, ps = hostport, "80"
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return "", 0, fmt.Errorf("bad port in %q", hostport)
	}
	return strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), ".")), port, nil
}

// remember adds an "always" answer to the rules in force and stores it.
func (p *Proxy) remember(r Rule, allow bool) {
	p.mu.Lock()
	if allow {
		p.policy.Allow = append(append([]Rule(nil), p.policy.Allow...), r)
	} else {
		p.policy.Deny = append(append([]Rule(nil), p.policy.Deny...), r)
	}
	p.mu.Unlock()
	if p.cfg.Remember != nil {
		_ = p.cfg.Remember(r, allow) // kept for this process even when it cannot be stored
	}
}

func (p *Proxy) record(r Record) {
	if p.cfg.OnRecord != nil {
		p.cfg.OnRecord(r)
	}
}

// countingConn counts the bytes each way and reports them once, on Close.
type countingConn struct {
	net.Conn
	sent, recv atomic.Int64
	once       sync.Once
	done       func(sent, recv int64)
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.recv.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(int64(n))
	return n, err
}

func (c *countingConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.done(c.sent.Load(), c.recv.Load()) })
	return err
}

// writeError answers a CONNECT that could not be tunnelled: 403 with the
// policy's words, 502 otherwise.
func writeError(w io.Writer, err error) {
	code, status := http.StatusBadGateway, "Bad Gateway"
	var pe *PolicyError
	if errors.As(err, &pe) {
		code, status = http.StatusForbidden, "Forbidden"
	}
	msg := err.Error() + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, status, len(msg), msg)
}

// refusal is the 403 a plain HTTP request gets when the policy refuses it.
func refusal(req *http.Request, pe *PolicyError) *http.Response {
	return goproxy.NewResponse(req, goproxy.ContentTypeText, http.StatusForbidden, pe.Error()+"\n")
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}
