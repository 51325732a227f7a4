package integration

import (
	"crypto/rand"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// In ask mode every connection goes through shiro's proxy and its CA. git
// and curl in the default image reach an HTTPS server on a loopback
// address of this machine through the proxy (intercepted: the sandbox sees
// a certificate of shiro's CA, which its bundle holds), and each other
// client finds the variables it reads: the proxy and the bundle, the JVMs
// a trust store and the proxy in JAVA_TOOL_OPTIONS, wget a wgetrc.
func TestEgressToolchainsEnvironment(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("ws")
	bearer := "Bearer " + token(t, "cred")
	b := make([]byte, 3)
	rand.Read(b)
	ip := netip.AddrFrom4([4]byte{127, b[0] | 1, b[1], b[2] | 1})

	repos := h.dir("repos", 0o755)
	src := h.dir("src", 0o755)
	h.git(src, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("through the proxy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.git(src, "add", "README")
	h.git(src, "commit", "-q", "-m", "first")
	h.git(repos, "clone", "-q", "--bare", src, "repo.git")
	srv := startCredServer(t, ip, bearer, repos, "site-answer")
	trust := filepath.Join(h.base, "server.pem")
	if err := os.WriteFile(trust, srv.certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	// A credential for the server makes the proxy intercept it.
	h.dir("home/.config", 0o700)
	cfgDir := h.dir("home/.config/shiro", 0o700)
	cfg, _ := json.Marshal(map[string]any{"network": map[string]any{"credentials": []map[string]any{
		{"host": srv.hp, "header": "Authorization", "env": "SHIRO_TEST_CREDENTIAL"},
	}}})
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(cfgDir, "config.json"), h.uid, h.gid); err != nil {
		t.Fatal(err)
	}
	// The loopback is in NO_PROXY (the sandbox's own); these requests are
	// for the proxy, which reaches this machine's loopback.
	vars := []string{"CARGO_HTTP_CAINFO", "PIP_CERT", "npm_config_cafile", "npm_config_https_proxy", "YARN_HTTPS_PROXY", "YARN_CA_FILE_PATH", "WGETRC"}
	lines := []string{
		"echo curl: $(curl -sS --noproxy '' -m 20 " + srv.url + "/)",
		"echo git: $(env -u no_proxy -u NO_PROXY git ls-remote " + srv.url + "/git/repo.git | cut -f2)",
		"env -u no_proxy -u NO_PROXY git clone -q " + srv.url + "/git/repo.git /tmp/clone 2>&1 && echo clone: $(cat /tmp/clone/README)",
		"echo java: $JAVA_TOOL_OPTIONS",
		"echo store: $(head -c 4 /.shiro/ca/truststore.jks | od -An -tx1 | tr -d ' ')",
		"echo wgetrc: $(cat \"$WGETRC\")",
	}
	for _, v := range vars {
		lines = append(lines, "echo "+v+"=$"+v)
	}
	res := h.shiro(ws, []string{"SHIRO_TEST_CREDENTIAL=" + bearer, "SSL_CERT_FILE=" + trust},
		"--allow-host", srv.hp, "tool", "bash", bashJSON(strings.Join(lines, "\n"), 120000))
	out := res.stdout
	if res.code != 0 {
		t.Fatalf("shiro: exit %d\nstdout: %s\nstderr: %s", res.code, out, res.stderr)
	}
	mustContain(t, "sandbox", out, "curl: site-answer", "git: HEAD refs/heads/main", "clone: through the proxy",
		"-Dhttps.proxyHost=127.0.0.1", "-Djavax.net.ssl.trustStore=/.shiro/ca/truststore.jks", "-Dhttps.proxyUser=shiro",
		"store: feedfeed", "wgetrc: ca_certificate = /.shiro/ca/bundle.pem",
		"CARGO_HTTP_CAINFO=/.shiro/ca/bundle.pem", "PIP_CERT=/.shiro/ca/bundle.pem", "npm_config_cafile=/.shiro/ca/bundle.pem",
		"npm_config_https_proxy=http://shiro:", "YARN_HTTPS_PROXY=http://shiro:", "YARN_CA_FILE_PATH=/.shiro/ca/bundle.pem",
		"WGETRC=/.shiro/ca/wgetrc")
	if auth, _ := srv.seen(); len(auth) < 3 {
		t.Errorf("the server saw %d requests, want curl's and git's", len(auth))
	}
}
