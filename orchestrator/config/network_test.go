package config

import (
	"slices"
	"strings"
	"testing"
)

func TestLoadNetworkRules(t *testing.T) {
	t.Parallel()
	patterns := func(rs []HostRule) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Pattern+" <- "+strings.SplitN(r.Source, " in ", 2)[0])
		}
		return out
	}
	tests := []struct {
		name         string
		fx           fixture
		mode         string
		allow, deny  []string
		noticeSubstr string
	}{
		{name: "ask is the default", mode: "ask"},
		{name: "bridge is read as open", fx: fixture{user: `{"sandbox": {"network": "bridge"}}`}, mode: "open"},
		{
			name:  "the user's allow and deny, then --allow-host",
			fx:    fixture{user: `{"network": {"allow": ["*.Example.com", "api.test:443"], "deny": ["evil.test"]}}`, flags: Overrides{AllowHosts: []string{"10.0.0.5:8080"}}},
			mode:  "ask",
			allow: []string{"*.example.com <- network.allow", "api.test:443 <- network.allow", "10.0.0.5:8080 <- --allow-host"},
			deny:  []string{"evil.test <- network.deny"},
		},
		{
			name:         "a project adds denials, never allowances",
			fx:           fixture{project: `{"network": {"allow": ["*"], "deny": ["tracker.test"]}}`},
			mode:         "ask",
			deny:         []string{"tracker.test <- network.deny"},
			noticeSubstr: `"network.allow" is ignored: a project can add denials, not allowances`,
		},
		{
			name:         "a project cannot widen ask to open",
			fx:           fixture{project: `{"sandbox": {"network": "open"}}`},
			mode:         "ask",
			noticeSubstr: `"sandbox.network" "open" is ignored: a project can narrow the sandbox network, not widen it (yours is ask)`,
		},
		{name: "a project can narrow ask to none", fx: fixture{project: `{"sandbox": {"network": "none"}}`}, mode: "none"},
		{name: "a project can narrow open to ask", fx: fixture{user: `{"sandbox": {"network": "open"}}`, project: `{"sandbox": {"network": "ask"}}`}, mode: "ask"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, notices, err := tt.fx.load(t)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Sandbox.Network != tt.mode {
				t.Errorf("mode %q, want %q", cfg.Sandbox.Network, tt.mode)
			}
			if got := patterns(cfg.Network.Allow); !slices.Equal(got, tt.allow) {
				t.Errorf("allow %q, want %q", got, tt.allow)
			}
			if got := patterns(cfg.Network.Deny); !slices.Equal(got, tt.deny) {
				t.Errorf("deny %q, want %q", got, tt.deny)
			}
			joined := strings.Join(notices, "\n")
			if tt.noticeSubstr != "" && !strings.Contains(joined, tt.noticeSubstr) {
				t.Errorf("notices %q lack %q", joined, tt.noticeSubstr)
			}
		})
	}
}

func TestLoadNetworkRulesRefuseBadPatterns(t *testing.T) {
	t.Parallel()
	for _, fx := range []fixture{
		{user: `{"network": {"allow": ["ex*ample.com"]}}`},
		{user: `{"network": {"deny": "evil.test"}}`},
		{flags: Overrides{AllowHosts: []string{"host:0"}}},
	} {
		if _, _, err := fx.load(t); err == nil {
			t.Errorf("%+v loaded", fx)
		}
	}
}

func TestLoadNetworkCredentials(t *testing.T) {
	t.Parallel()
	user := `{"network": {"credentials": [
		{"host": "API.test", "header": "Authorization", "env": "API_TOKEN"},
		{"host": "*.git.test:443", "header": "X-Token", "command": ["gh", "auth", "token"]},
		{"host": "HTTP://intranet.test", "header": "X-Key", "env": "K"}]}}`
	cfg, notices, err := fixture{user: user, project: `{"network": {"credentials": [{"host": "evil.test", "header": "X", "env": "HOME"}]}}`}.load(t)
	if err != nil {
		t.Fatal(err)
	}
	cs := cfg.Network.Credentials
	if len(cs) != 3 || cs[0].Host != "api.test" || cs[2].Host != "http://intranet.test" || cs[0].Env != "API_TOKEN" || !slices.Equal(cs[1].Command, []string{"gh", "auth", "token"}) ||
		!strings.HasPrefix(cs[1].Source, "network.credentials[1] in ") {
		t.Errorf("credentials %+v", cs)
	}
	if joined := strings.Join(notices, "\n"); !strings.Contains(joined, `"network.credentials" is ignored: a project cannot name credentials`) {
		t.Errorf("notices %q", joined)
	}
	for _, bad := range []string{
		`[{"host": "*", "header": "A", "env": "X"}]`,
		`[{"host": "https://*", "header": "A", "env": "X"}]`,
		`[{"host": "ftp://a.test", "header": "A", "env": "X"}]`,
		`[{"host": "a.test", "header": "A B", "env": "X"}]`,
		`[{"host": "a.test", "header": "Proxy-Authorization", "env": "X"}]`,
		`[{"host": "a.test", "header": "A"}]`,
		`[{"host": "a.test", "header": "A", "env": "X", "command": ["x"]}]`,
		`[{"host": "a.test", "header": "A", "command": "gh auth token"}]`,
		`[{"host": "a.test", "header": "A", "env": "X", "value": "inline"}]`,
	} {
		if _, _, err := (fixture{user: `{"network": {"credentials": ` + bad + `}}`}).load(t); err == nil {
			t.Errorf("%s loaded", bad)
		}
	}
}
