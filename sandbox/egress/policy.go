package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Rule is one allow or deny pattern and where it came from.
//
// A pattern is a host name ("example.com"), a wildcard over its subdomains
// ("*.example.com", which does not match example.com itself), an address
// ("10.0.0.5", "[::1]"), or "*" (every host); any of them may end in
// ":port". Source names the rule for the record and the error
// ("--allow-host", "network.allow in ~/.config/shiro/config.json").
type Rule struct {
	Pattern string `json:"pattern"`
	Source  string `json:"source"`
}

func (r Rule) String() string { return r.Source + " " + r.Pattern }

// ParsePattern checks a pattern and returns it in canonical form (lower
// case, brackets kept for IPv6 with a port).
func ParsePattern(p string) (string, error) {
	_, _, _, err := splitPattern(p)
	if err != nil {
		return "", err
	}
	return strings.ToLower(strings.TrimSpace(p)), nil
}

// splitPattern returns the host part, the port (0 for any) and whether the
// host is a wildcard.
func splitPattern(p string) (host string, port int, wild bool, err error) {
	p = strings.ToLower(strings.TrimSpace(p))
	if p == "" {
		return "", 0, false, fmt.Errorf("empty host pattern")
	}
	host = p
	if h, ps, e := net.SplitHostPort(p); e == nil {
		n, e := strconv.Atoi(ps)
		if e != nil || n < 1 || n > 65535 {
			return "", 0, false, fmt.Errorf("host pattern %q: bad port %q", p, ps)
		}
		host, port = h, n
	} else if strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]") {
		host = p[1 : len(p)-1]
	}
	switch {
	case host == "*":
		return host, port, true, nil
	case strings.HasPrefix(host, "*."):
		rest := host[2:]
		if rest == "" || strings.ContainsAny(rest, "*/ ") {
			return "", 0, false, fmt.Errorf("host pattern %q: want *.domain", p)
		}
		return host, port, true, nil
	case strings.ContainsAny(host, "*/ \t"):
		return "", 0, false, fmt.Errorf("host pattern %q: a wildcard only as the first label (*.example.com)", p)
	}
	return host, port, false, nil
}

