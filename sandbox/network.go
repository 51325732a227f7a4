package sandbox

import (
	"net"
	"strconv"
	"strings"
)

// The sandbox's network modes (Settings.Network).
const (
	// NetworkAsk: no network of the sandbox's own; every connection goes
	// through the egress proxy on the host, host by host.
	NetworkAsk = "ask"
	// NetworkOpen: the engine's default network ("bridge" is another name).
	NetworkOpen = "open"
	// NetworkNone: no network at all.
	NetworkNone = "none"
)

// Egress serves the connections a sandbox in ask mode makes (the egress
// proxy, sandbox/egress). The engines carry the connections to it.
type Egress interface {
	// Serve answers proxy requests on l until l is closed.
	Serve(l net.Listener) error
	// Register names the tool call of a command: its proxy URL carries the
	// token; release forgets it and returns the refusals the command's
	// connections met, as notices for its result.
	Register(c Caller) (token string, release func() []string)
}

// ProxyEnv is the environment that points a command at the forwarder on
// the sandbox's loopback port: both spellings of each proxy variable, the
// token naming its tool call, and the loopback and the sandbox's own
// hostname (when known) kept direct. The clients that read the usual
// variables (curl, wget, git, go, pip, cargo) need no more; for the others
// it sets their own: npm, pnpm and yarn 1 (npm_config_proxy,
// npm_config_https_proxy, npm_config_noproxy), yarn 2+ (YARN_HTTP_PROXY,
// YARN_HTTPS_PROXY) and every JVM, Gradle, Maven and sbt included
// (JAVA_TOOL_OPTIONS: the http(s).proxy* properties, the token as
// proxyUser and proxyPassword, and Basic allowed for the tunnel; JoinEnv
// joins it with TrustEnv's).
func ProxyEnv(port int, token, hostname string) []string {
	p := strconv.Itoa(port)
	u := "http://shiro:" + token + "@127.0.0.1:" + p
	direct := []string{"localhost", "127.0.0.1", "::1", "127.0.0.0/8"}
	if hostname != "" {
		direct = append(direct, hostname)
	}
	no := strings.Join(direct, ",")
	var env []string
	for _, kv := range [][2]string{{"HTTP_PROXY", u}, {"HTTPS_PROXY", u}, {"ALL_PROXY", u}, {"NO_PROXY", no}} {
		env = append(env, kv[0]+"="+kv[1], strings.ToLower(kv[0])+"="+kv[1])
	}
	env = append(env,
		"npm_config_proxy="+u, "npm_config_https_proxy="+u, "npm_config_noproxy="+no,
		"YARN_HTTP_PROXY="+u, "YARN_HTTPS_PROXY="+u,
	)
	javaDirect := []string{"localhost", "127.*", "[::1]"}
	if hostname != "" {
		javaDirect = append(javaDirect, hostname)
	}
	java := []string{
		"-Dhttp.proxyHost=127.0.0.1", "-Dhttp.proxyPort=" + p,
		"-Dhttps.proxyHost=127.0.0.1", "-Dhttps.proxyPort=" + p,
		"-Dhttp.nonProxyHosts=" + strings.Join(javaDirect, "|"),
		"-Dhttp.proxyUser=shiro", "-Dhttp.proxyPassword=" + token,
		"-Dhttps.proxyUser=shiro", "-Dhttps.proxyPassword=" + token,
		"-Djdk.http.auth.tunneling.disabledSchemes=", "-Djdk.http.auth.proxying.disabledSchemes=",
	}
	return append(env, JavaOptions+"="+strings.Join(java, " "))
}

// JavaOptions is the variable every JVM reads its extra options from.
const JavaOptions = "JAVA_TOOL_OPTIONS"

// JoinEnv returns env with the values of JavaOptions, which ProxyEnv and
// TrustEnv both set, joined into one entry (in the place of the first);
// the other entries as they are.
func JoinEnv(env []string) []string {
	out := make([]string, 0, len(env))
	at := -1
	for _, kv := range env {
		v, ok := strings.CutPrefix(kv, JavaOptions+"=")
		if !ok {
			out = append(out, kv)
			continue
		}
		if at < 0 {
			at = len(out)
			out = append(out, kv)
			continue
		}
		if v != "" {
			out[at] += " " + v
		}
	}
	return out
}

// SystemBundles are where images keep their system's CA bundle.
var SystemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/cert.pem",                  // Alpine, macOS-like layouts
	"/etc/ssl/ca-bundle.pem",             // openSUSE
}

// TrustEnv points the usual clients at a CA bundle (the image's system
// bundle and the certificate of the CA that signs for the hosts the proxy
// intercepts): OpenSSL and Go (SSL_CERT_FILE), git, Node (which adds it to
// its own), Python requests, curl, Cargo, pip, npm, pnpm and yarn 1 (their
// cafile), yarn 2+ and Deno. javaStore, when not "", is the same bundle as
// a Java trust store (JavaTrustStore) for every JVM; wgetrc a wgetrc that
// names the bundle (wget reads no variable for it).
func TrustEnv(bundle, javaStore, wgetrc string) []string {
	vars := []string{"SSL_CERT_FILE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
		"CARGO_HTTP_CAINFO", "PIP_CERT", "npm_config_cafile", "YARN_CA_FILE_PATH", "DENO_CERT"}
	env := make([]string, 0, len(vars)+2)
	for _, v := range vars {
		env = append(env, v+"="+bundle)
	}
	if javaStore != "" {
		env = append(env, JavaOptions+"=-Djavax.net.ssl.trustStore="+javaStore+
			" -Djavax.net.ssl.trustStoreType=JKS -Djavax.net.ssl.trustStorePassword="+JavaTrustStorePassword)
	}
	if wgetrc != "" {
		env = append(env, "WGETRC="+wgetrc)
	}
	return env
}

// Wgetrc is the wgetrc that points wget at a CA bundle.
func Wgetrc(bundle string) []byte { return []byte("ca_certificate = " + bundle + "\n") }
