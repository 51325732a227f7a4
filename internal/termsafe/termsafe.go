// Package termsafe makes text that shiro did not write safe to print:
// model text, command output, and names a workspace or a sandbox chose.
// One state machine does it for the chat UI (which keeps its own colour
// and style sequences) and for everything printed outside it (a terminal
// keeps SGR at most; a file or a pipe keeps no escape sequence at all):
// escape sequences other than SGR and control characters other than
// newline (and tab, unless it is expanded) are dropped, and so are
// invalid UTF-8, C1 controls and the bidirectional overrides.
//
// Names go through Name, which quotes (%q) a name that holds anything a
// terminal would not show as it is, so that the reader sees it rather
// than a name with something silently taken out of it.
package termsafe

import (
	"io"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Mode says what survives besides printable text and newlines.
type Mode struct {
	// SGR keeps well-formed colour and style sequences (ESC [ … m).
	SGR bool
	// TabWidth, when more than 0, replaces each tab by spaces to the next
	// multiple of TabWidth columns (the chat UI lays text out itself);
	// 0 keeps tabs.
	TabWidth int
}

// String cleans s.
func (m Mode) String(s string) string {
	if !NeedsCleaning(s) {
		return s
	}
	var f filter
	f.mode = m
	out := f.feed(make([]byte, 0, len(s)), s)
	return string(out) // an unfinished sequence or rune at the end goes
}

// NeedsCleaning is the fast path: plain printable ASCII and newlines need
// nothing.
func NeedsCleaning(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c < 0x20 && c != '\n' || c == 0x7f {
			return true
		}
	}
	return false
}

// Name returns a name the workspace or the sandbox chose (a file, a host,
// a container) as it is when a terminal would show it faithfully, and
// quoted (Go's %q) when it holds a control character, a character that is
// not printable, or invalid UTF-8.
func Name(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Writer cleans what is written through it, as a stream: a sequence or a
// rune cut between two writes is judged whole. It is safe for concurrent
// use; writes are cleaned and passed on in the order they arrive.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	f   filter
	buf []byte
}

// NewWriter cleans what is written to w by mode m.
func NewWriter(w io.Writer, m Mode) *Writer {
	return &Writer{w: w, f: filter{mode: m}}
}

// Write cleans p and writes what is left; it reports len(p) unless w
// failed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = w.f.feed(w.buf[:0], string(p))
	if len(w.buf) == 0 {
		return len(p), nil
	}
	if _, err := w.w.Write(w.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Mode is the writer's mode.
func (w *Writer) Mode() Mode { return w.f.mode }

// states of the filter.
const (
	ground   = iota
	escape   // after ESC
	escInter // ESC, then intermediate bytes
	csi      // ESC [
	str      // a string sequence (OSC, DCS, APC, PM, SOS), ended by BEL or ST
	strEsc   // an ESC inside a string sequence: ST when '\' follows
)

// maxSGR bounds a kept SGR sequence; a longer one is dropped.
const maxSGR = 128

// filter is the state machine.
type filter struct {
	mode  Mode
	state int
	col   int    // for tabs: the column since the last newline, roughly
	seq   []byte // the CSI sequence so far, when SGR is kept
	sgr   bool   // the CSI sequence so far can be SGR
	r     [utf8.UTFMax]byte
	rn    int // bytes of an unfinished rune in r
}

// feed cleans s into out and returns it; what a later write may finish
// (a sequence, a rune) is kept in the filter.
func (f *filter) feed(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		out = f.byte(out, s[i])
	}
	return out
}

func (f *filter) byte(out []byte, c byte) []byte {
	switch f.state {
	case escape:
		switch {
		case c == '[':
			f.state, f.sgr = csi, true
			if f.mode.SGR {
				f.seq = append(f.seq[:0], 0x1b, '[')
			}
		case c == ']' || c == 'P' || c == '_' || c == '^' || c == 'X':
			f.state = str
		case c >= 0x20 && c <= 0x2f:
			f.state = escInter
		case c >= 0x30 && c <= 0x7e:
			f.state = ground // a two-byte sequence, dropped
		case c == 0x1b:
			// ESC ESC: the first is dropped, the second starts anew.
		default:
			f.state = ground // a stray ESC is dropped; c is judged alone
			return f.byte(out, c)
		}
		return out
	case escInter:
		switch {
		case c >= 0x20 && c <= 0x2f:
		case c >= 0x30 && c <= 0x7e:
			f.state = ground
		default:
			f.state = ground
			return f.byte(out, c)
		}
		return out
	case csi:
		switch {
		case c >= 0x30 && c <= 0x3f:
			f.sgr = f.sgr && (c >= '0' && c <= '9' || c == ';' || c == ':')
		case c >= 0x20 && c <= 0x2f:
			f.sgr = false
		case c >= 0x40 && c <= 0x7e:
			f.state = ground
			if f.mode.SGR && f.sgr && c == 'm' && len(f.seq) < maxSGR {
				out = append(out, f.seq...)
				out = append(out, c)
			}
			return out
		default:
			f.state = ground // malformed: dropped up to the stray byte
			return f.byte(out, c)
		}
		if f.mode.SGR && len(f.seq) < maxSGR {
			f.seq = append(f.seq, c)
		}
		return out
	case str:
		switch c {
		case 0x07:
			f.state = ground
		case 0x1b:
			f.state = strEsc
		}
		return out
	case strEsc:
		if c == '\\' {
			f.state = ground
			return out
		}
		f.state = escape // the string ended at the ESC, which starts anew
		return f.byte(out, c)
	}
	// ground
	if f.rn > 0 || c >= utf8.RuneSelf {
		return f.runeByte(out, c)
	}
	switch {
	case c == 0x1b:
		f.state = escape
	case c == '\n':
		out = append(out, '\n')
		f.col = 0
	case c == '\t':
		if f.mode.TabWidth <= 0 {
			out = append(out, '\t')
			f.col = 0
			break
		}
		n := f.mode.TabWidth - f.col%f.mode.TabWidth
		for range n {
			out = append(out, ' ')
		}
		f.col += n
	case c < 0x20 || c == 0x7f:
	default:
		out = append(out, c)
		f.col++
	}
	return out
}

// runeByte adds c to the rune being read and writes the rune once it is
// whole (and neither invalid nor dangerous).
func (f *filter) runeByte(out []byte, c byte) []byte {
	f.r[f.rn] = c
	f.rn++
	if !utf8.FullRune(f.r[:f.rn]) {
		return out
	}
	r, size := utf8.DecodeRune(f.r[:f.rn])
	var rest [utf8.UTFMax]byte
	n := copy(rest[:], f.r[size:f.rn])
	f.rn = 0
	if r == utf8.RuneError && size <= 1 {
		// Invalid: its first byte goes, the others are read again.
	} else if !dangerousRune(r) {
		out = append(out, f.r[:size]...)
		f.col++
	}
	for _, b := range rest[:n] {
		out = f.byte(out, b)
	}
	return out
}

// dangerousRune reports the characters that act on the terminal or on the
// order text is shown in: C1 controls and bidirectional overrides.
func dangerousRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}
