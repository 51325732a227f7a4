package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// credServer is an HTTPS server the test starts on the host with its own
// self-signed certificate, which keeps the Authorization header of every
// request it sees and serves a bare repository with git's smart HTTP.
type credServer struct {
	hp      string
	url     string
	certPEM []byte
	mu      sync.Mutex
	auth    []string // Authorization of each request, in order
	paths   []string
}

func (s *credServer) seen() (auth, paths []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...), append([]string(nil), s.paths...)
}

// startCredServer serves on ip; want, when set, is the only Authorization
// it answers (401 otherwise).
func startCredServer(t *testing.T, ip netip.Addr, want, repoRoot, answer string) *credServer {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	return serveCred(t, ln, ip, want, repoRoot, answer)
}

// serveCred is startCredServer on a listener of the caller's.
func serveCred(t *testing.T, ln net.Listener, ip netip.Addr, want, repoRoot, answer string) *credServer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "shiro test server " + ip.String()},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{ip.AsSlice()},
		IsCA:         true, BasicConstraintsValid: true, // its own root
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	s := &credServer{hp: ln.Addr().String(), certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	s.url = "https://" + s.hp
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Root: "/git",
		Env: []string{"GIT_PROJECT_ROOT=" + repoRoot, "GIT_HTTP_EXPORT_ALL=1", // the repository is the test user's
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*"}}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		if want != "" && r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Bearer realm="test"`)
			http.Error(w, "no credential", http.StatusUnauthorized)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/git/") {
			backend.ServeHTTP(w, r)
			return
		}
		w.Write([]byte(answer + "\n"))
	})}
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return s
}

