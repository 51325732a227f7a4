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
// hostname (when known) kept direct.
func ProxyEnv(port int, token, hostname string) []string {
	u := "http://shiro:" + token + "@127.0.0.1:" + strconv.Itoa(port)
	direct := []string{"localhost", "127.0.0.1", "::1", "127.0.0.0/8"}
	if hostname != "" {
		direct = append(direct, hostname)
	}
	no := strings.Join(direct, ",")
	var env []string
	for _, kv := range [][2]string{{"HTTP_PROXY", u}, {"HTTPS_PROXY", u}, {"ALL_PROXY", u}, {"NO_PROXY", no}} {
		env = append(env, kv[0]+"="+kv[1], strings.ToLower(kv[0])+"="+kv[1])
	}
	return env
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
// intercepts).
func TrustEnv(bundle string) []string {
	vars := []string{"SSL_CERT_FILE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}
	env := make([]string, 0, len(vars))
	for _, v := range vars {
		env = append(env, v+"="+bundle)
	}
	return env
}
