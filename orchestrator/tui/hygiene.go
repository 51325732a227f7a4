package tui

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// clean makes text from outside the UI (the model's words, command output,
// error messages, file names) safe to draw: escape sequences and control
// characters go, tabs become spaces, a carriage return keeps what follows it
// on its line (as a terminal would show it), and invalid UTF-8 goes.
func clean(s string) string {
	if !needsCleaning(s) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.LastIndexByte(strings.TrimRight(l, "\r"), '\r'); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = sanitize(l, false)
	}
	return strings.Join(lines, "\n")
}

// scrub is the last pass over every line the UI draws: it keeps the colour
// and style sequences (SGR) the UI's own styles make and drops every other
// escape sequence and control character, so that nothing but printable
// text, newlines and styles reaches the terminal.
func scrub(s string) string {
	if !needsCleaning(s) {
		return s
	}
	return sanitize(s, true)
}

// needsCleaning is the fast path: plain printable ASCII and newlines pass.
func needsCleaning(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c < 0x20 && c != '\n' || c == 0x7f {
			return true
		}
	}
	return false
}

func sanitize(s string, keepSGR bool) string {
	var b strings.Builder
	b.Grow(len(s))
	col := 0 // for tabs: the column since the last newline, roughly
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0x1b:
			n, sgr := escapeSeq(s[i:])
			if sgr && keepSGR {
				b.WriteString(s[i : i+n])
			}
			i += n
			continue
		case c == '\n':
			b.WriteByte('\n')
			col = 0
		case c == '\t':
			n := 4 - col%4
			b.WriteString("    "[:n])
			col += n
		case c < 0x20 || c == 0x7f:
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			col++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if !(r == utf8.RuneError && size <= 1) && !dangerousRune(r) {
				b.WriteString(s[i : i+size])
				col++
			}
			i += size
			continue
		}
		i++
	}
	return b.String()
}

// dangerousRune reports the characters that act on the terminal or on the
// order text is shown in: C1 controls and bidirectional overrides.
func dangerousRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// escapeSeq measures the escape sequence at the start of s (its length,
// at least 1) and says whether it is a well-formed SGR sequence.
func escapeSeq(s string) (n int, sgr bool) {
	if len(s) < 2 {
		return len(s), false
	}
	switch s[1] {
	case '[': // CSI: parameters, intermediates, a final byte
		params := true
		for i := 2; i < len(s); i++ {
			c := s[i]
			switch {
			case c >= 0x30 && c <= 0x3f:
				params = params && (c >= '0' && c <= '9' || c == ';' || c == ':')
			case c >= 0x20 && c <= 0x2f:
				params = false
			case c >= 0x40 && c <= 0x7e:
				return i + 1, c == 'm' && params
			default:
				return i, false // malformed: drop up to the stray byte
			}
		}
		return len(s), false
	case ']', 'P', '_', '^', 'X': // strings ended by BEL or ST
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1, false
			}
			if s[i] == 0x1b {
				if i+1 < len(s) && s[i+1] == '\\' {
					return i + 2, false
				}
				return i, false
			}
		}
		return len(s), false
	}
	if s[1] < 0x20 || s[1] >= utf8.RuneSelf {
		return 1, false
	}
	return 2, false
}

// rows splits lines (which may hold newlines) into screen rows of at most
// width cells, wrapping the long ones (at spaces when it can), so that the
// terminal never wraps a row itself: a row it wraps is one the renderer
// cannot clear.
func rows(width int, lines ...string) []string {
	var out []string
	for _, l := range lines {
		for _, r := range strings.Split(scrub(l), "\n") {
			if width > 0 && ansi.StringWidth(r) > width {
				r = ansi.Wrap(r, width, "")
				out = append(out, strings.Split(r, "\n")...)
				continue
			}
			out = append(out, r)
		}
	}
	return out
}

// hangingRows wraps a panel's lines to width like rows, but a line laid
// out in columns ("/model [id]      switch the model...") continues under
// its last column rather than at the margin.
func hangingRows(width int, lines ...string) []string {
	var out []string
	for _, l := range lines {
		l = scrub(l)
		if ansi.StringWidth(l) <= width {
			out = append(out, l)
			continue
		}
		indent := lastColumn(l)
		if indent == 0 || indent > width-20 {
			out = append(out, rows(width, l)...)
			continue
		}
		head, rest := l[:indent], l[indent:]
		wrapped := strings.Split(ansi.Wrap(rest, width-indent, ""), "\n")
		out = append(out, head+wrapped[0])
		pad := strings.Repeat(" ", indent)
		for _, w := range wrapped[1:] {
			out = append(out, pad+w)
		}
	}
	return out
}

// lastColumn is the byte offset (equal to the cell offset: it looks only
// at plain ASCII layouts) where the text after the last run of two or more
// spaces starts, 0 when there is none.
func lastColumn(l string) int {
	col := 0
	for i := 1; i+1 < len(l); i++ {
		if l[i] == ' ' && l[i-1] == ' ' && l[i+1] != ' ' {
			col = i + 1
		}
	}
	for i := 0; i < col; i++ {
		if l[i] >= utf8.RuneSelf || l[i] == 0x1b {
			return 0
		}
	}
	return col
}
