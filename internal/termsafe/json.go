package termsafe

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// JSON passes whole JSON values (a json.Encoder's writes) on to w with the
// characters encoding/json leaves as they are but a terminal acts on —
// DEL, the C1 controls, the bidirectional overrides — written as \u
// escapes. The text a reader decodes is unchanged; the line printed holds
// no control character but its final newline.
func JSON(w io.Writer) io.Writer { return jsonWriter{w} }

type jsonWriter struct{ w io.Writer }

func (j jsonWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(EscapeJSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// EscapeJSON rewrites, in encoded JSON, the characters a terminal acts on
// that encoding/json leaves unescaped (DEL, C1 controls, bidirectional
// overrides) as \u escapes. They can only stand inside strings, where the
// escape means the same character.
func EscapeJSON(p []byte) []byte {
	clean := true
	for _, c := range p {
		if c == 0x7f || c >= utf8.RuneSelf {
			clean = false
			break
		}
	}
	if clean {
		return p
	}
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		c := p[i]
		if c == 0x7f {
			out = append(out, `\u007f`...)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		if dangerousRune(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	return out
}
