package sandbox

import (
	"slices"
	"strings"
	"testing"
)

func TestProxyEnvSetsBothSpellingsAndKeepsTheLoopbackDirect(t *testing.T) {
	t.Parallel()
	env := ProxyEnv(4711, "tok", "abcdef123456")
	for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		for _, n := range []string{name, strings.ToLower(name)} {
			if !slices.Contains(env, n+"=http://shiro:tok@127.0.0.1:4711") {
				t.Errorf("%s missing from %q", n, env)
			}
		}
	}
	for _, n := range []string{"NO_PROXY", "no_proxy"} {
		if !slices.Contains(env, n+"=localhost,127.0.0.1,::1,127.0.0.0/8,abcdef123456") {
			t.Errorf("%s missing from %q", n, env)
		}
	}
}

// Each client that reads its own variables gets them: the proxy (with the
// token) and the bundle, the JVMs one JAVA_TOOL_OPTIONS with both.
func TestEgressEnvForEachClient(t *testing.T) {
	t.Parallel()
	const u = "http://shiro:tok@127.0.0.1:4711"
	const b = "/.shiro/ca/bundle.pem"
	env := JoinEnv(append(ProxyEnv(4711, "tok", "abcdef123456"), TrustEnv(b, "/.shiro/ca/truststore.jks", "/.shiro/ca/wgetrc")...))
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s is set twice", k)
		}
		got[k] = v
	}
	for k, want := range map[string]string{
		"https_proxy": u, "HTTPS_PROXY": u, // curl, wget, git, go, pip, cargo
		"npm_config_proxy": u, "npm_config_https_proxy": u, "npm_config_noproxy": "localhost,127.0.0.1,::1,127.0.0.0/8,abcdef123456", // npm, pnpm, yarn 1
		"YARN_HTTP_PROXY": u, "YARN_HTTPS_PROXY": u, // yarn 2+
		"SSL_CERT_FILE": b, "GIT_SSL_CAINFO": b, "CURL_CA_BUNDLE": b, "NODE_EXTRA_CA_CERTS": b, "REQUESTS_CA_BUNDLE": b,
		"CARGO_HTTP_CAINFO": b, "PIP_CERT": b, "npm_config_cafile": b, "YARN_CA_FILE_PATH": b, "DENO_CERT": b,
		"WGETRC": "/.shiro/ca/wgetrc",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	java := strings.Fields(got["JAVA_TOOL_OPTIONS"])
	for _, want := range []string{
		"-Dhttps.proxyHost=127.0.0.1", "-Dhttps.proxyPort=4711", "-Dhttp.proxyHost=127.0.0.1", "-Dhttp.proxyPort=4711",
		"-Dhttp.nonProxyHosts=localhost|127.*|[::1]|abcdef123456", "-Dhttps.proxyUser=shiro", "-Dhttps.proxyPassword=tok",
		"-Djdk.http.auth.tunneling.disabledSchemes=",
		"-Djavax.net.ssl.trustStore=/.shiro/ca/truststore.jks", "-Djavax.net.ssl.trustStoreType=JKS", "-Djavax.net.ssl.trustStorePassword=changeit",
	} {
		if !slices.Contains(java, want) {
			t.Errorf("JAVA_TOOL_OPTIONS lacks %s: %q", want, got["JAVA_TOOL_OPTIONS"])
		}
	}
	if w := string(Wgetrc(b)); w != "ca_certificate = "+b+"\n" {
		t.Errorf("wgetrc %q", w)
	}
}