// TestNetworkCredentialsNeverEnterTheSandbox configures a credential for
// an HTTPS server the test runs on the host (with its own certificate,
// which shiro on the host trusts through SSL_CERT_FILE): curl and git in
// the sandbox reach it authenticated, a second server that no credential
// names sees no header, and no file or process environment in the
// container holds the value.
func TestNetworkCredentialsNeverEnterTheSandbox(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("ws")
	gw := bridgeGateway(t, h.api)
	secret := token(t, "cred")
	bearer := "Bearer " + secret

	// A bare repository with one commit, served by git http-backend.
	repos := h.dir("repos", 0o755)
	src := h.dir("src", 0o755)
	h.git(src, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("served over https\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.git(src, "add", "README")
	h.git(src, "commit", "-q", "-m", "first")
	h.git(repos, "clone", "-q", "--bare", src, "repo.git")

	configured := startCredServer(t, gw, bearer, repos, "authorized")
	other := startCredServer(t, gw, "", repos, "other")

	// shiro (on the host) trusts the two test servers; the sandbox does not
	// learn of them.
	trust := filepath.Join(h.base, "servers.pem")
	if err := os.WriteFile(trust, append(append([]byte(nil), configured.certPEM...), other.certPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	h.dir("home/.config", 0o700)
	cfgDir := h.dir("home/.config/shiro", 0o700)
	cfg, _ := json.Marshal(map[string]any{"network": map[string]any{"credentials": []map[string]any{
		{"host": configured.hp, "header": "Authorization", "env": "SHIRO_TEST_CREDENTIAL"},
	}}})
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(cfgDir, "config.json"), h.uid, h.gid); err != nil {
		t.Fatal(err)
	}

	// The value as the sandbox would have to spell it to find it; the
	// command carries it encoded, never in an environment variable.
	pat := base64.StdEncoding.EncodeToString([]byte(secret))
	command := strings.Join([]string{
		"pat=$(echo " + pat + " | base64 -d)",
		"echo curl: $(curl -sS -m 20 " + configured.url + "/)",
		"echo ls-remote: $(git ls-remote " + configured.url + "/git/repo.git | cut -f2)",
		"git clone -q " + configured.url + "/git/repo.git /tmp/clone 2>&1 && echo clone: $(cat /tmp/clone/README)",
		"echo other: $(curl -sS -k -m 20 " + other.url + "/)",
		"echo trust: $SSL_CERT_FILE $GIT_SSL_CAINFO $NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE $CURL_CA_BUNDLE",
		// The searches below can find the value: a control file holds it.
		"printf '%s' \"$pat\" > /tmp/control",
		"for f in $(grep -rlsF -- \"$pat\" /proc/[0-9]*/environ /.shiro \"$HOME\" /tmp); do echo found: $f; done",
		"rm -f /tmp/control",
		"env | grep -qF -- \"$pat\" && echo found: env",
		"grep -rlsF 'PRIVATE KEY' /.shiro/ca && echo found: a private key",
		"echo searched",
	}, "\n")
	res := h.shiro(ws, []string{"SHIRO_TEST_CREDENTIAL=" + bearer, "SSL_CERT_FILE=" + trust},
		"--allow-host", configured.hp, "--allow-host", other.hp, "tool", "bash", bashJSON(command, 120000))
	out := res.stdout
	if res.code != 0 {
		t.Fatalf("shiro: exit %d\nstdout: %s\nstderr: %s", res.code, out, res.stderr)
	}
	mustContain(t, "sandbox", out, "curl: authorized", "ls-remote: HEAD refs/heads/main", "clone: served over https", "other: other",
		"trust: /.shiro/ca/bundle.pem /.shiro/ca/bundle.pem /.shiro/ca/bundle.pem /.shiro/ca/bundle.pem /.shiro/ca/bundle.pem",
		"found: /tmp/control", "searched")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "found: ") && line != "found: /tmp/control" {
			t.Errorf("the credential is readable in the sandbox: %s", line)
		}
	}
	if strings.Contains(out, secret) || strings.Contains(res.stderr, secret) {
		t.Errorf("the credential reached the command's output:\n%s\n%s", out, res.stderr)
	}

	// What the servers saw.
	auth, paths := configured.seen()
	var gitReqs int
	for i, a := range auth {
		if a != bearer {
			t.Errorf("the configured server saw %q on %s, want the credential", a, paths[i])
		}
		if strings.HasPrefix(paths[i], "/git/") {
			gitReqs++
		}
	}
	if len(auth) < 3 || gitReqs < 2 {
		t.Errorf("the configured server saw %d requests (%d from git): %q", len(auth), gitReqs, paths)
	}
	oauth, _ := other.seen()
	if len(oauth) != 1 || oauth[0] != "" {
		t.Errorf("the unconfigured server saw Authorization %q, want one request without it", oauth)
	}

	// The CA's key stays in the user's data directory, for the user alone.
	keys, _ := filepath.Glob(filepath.Join(h.home, ".local", "share", "shiro", "network", "*-ca-key.pem"))
	if len(keys) != 1 {
		t.Fatalf("CA keys in the data directory: %v", keys)
	}
	if fi, err := os.Stat(keys[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the CA key %s: %v, mode %v", keys[0], err, fi.Mode())
	}
}

// TestNetworkCredentialsOnlyOverTLS: a credential whose host names no port
// goes over TLS to port 443 only. A command in the sandbox asks the same
// host in plain HTTP (another port) and in HTTPS (443, intercepted): the
// plain server sees no header, the TLS one sees the credential. Both
// servers are on one loopback address of this machine, which the
// credential names.
func TestNetworkCredentialsOnlyOverTLS(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("ws")
	bearer := "Bearer " + token(t, "cred")

	// Port 443 on a loopback address no other test is likely to hold.
	var ip netip.Addr
	var ln443 net.Listener
	for i := 0; ln443 == nil; i++ {
		b := make([]byte, 3)
		rand.Read(b)
		ip = netip.AddrFrom4([4]byte{127, b[0] | 1, b[1], b[2] | 1})
		l, err := net.Listen("tcp", netip.AddrPortFrom(ip, 443).String())
		if err != nil && i == 20 {
			t.Fatalf("listen on port 443 of a loopback address: %v", err)
		}
		ln443 = l
	}
	tlsSrv := serveCred(t, ln443, ip, "", h.base, "over-tls")
	plain := &credServer{}
	lnPlain, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	plain.hp = lnPlain.Addr().String()
	psrv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plain.mu.Lock()
		plain.auth = append(plain.auth, r.Header.Get("Authorization"))
		plain.mu.Unlock()
		w.Write([]byte("over-plain-http\n"))
	})}
	go psrv.Serve(lnPlain)
	t.Cleanup(func() { psrv.Close() })

	trust := filepath.Join(h.base, "server.pem")
	if err := os.WriteFile(trust, tlsSrv.certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	h.dir("home/.config", 0o700)
	cfgDir := h.dir("home/.config/shiro", 0o700)
	cfg, _ := json.Marshal(map[string]any{"network": map[string]any{"credentials": []map[string]any{
		{"host": ip.String(), "header": "Authorization", "env": "SHIRO_TEST_CREDENTIAL"},
	}}})
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(cfgDir, "config.json"), h.uid, h.gid); err != nil {
		t.Fatal(err)
	}
	// --noproxy '': the loopback is in NO_PROXY, and these requests are
	// for the proxy, which reaches this machine's loopback.
	command := strings.Join([]string{
		"echo plain: $(curl -sS --noproxy '' -m 20 http://" + plain.hp + "/)",
		"echo tls: $(curl -sS --noproxy '' -m 20 https://" + ip.String() + "/)",
	}, "\n")
	res := h.shiro(ws, []string{"SHIRO_TEST_CREDENTIAL=" + bearer, "SSL_CERT_FILE=" + trust},
		"--allow-host", plain.hp, "--allow-host", ip.String()+":443", "tool", "bash", bashJSON(command, 60000))
	mustContain(t, "sandbox", res.stdout, "plain: over-plain-http", "tls: over-tls")
	plainAuth, _ := plain.seen()
	if len(plainAuth) != 1 || plainAuth[0] != "" {
		t.Errorf("the plain-HTTP server saw Authorization %q, want one request without it", plainAuth)
	}
	tlsAuth, _ := tlsSrv.seen()
	if len(tlsAuth) != 1 || tlsAuth[0] != bearer {
		t.Errorf("the TLS server saw Authorization %q, want the credential once", tlsAuth)
	}
}
