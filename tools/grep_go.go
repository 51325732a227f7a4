package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/shiroagent/shiro/internal/confine"
)

// searchGo is the search without rg: files (sorted) in path order, each
// skipped when binary or unreadable, line by line with Go's regexp. Once
// more than GrepHitLimit lines matched, the files left sort after every
// hit kept and are not searched.
func searchGo(ctx context.Context, env *Env, p *grepParams, files []string) (*hitSet, error) {
	re, problem := compileLineRegex(p.Pattern, p.IgnoreCase)
	if problem != "" {
		return nil, grepFailure("Invalid regex: " + problem)
	}
	hits := newHitSet(GrepHitLimit)
	for _, name := range files {
		if hits.full() {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if f, err := searchFile(env.Root, name, re, hits.wouldKeep(name)); err == nil {
			hits.add(f)
		}
	}
	return hits, nil
}

// searchFile returns the matching lines of one file (at most
// GrepHitLimit, their texts only when keep), or an error when it is binary
// or cannot be read.
func searchFile(root *os.Root, name string, re *regexp.Regexp, keep bool) (*fileHits, error) {
	f, err := confine.OpenRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head, err := readHeadOf(f)
	if err != nil {
		return nil, err
	}
	if IsBinary(head) {
		return nil, errors.New("binary")
	}
	hits := &fileHits{path: name, keep: keep}
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(head), f), 64<<10)
	var long []byte
	for lineNo := 1; hits.count < GrepHitLimit; lineNo++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		switch {
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		case len(line) == 0:
			return hits, nil
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		if re.Match(line) {
			hits.count++
			if keep {
				hits.lines = append(hits.lines, lineHit{line: lineNo, text: string(line[:min(len(line), rgMaxLine)])})
			}
		}
		if err != nil {
			break
		}
	}
	return hits, nil
}

// readHead reads the first BinarySniff bytes of a regular file.
func readHead(root *os.Root, name string) ([]byte, error) {
	f, err := confine.OpenRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readHeadOf(f)
}

func readHeadOf(f *os.File) ([]byte, error) {
	head := make([]byte, BinarySniff)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return head[:n], nil
}

// compileLineRegex compiles a ripgrep (Rust regex) pattern with Go's
// regexp. The syntaxes agree but for details: Rust's \d, \w and \s are
// Unicode-aware (translated here), and rg refuses a pattern that matches a
// literal newline (refused here too). problem is the reason a pattern is
// refused.
func compileLineRegex(pattern string, ignoreCase bool) (re *regexp.Regexp, problem string) {
	expr := translateRegex(pattern)
	if ignoreCase {
		expr = "(?i)" + expr
	}
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), "error parsing regexp: ")
	}
	if hasLiteralNewline(tree) {
		return nil, `the literal '"\n"' is not allowed in a regex`
	}
	compiled, err := regexp.Compile(expr)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), "error parsing regexp: ")
	}
	return compiled, ""
}

func hasLiteralNewline(re *syntax.Regexp) bool {
	if re.Op == syntax.OpLiteral && slices.Contains(re.Rune, '\n') {
		return true
	}
	return slices.ContainsFunc(re.Sub, hasLiteralNewline)
}

// Unicode versions of Perl classes, as Rust's regex has them.
const (
	uniDigit = `\p{Nd}`
	uniWord  = `\p{L}\p{M}\p{Nd}\p{Pc}`
	uniSpace = `\t-\r \x{85}\p{Z}`
)

// translateRegex rewrites the Perl classes \d \w \s (and, outside brackets,
// \D \W \S) to their Unicode meaning; the rest is left alone.
func translateRegex(p string) string {
	var b strings.Builder
	inClass, classStart := false, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			e := p[i+1]
			i++
			classStart = false
			if rep := unicodeClass(e, inClass); rep != "" {
				b.WriteString(rep)
				continue
			}
			b.WriteByte(c)
			b.WriteByte(e)
		case inClass:
			if c == '[' && i+1 < len(p) && p[i+1] == ':' {
				if end := strings.Index(p[i:], ":]"); end >= 0 {
					b.WriteString(p[i : i+end+2])
					i += end + 1
					classStart = false
					continue
				}
			}
			if c == ']' && !classStart {
				inClass = false
			}
			classStart = false
			b.WriteByte(c)
		case c == '[':
			inClass, classStart = true, true
			b.WriteByte(c)
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func unicodeClass(e byte, inClass bool) string {
	if inClass {
		switch e {
		case 'd':
			return uniDigit
		case 'w':
			return uniWord
		case 's':
			return uniSpace
		}
		return ""
	}
	switch e {
	case 'd':
		return uniDigit
	case 'D':
		return `\P{Nd}`
	case 'w':
		return "[" + uniWord + "]"
	case 'W':
		return "[^" + uniWord + "]"
	case 's':
		return "[" + uniSpace + "]"
	case 'S':
		return "[^" + uniSpace + "]"
	}
	return ""
}
