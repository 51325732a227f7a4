package tools

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// absorbText is the longest run of text between two binary runs that is
// counted as part of the binary data (random bytes make short lines that
// look like text).
const absorbText = 16

// TextOrBinary renders a command's output for the model and the user: its
// text as it is, and each run of binary data as one line
// "<binary output, N bytes>". A line is binary when it holds a byte no text
// has: NUL and the other control bytes (tab, newline, carriage return,
// form feed, vertical tab, backspace, bell and escape are text), DEL, a C1
// control, or invalid UTF-8. Short text lines between binary ones belong to
// the binary run.
func TextOrBinary(b []byte) string {
	if !hasJunk(b) {
		return string(b)
	}
	type line struct {
		b      []byte
		binary bool
	}
	var lines []line
	for rest := b; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest) - 1
		}
		l := rest[:i+1]
		lines = append(lines, line{l, hasJunk(l)})
		rest = rest[i+1:]
	}
	// A short text line with binary on both sides is binary too.
	for i := 1; i+1 < len(lines); i++ {
		if !lines[i].binary && lines[i-1].binary && len(bytes.TrimSpace(lines[i].b)) < absorbText {
			for j := i + 1; j < len(lines); j++ {
				if lines[j].binary {
					lines[i].binary = true
					break
				}
				if len(bytes.TrimSpace(lines[j].b)) >= absorbText {
					break
				}
			}
		}
	}
	var out strings.Builder
	for i := 0; i < len(lines); {
		if !lines[i].binary {
			out.Write(lines[i].b)
			i++
			continue
		}
		n := 0
		for ; i < len(lines) && lines[i].binary; i++ {
			n += len(lines[i].b)
		}
		fmt.Fprintf(&out, "<binary output, %d bytes>", n)
		if i < len(lines) {
			out.WriteByte('\n')
		}
	}
	return out.String()
}

// hasJunk reports a byte that text does not have (see TextOrBinary).
func hasJunk(b []byte) bool {
	for len(b) > 0 {
		c := b[0]
		if c < utf8.RuneSelf {
			if junkByte(c) {
				return true
			}
			b = b[1:]
			continue
		}
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 || r >= 0x80 && r <= 0x9f {
			return true
		}
		b = b[size:]
	}
	return false
}

func junkByte(c byte) bool {
	switch c {
	case '\t', '\n', '\r', '\f', '\v', '\b', '\a', 0x1b:
		return false
	}
	return c < 0x20 || c == 0x7f
}