// match reports whether the rule's pattern covers host:port, or one of the
// addresses at that port, and whether it names the host or the address
// exactly (no wildcard).
func (r Rule) match(host string, port int, addrs []netip.Addr) (matched, exact bool) {
	ph, pp, wild, err := splitPattern(r.Pattern)
	if err != nil || (pp != 0 && pp != port) {
		return false, false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if wild {
		if ph == "*" {
			return true, false
		}
		return strings.HasSuffix(host, ph[1:]), false
	}
	if ph == host {
		return true, true
	}
	if a, err := netip.ParseAddr(ph); err == nil {
		for _, b := range addrs {
			if a.Unmap() == b.Unmap() {
				return true, true
			}
		}
	}
	return false, false
}

// Policy decides a connection from the rules. Deny rules come first; an
// allow rule needs to name the host or the address exactly to reach a
// special address (loopback, private, link-local, the host's own).
type Policy struct {
	Allow []Rule
	Deny  []Rule
	// HostAddrs are the host's own addresses (refused like private ones).
	HostAddrs []netip.Addr
}

// Verdict is what the policy says of a connection before anyone is asked.
type Verdict int

// The verdicts.
const (
	Unknown Verdict = iota // no rule: ask, or deny headless
	Allowed
	Denied
)

// Decision is a verdict, the rule that made it, and the address to dial.
type Decision struct {
	Verdict Verdict
	// Rule says why, in words ("--allow-host example.com:443").
	Rule string
	// Addr is the checked address to connect to (allowed and unknown).
	Addr netip.Addr
}

// Decide applies the policy to host:port, which resolved to addrs.
func (p *Policy) Decide(host string, port int, addrs []netip.Addr) Decision {
	for _, r := range p.Deny {
		if m, _ := r.match(host, port, addrs); m {
			return Decision{Verdict: Denied, Rule: r.String()}
		}
	}
	var allow *Rule
	exact := false
	for i, r := range p.Allow {
		if m, ex := r.match(host, port, addrs); m && (allow == nil || ex && !exact) {
			allow, exact = &p.Allow[i], ex
		}
	}
	var public []netip.Addr
	var special []netip.Addr
	for _, a := range addrs {
		if kind, _ := p.classify(a); kind != "" {
			special = append(special, a)
		} else {
			public = append(public, a)
		}
	}
	var target netip.Addr
	switch {
	case len(public) > 0:
		target = public[0]
	case len(special) > 0 && exact:
		target = special[0]
	case len(special) > 0:
		a := special[0]
		name := fmt.Sprintf("%s or %s", host, a)
		if host == a.String() {
			name = host
		}
		kind, inner := p.classify(a)
		shown := a.String()
		if inner.IsValid() {
			shown += " (which carries " + inner.String() + ")"
		}
		return Decision{Verdict: Denied, Addr: a, Rule: fmt.Sprintf("%s address %s: only a rule naming %s exactly reaches it", kind, shown, name)}
	default:
		return Decision{Verdict: Denied, Rule: "no address"}
	}
	if allow != nil {
		return Decision{Verdict: Allowed, Rule: allow.String(), Addr: target}
	}
	return Decision{Verdict: Unknown, Addr: target}
}

// classify names the kind of an address only an exact rule may reach
// ("loopback", "private", …), or returns "" for a public one. An IPv6
// address that carries an IPv4 one (mapped, IPv4-compatible, NAT64, 6to4)
// is judged by the IPv4 address it may reach, which is returned as inner
// when that makes it special.
func (p *Policy) classify(a netip.Addr) (kind string, inner netip.Addr) {
	a = a.Unmap()
	if k := p.kind(a); k != "" {
		return k, netip.Addr{}
	}
	// Of several candidates (local-use NAT64), one that is loopback,
	// private, link-local or the host's is named before one in a reserved
	// range (the zero bytes of another position often are).
	for _, v4 := range embeddedIPv4(a) {
		switch k := p.kind(v4); {
		case k == "":
		case k != "reserved":
			return k, v4
		case !inner.IsValid():
			kind, inner = k, v4
		}
	}
	return kind, inner
}

// kind classifies one address as it is.
func (p *Policy) kind(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsPrivate(), cgnat.Contains(a):
		return "private"
	case a.IsUnspecified(), a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "reserved"
	}
	for _, r := range reserved4 {
		if r.Contains(a) {
			return "reserved"
		}
	}
	for _, h := range p.HostAddrs {
		if h.Unmap() == a {
			return "this machine's"
		}
	}
	return ""
}

var (
	// cgnat is the shared address space (RFC 6598), private in practice.
	cgnat = netip.MustParsePrefix("100.64.0.0/10")
	// reserved4 are IPv4 ranges no public service is on: "this network"
	// (0/8, which Linux routes to the host itself), the IETF's protocol
	// assignments (192.0.0.0/24), benchmarking (198.18/15) and the
	// reserved block with the broadcast address (240/4).
	reserved4 = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("192.0.0.0/24"),
		netip.MustParsePrefix("198.18.0.0/15"),
		netip.MustParsePrefix("240.0.0.0/4"),
	}
	ipv4Compatible = netip.MustParsePrefix("::/96")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// embeddedIPv4 lists the IPv4 addresses an IPv6 address may reach by
// carrying them: the IPv4-compatible form (::a.b.c.d, deprecated but
// still parsed), the well-known NAT64 prefix (64:ff9b::/96), the local-use
// NAT64 prefix (64:ff9b:1::/48, whose operator may use any of the RFC 6052
// prefix lengths from /48 to /96, so each position is a candidate) and
// 6to4 (2002:a.b.c.d::/48). IPv4-mapped addresses are unmapped before.
func embeddedIPv4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(x ...byte) netip.Addr { return netip.AddrFrom4([4]byte(x)) }
	switch {
	case ipv4Compatible.Contains(a):
		return []netip.Addr{v4(b[12:16]...)}
	case nat64.Contains(a):
		return []netip.Addr{v4(b[12:16]...)}
	case nat64Local.Contains(a):
		// RFC 6052 §2.2: byte 8 (bits 64-71) is always zero and skipped.
		return []netip.Addr{
			v4(b[6], b[7], b[9], b[10]),   // /48
			v4(b[7], b[9], b[10], b[11]),  // /56
			v4(b[9], b[10], b[11], b[12]), // /64
			v4(b[12:16]...),               // /96
		}
	case sixToFour.Contains(a):
		return []netip.Addr{v4(b[2:6]...)}
	}
	return nil
}

// LocalAddrs lists the host's own interface addresses.
func LocalAddrs() []netip.Addr {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}
