package shellcmd

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// resolved is a word as far as the command line tells.
type resolved struct {
	Word
	tail      string // static text after the last dynamic part
	procSubst bool   // the word is one process substitution
}

// builder accumulates a word's parts.
type builder struct {
	text, prefix, tail strings.Builder
	dynamic, split     bool
	sources            []string
}

func (b *builder) static(s string) {
	b.text.WriteString(s)
	b.tail.WriteString(s)
	if !b.dynamic {
		b.prefix.WriteString(s)
	}
}

func (b *builder) dyn(raw string, sources []string) {
	b.text.WriteString(raw)
	b.tail.Reset()
	b.dynamic = true
	for _, s := range sources {
		if !slices.Contains(b.sources, s) {
			b.sources = append(b.sources, s)
		}
	}
}

func (b *builder) done() resolved {
	return resolved{Word: Word{Text: b.text.String(), Dynamic: b.dynamic, Prefix: b.prefix.String(), Split: b.split, Sources: b.sources}, tail: b.tail.String()}
}

// words resolves a word into the words it becomes (more than one after
// brace expansion).
func (w *walker) words(word *syntax.Word) []resolved {
	if word == nil {
		return nil
	}
	cp := &syntax.Word{Parts: slices.Clone(word.Parts)}
	if !syntax.SplitBraces(cp) {
		return []resolved{w.word(word)}
	}
	var out []resolved
	for x, err := range expand.BracesSeq(nil, cp) {
		if err != nil || len(out) == maxBraceWords {
			r := w.word(word)
			r.Dynamic = true
			return []resolved{r}
		}
		out = append(out, w.word(x))
	}
	return out
}

// word resolves one word (braces not expanded).
func (w *walker) word(word *syntax.Word) resolved {
	var b builder
	if word == nil {
		return b.done()
	}
	for _, p := range word.Parts {
		w.part(&b, p, false)
	}
	r := b.done()
	if len(word.Parts) == 1 {
		_, r.procSubst = word.Parts[0].(*syntax.ProcSubst)
	}
	return r
}

func (w *walker) part(b *builder, p syntax.WordPart, quoted bool) {
	switch p := p.(type) {
	case *syntax.Lit:
		if quoted {
			b.static(unescapeDouble(p.Value))
			return
		}
		w.lit(b, p)
	case *syntax.SglQuoted:
		if p.Dollar {
			b.static(ansiC(p.Value))
		} else {
			b.static(p.Value)
		}
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			w.part(b, q, true)
		}
	case *syntax.BraceExp:
		// Only in words BracesSeq could not expand: as written.
		b.dyn(w.raw(p), nil)
	default:
		// ParamExp, CmdSubst, ArithmExp, ProcSubst, ExtGlob.
		b.dyn(w.raw(p), w.sourcesIn(p))
		switch p.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst:
			b.split = b.split || !quoted
		}
	}
}

// lit resolves an unquoted literal: backslashes escape the next character,
// a backslash-newline vanishes, and glob characters make the word a
// pattern.
func (w *walker) lit(b *builder, l *syntax.Lit) {
	v := l.Value
	glob := false
	var s strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' && i+1 < len(v):
			i++
			if v[i] != '\n' {
				s.WriteByte(v[i])
			}
		case c == '*' || c == '?':
			glob = true
			s.WriteByte(c)
		case c == '[' && strings.Contains(v[i+1:], "]"):
			glob = true
			s.WriteByte(c)
		default:
			s.WriteByte(c)
		}
	}
	if glob {
		b.dyn(s.String(), nil)
		return
	}
	b.static(s.String())
}

// raw is a node's source text.
func (w *walker) raw(n syntax.Node) string {
	from, to := n.Pos().Offset(), n.End().Offset()
	if !n.Pos().IsValid() || !n.End().IsValid() || from > to || to > uint(len(w.src)) {
		return "?"
	}
	return w.src[from:to]
}

// unescapeDouble removes the backslashes that escape inside double quotes.
func unescapeDouble(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var s strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		s.WriteByte(v[i])
	}
	return s.String()
}

// unescapeHeredoc removes the backslashes that escape in a here-document
// whose delimiter is not quoted.
func unescapeHeredoc(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var s strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '$', '`', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		s.WriteByte(v[i])
	}
	return s.String()
}

// ansiC decodes the escapes of $'…' (echo -e and printf use the same).
func ansiC(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var s strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' || i+1 == len(v) {
			s.WriteByte(c)
			continue
		}
		i++
		switch e := v[i]; e {
		case 'a':
			s.WriteByte('\a')
		case 'b':
			s.WriteByte('\b')
		case 'e', 'E':
			s.WriteByte(0x1b)
		case 'f':
			s.WriteByte('\f')
		case 'n':
			s.WriteByte('\n')
		case 'r':
			s.WriteByte('\r')
		case 't':
			s.WriteByte('\t')
		case 'v':
			s.WriteByte('\v')
		case '\\', '\'', '"', '?':
			s.WriteByte(e)
		case 'c':
			if i+1 < len(v) {
				i++
				s.WriteByte(v[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			j := i + 1
			for j < len(v) && j-i-1 < digits && isHex(v[j]) {
				j++
			}
			if j == i+1 {
				s.WriteByte('\\')
				s.WriteByte(e)
				continue
			}
			n, _ := strconv.ParseUint(v[i+1:j], 16, 32)
			if e == 'x' {
				s.WriteByte(byte(n))
			} else if r := rune(n); utf8.ValidRune(r) {
				s.WriteRune(r)
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(v) && j-i < 3 && v[j] >= '0' && v[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(v[i:j], 8, 16)
			s.WriteByte(byte(n))
			i = j - 1
		default:
			s.WriteByte('\\')
			s.WriteByte(e)
		}
	}
	return s.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// baseName is the program a first word names: the last path element, when
// it is static.
func baseName(r resolved) string {
	t := r.tail
	if !r.Dynamic {
		t = r.Text
	} else if !strings.Contains(t, "/") {
		return ""
	}
	if i := strings.LastIndexByte(t, '/'); i >= 0 {
		t = t[i+1:]
	}
	return t
}
