package helper

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shiroagent/shiro/sandbox"
)

// What a listeners request reads is text any process of the sandbox can
// shape (a command line, and a kernel table it fills): it is read with
// caps on every size and parsed without trusting its layout.
const (
	maxNetTable     = 4 << 20 // bytes read of /proc/net/tcp{,6}
	maxListeners    = 1024
	maxProcs        = 16384 // /proc entries looked at
	maxFDs          = 4096  // descriptors looked at per process
	maxCmdline      = 4096  // bytes read of a cmdline
	maxCommandRunes = 120   // runes of a command shown
)

// rawListener is one LISTEN line of a /proc/net table.
type rawListener struct {
	port  int
	addr  string
	inode uint64
}

// tcpListen is the state column's value for a listening socket.
const tcpListen = "0A"

// parseNetTCP reads the LISTEN sockets of a /proc/net/tcp (v6 false) or
// tcp6 table; lines it cannot read are skipped.
func parseNetTCP(data []byte, v6 bool) []rawListener {
	var out []rawListener
	for i, line := range bytes.Split(data, []byte("\n")) {
		if i == 0 || len(out) >= maxListeners {
			continue // the header
		}
		f := strings.Fields(string(line))
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		host, port, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(port, 16, 16)
		if err != nil || p == 0 {
			continue
		}
		ip := parseProcIP(host, v6)
		if ip == nil {
			continue
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, rawListener{port: int(p), addr: ip.String(), inode: inode})
	}
	return out
}

// parseProcIP decodes an address of a /proc/net table: the words of the
// address in network order, each printed as a native-endian number.
func parseProcIP(s string, v6 bool) net.IP {
	want := 8
	if v6 {
		want = 32
	}
	if len(s) != want {
		return nil
	}
	raw, err := hex.DecodeString(s)
	if err != nil {
		return nil
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	return ip
}

// cleanCommand makes a command line fit to show: NULs become spaces,
// control characters and invalid UTF-8 go, and it is capped in length.
func cleanCommand(b []byte) string {
	b = bytes.TrimRight(b, "\x00")
	var sb strings.Builder
	n := 0
	for len(b) > 0 && n < maxCommandRunes {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		switch {
		case r == 0:
			r = ' '
		case r == utf8.RuneError && size <= 1:
			continue
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r):
			continue
		}
		sb.WriteRune(r)
		n++
	}
	s := strings.Join(strings.Fields(sb.String()), " ")
	if len(b) > 0 {
		s += "…"
	}
	return s
}

// mergeListeners joins the tables' sockets with what owns them.
func mergeListeners(raw []rawListener, owners map[uint64]int, command func(int) string) []sandbox.Listener {
	out := make([]sandbox.Listener, 0, len(raw))
	for _, r := range raw {
		l := sandbox.Listener{Port: r.port, Address: r.addr}
		if pid, ok := owners[r.inode]; ok && r.inode != 0 {
			l.Pid, l.Command = pid, command(pid)
		}
		out = append(out, l)
	}
	return out
}
