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
