package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func TestDecide(t *testing.T) {
	t.Parallel()
	allow := func(p ...string) []Rule {
		var out []Rule
		for _, x := range p {
			out = append(out, Rule{Pattern: x, Source: "--allow-host"})
		}
		return out
	}
	tests := []struct {
		name    string
		pol     Policy
		host    string
		port    int
		addrs   []netip.Addr
		verdict Verdict
		addr    string
		rule    string
	}{
		{name: "no rule is unknown", host: "example.com", port: 443, addrs: addrs("93.184.216.34"), verdict: Unknown, addr: "93.184.216.34"},
		{name: "exact host allows", pol: Policy{Allow: allow("example.com")}, host: "example.com", port: 443, addrs: addrs("93.184.216.34"), verdict: Allowed, addr: "93.184.216.34", rule: "--allow-host example.com"},
		{name: "host:port allows only that port", pol: Policy{Allow: allow("example.com:443")}, host: "example.com", port: 80, addrs: addrs("93.184.216.34"), verdict: Unknown},
		{name: "wildcard covers subdomains", pol: Policy{Allow: allow("*.example.com")}, host: "api.example.com", port: 443, addrs: addrs("93.184.216.34"), verdict: Allowed},
		{name: "wildcard does not cover the domain itself", pol: Policy{Allow: allow("*.example.com")}, host: "example.com", port: 443, addrs: addrs("93.184.216.34"), verdict: Unknown},
		{name: "wildcard does not cover a lookalike", pol: Policy{Allow: allow("*.example.com")}, host: "badexample.com", port: 443, addrs: addrs("93.184.216.34"), verdict: Unknown},
		{name: "deny beats allow", pol: Policy{Allow: allow("*"), Deny: []Rule{{Pattern: "evil.com", Source: "network.deny in .shiro/config.json"}}}, host: "evil.com", port: 443, addrs: addrs("93.184.216.35"), verdict: Denied, rule: "network.deny in .shiro/config.json evil.com"},
		{name: "deny by resolved address", pol: Policy{Deny: []Rule{{Pattern: "93.184.216.35", Source: "x"}}}, host: "evil.com", port: 443, addrs: addrs("93.184.216.35"), verdict: Denied},
		{name: "loopback refused under a wildcard", pol: Policy{Allow: allow("*")}, host: "127.0.0.1", port: 8080, addrs: addrs("127.0.0.1"), verdict: Denied, rule: "loopback address 127.0.0.1"},
		{name: "name resolving to loopback refused under a wildcard", pol: Policy{Allow: allow("*.example.com")}, host: "local.example.com", port: 80, addrs: addrs("127.0.0.1"), verdict: Denied, rule: "loopback"},
		{name: "private refused without an exact rule", host: "10.1.2.3", port: 80, addrs: addrs("10.1.2.3"), verdict: Denied, rule: "private address 10.1.2.3"},
		{name: "metadata address refused", pol: Policy{Allow: allow("*")}, host: "169.254.169.254", port: 80, addrs: addrs("169.254.169.254"), verdict: Denied, rule: "link-local"},
		{name: "ipv6 unique local refused", pol: Policy{Allow: allow("*")}, host: "fd00::1", port: 80, addrs: addrs("fd00::1"), verdict: Denied, rule: "private"},
		{name: "host's own address refused", pol: Policy{Allow: allow("*"), HostAddrs: addrs("203.0.113.7")}, host: "203.0.113.7", port: 22, addrs: addrs("203.0.113.7"), verdict: Denied, rule: "this machine's"},
		{name: "exact address reaches a private one", pol: Policy{Allow: allow("10.1.2.3:80")}, host: "10.1.2.3", port: 80, addrs: addrs("10.1.2.3"), verdict: Allowed, addr: "10.1.2.3"},
		{name: "exact name reaches the loopback it resolves to", pol: Policy{Allow: allow("localhost")}, host: "localhost", port: 80, addrs: addrs("127.0.0.1"), verdict: Allowed, addr: "127.0.0.1"},
		{name: "a public address is preferred to a private one", pol: Policy{Allow: allow("*")}, host: "mixed.example", port: 80, addrs: addrs("10.0.0.1", "93.184.216.34"), verdict: Allowed, addr: "93.184.216.34"},
		// IPv6 spellings of IPv4 are judged by the IPv4 address they carry,
		// and reserved IPv4 ranges are special: decided here, never dialled.
		{name: "ipv4-mapped loopback refused under a wildcard", pol: Policy{Allow: allow("*")}, host: "::ffff:127.0.0.1", port: 80, addrs: addrs("::ffff:127.0.0.1"), verdict: Denied, rule: "loopback"},
		{name: "ipv4-compatible loopback refused under a wildcard", pol: Policy{Allow: allow("*")}, host: "::127.0.0.1", port: 80, addrs: addrs("::127.0.0.1"), verdict: Denied, rule: "loopback address ::7f00:1 (which carries 127.0.0.1)"},
		{name: "ipv4-compatible private refused", pol: Policy{Allow: allow("*")}, host: "::10.0.0.1", port: 80, addrs: addrs("::10.0.0.1"), verdict: Denied, rule: "private"},
		{name: "ipv4-compatible metadata refused", pol: Policy{Allow: allow("*")}, host: "::169.254.169.254", port: 80, addrs: addrs("::169.254.169.254"), verdict: Denied, rule: "link-local"},
		{name: "nat64 of loopback refused", pol: Policy{Allow: allow("*")}, host: "64:ff9b::127.0.0.1", port: 80, addrs: addrs("64:ff9b::7f00:1"), verdict: Denied, rule: "(which carries 127.0.0.1)"},
		{name: "nat64 of metadata refused", pol: Policy{Allow: allow("*")}, host: "64:ff9b::a9fe:a9fe", port: 80, addrs: addrs("64:ff9b::a9fe:a9fe"), verdict: Denied, rule: "link-local"},
		{name: "nat64 of a public address is public", pol: Policy{Allow: allow("*")}, host: "64:ff9b::5db8:d822", port: 443, addrs: addrs("64:ff9b::5db8:d822"), verdict: Allowed, addr: "64:ff9b::5db8:d822"},
		{name: "local-use nat64 /96 of private refused", pol: Policy{Allow: allow("*")}, host: "64:ff9b:1::a00:1", port: 80, addrs: addrs("64:ff9b:1::a00:1"), verdict: Denied, rule: "private"},
		{name: "local-use nat64 /48 of metadata refused", pol: Policy{Allow: allow("*")}, host: "64:ff9b:1:a9fe:a9:fe00::", port: 80, addrs: addrs("64:ff9b:1:a9fe:a9:fe00::"), verdict: Denied, rule: "link-local"},
		{name: "local-use nat64 /64 of loopback refused", pol: Policy{Allow: allow("*")}, host: "64:ff9b:1::7f:0:100:0", port: 80, addrs: addrs("64:ff9b:1:0:7f:0:100:0"), verdict: Denied, rule: "loopback"},
		{name: "6to4 of loopback refused", pol: Policy{Allow: allow("*")}, host: "2002:7f00:1::1", port: 80, addrs: addrs("2002:7f00:1::1"), verdict: Denied, rule: "(which carries 127.0.0.1)"},
		{name: "6to4 of private refused", pol: Policy{Allow: allow("*")}, host: "2002:c0a8:101::1", port: 80, addrs: addrs("2002:c0a8:101::1"), verdict: Denied, rule: "private"},
		{name: "6to4 of the host's own address refused", pol: Policy{Allow: allow("*"), HostAddrs: addrs("203.0.113.7")}, host: "2002:cb00:7107::1", port: 80, addrs: addrs("2002:cb00:7107::1"), verdict: Denied, rule: "this machine's"},
		{name: "6to4 of a public address is public", pol: Policy{Allow: allow("*")}, host: "2002:5db8:d822::1", port: 443, addrs: addrs("2002:5db8:d822::1"), verdict: Allowed},
		{name: "this network refused", pol: Policy{Allow: allow("*")}, host: "0.1.2.3", port: 80, addrs: addrs("0.1.2.3"), verdict: Denied, rule: "reserved address 0.1.2.3"},
		{name: "0.0.0.0 refused", pol: Policy{Allow: allow("*")}, host: "0.0.0.0", port: 80, addrs: addrs("0.0.0.0"), verdict: Denied, rule: "reserved"},
		{name: "protocol assignments refused", pol: Policy{Allow: allow("*")}, host: "192.0.0.170", port: 80, addrs: addrs("192.0.0.170"), verdict: Denied, rule: "reserved"},
		{name: "benchmarking refused", pol: Policy{Allow: allow("*")}, host: "198.19.255.1", port: 80, addrs: addrs("198.19.255.1"), verdict: Denied, rule: "reserved"},
		{name: "class E refused", pol: Policy{Allow: allow("*")}, host: "240.0.0.1", port: 80, addrs: addrs("240.0.0.1"), verdict: Denied, rule: "reserved"},
		{name: "broadcast refused", pol: Policy{Allow: allow("*")}, host: "255.255.255.255", port: 80, addrs: addrs("255.255.255.255"), verdict: Denied, rule: "reserved"},
		{name: "mapped reserved refused", pol: Policy{Allow: allow("*")}, host: "::ffff:198.18.0.1", port: 80, addrs: addrs("::ffff:198.18.0.1"), verdict: Denied, rule: "reserved"},
		{name: "next to benchmarking is public", pol: Policy{Allow: allow("*")}, host: "198.20.0.1", port: 80, addrs: addrs("198.20.0.1"), verdict: Allowed},
		{name: "an exact rule still reaches a carried loopback", pol: Policy{Allow: allow("[::127.0.0.1]:80")}, host: "::127.0.0.1", port: 80, addrs: addrs("::127.0.0.1"), verdict: Allowed, addr: "::7f00:1"},
		{name: "case and trailing dot do not matter", pol: Policy{Allow: allow("Example.COM")}, host: "example.com.", port: 1, addrs: addrs("93.184.216.34"), verdict: Allowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for i, r := range tt.pol.Allow {
				tt.pol.Allow[i].Pattern, _ = ParsePattern(r.Pattern)
			}
			d := tt.pol.Decide(tt.host, tt.port, tt.addrs)
			if d.Verdict != tt.verdict {
				t.Fatalf("verdict %d, want %d (%+v)", d.Verdict, tt.verdict, d)
			}
			if tt.addr != "" && d.Addr.String() != tt.addr {
				t.Errorf("address %s, want %s", d.Addr, tt.addr)
			}
			if !strings.Contains(d.Rule, tt.rule) {
				t.Errorf("rule %q, want it to contain %q", d.Rule, tt.rule)
			}
		})
	}
}

func TestParsePattern(t *testing.T) {
	t.Parallel()
	for _, good := range []string{"example.com", "*.example.com", "example.com:443", "10.0.0.1", "[::1]:80", "::1", "*", "*:443"} {
		if _, err := ParsePattern(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"", "ex*ample.com", "example.com:0", "example.com:http", "*.", "a/b"} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
