package tools

import (
	"bytes"
	"fmt"
	"math/bits"
	"strings"
)

// Output and input limits shared by every tool.
const (
	// MaxOutput is the most characters one tool result may carry.
	MaxOutput = 30000
	// BinarySniff is how many leading bytes the binary rule inspects.
	BinarySniff = 8192
)

// Characters are counted as UTF-8 sequences: every byte that does not
// continue a sequence starts a character. For valid UTF-8 that is the rune
// count; a cut always falls before such a byte, never inside a sequence.
func startsChar(b byte) bool { return b&0xC0 != 0x80 }

// Cap cuts s to MaxOutput characters and appends a line saying how many
// characters were removed: "... [truncated N chars]". Cap is idempotent: a
// text it already cut is returned as it is.
func Cap(s string) string {
	if len(s) <= MaxOutput || alreadyCapped(s) { // bytes >= characters
		return s
	}
	cut, n := 0, 0
	for ; cut < len(s); cut++ {
		if startsChar(s[cut]) {
			if n == MaxOutput {
				break
			}
			n++
		}
	}
	if cut == len(s) {
		return s
	}
	return s[:cut] + truncationNote(charCount(s[cut:]))
}

// truncationNote is the line Cap appends.
func truncationNote(removed int) string {
	return fmt.Sprintf("\n... [truncated %d chars]", removed)
}

func alreadyCapped(s string) bool {
	const open, close = "\n... [truncated ", " chars]"
	if len(s) > 4*MaxOutput+64 || !strings.HasSuffix(s, close) {
		return false
	}
	tail := s[max(0, len(s)-64):]
	j := strings.LastIndex(tail, open)
	if j < 0 {
		return false
	}
	i := len(s) - len(tail) + j
	if i+len(open) > len(s)-len(close) { // "…truncated chars]": the space is shared
		return false
	}
	digits := s[i+len(open) : len(s)-len(close)]
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return false
	}
	return charCount(s[:i]) <= MaxOutput
}

// capWriter keeps the first MaxOutput characters written to it and counts
// the rest, so a long result can be produced in a stream without holding it.
type capWriter struct {
	buf   []byte
	kept  int // characters in buf
	extra int // characters dropped
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.extra == 0 && w.kept+len(p) <= MaxOutput {
		w.buf = append(w.buf, p...)
		w.kept += countChars(p)
		return len(p), nil
	}
	for i, b := range p {
		if !startsChar(b) {
			if w.extra == 0 {
				w.buf = append(w.buf, b)
			}
			continue
		}
		if w.kept < MaxOutput && w.extra == 0 {
			w.buf = append(w.buf, b)
			w.kept++
			continue
		}
		w.extra += countChars(p[i:])
		break
	}
	return len(p), nil
}

func (w *capWriter) WriteString(s string) {
	// Whole runs of ASCII-free bytes go through Write; the conversion is
	// the price of one code path.
	w.Write([]byte(s))
}

func (w *capWriter) WriteByte(b byte) error {
	w.Write([]byte{b})
	return nil
}

// String is the text written so far, capped.
func (w *capWriter) String() string {
	if w.extra == 0 {
		return string(w.buf)
	}
	return string(w.buf) + truncationNote(w.extra)
}

func countChars(p []byte) int { return charCount(p) }

// charCount counts the characters of s (see startsChar): its length less
// its continuation bytes (10xxxxxx), eight bytes at a time.
func charCount[S ~string | ~[]byte](s S) int {
	const hi = 0x8080808080808080
	cont := 0
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		// Bit 7 of each byte: set for 10xxxxxx only.
		cont += bits.OnesCount64(x & ^(x << 1) & hi)
	}
	for ; i < len(s); i++ {
		if !startsChar(s[i]) {
			cont++
		}
	}
	return len(s) - cont
}

// IsBinary applies the binary rule: a NUL byte in the first BinarySniff bytes.
func IsBinary(head []byte) bool {
	if len(head) > BinarySniff {
		head = head[:BinarySniff]
	}
	return bytes.IndexByte(head, 0) >= 0
}
