package tools

import (
	"bytes"
	"strings"
)

// ignoreRule is one line of a .gitignore, .shiroignore or .git/info/exclude,
// parsed as git's parse_path_pattern does.
type ignoreRule struct {
	pattern  string // without the leading '!', the trailing '/' and, for anchored rules, the leading '/'
	base     string // directory holding the ignore file, workspace-relative, "" for the root
	prefix   int    // length of the literal (wildcard-free) start of pattern
	negate   bool   // "!rule": re-include
	dirOnly  bool   // "rule/": directories only
	basename bool   // no '/' in the rule: matched against the name at any depth
	endsWith bool   // "*literal" basename rule
}

// parseIgnore appends the rules in data (an ignore file in directory base)
// to rules. Like git: a UTF-8 BOM is skipped, CR before LF dropped, blank
// lines and '#' comments skipped, unescaped trailing spaces trimmed,
// leading spaces kept.
func parseIgnore(data []byte, base string, rules []ignoreRule) []ignoreRule {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if r, ok := parseRule(trimTrailingSpaces(line), base); ok {
			rules = append(rules, r)
		}
	}
	return rules
}

func trimTrailingSpaces(b []byte) []byte {
	end := -1
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case ' ':
			if end < 0 {
				end = i
			}
		case '\\':
			i++
			if i == len(b) {
				return b
			}
			fallthrough
		default:
			end = -1
		}
	}
	if end >= 0 {
		return b[:end]
	}
	return b
}

func parseRule(line []byte, base string) (ignoreRule, bool) {
	r := ignoreRule{base: base}
	if len(line) > 0 && line[0] == '!' {
		r.negate = true
		line = line[1:]
	}
	if n := len(line); n > 0 && line[n-1] == '/' {
		r.dirOnly = true
		line = line[:n-1]
	}
	if len(line) == 0 {
		return r, false
	}
	p := string(line)
	r.basename = strings.IndexByte(p, '/') < 0
	r.prefix = literalPrefix(p)
	if p[0] == '*' && literalPrefix(p[1:]) == len(p)-1 {
		r.endsWith = true
	}
	if !r.basename && p[0] == '/' {
		p = p[1:]
		r.prefix--
	}
	r.pattern = p
	return r, true
}

// literalPrefix is git's simple_length: the length of the start of p that
// holds no glob special character.
func literalPrefix(p string) int {
	for i := 0; i < len(p); i++ {
		if isGlobSpecial(p[i]) {
			return i
		}
	}
	return len(p)
}

func isGlobSpecial(c byte) bool { return c == '*' || c == '?' || c == '[' || c == '\\' }

// ignored applies rules to the entry name at path (workspace-relative;
// name is its last element): the last matching rule decides, a negated one
// re-includes. Every rule's base must be an ancestor of path.
func ignored(rules []ignoreRule, path, name string, isDir bool) bool {
	for i := len(rules) - 1; i >= 0; i-- {
		r := &rules[i]
		if r.dirOnly && !isDir {
			continue
		}
		if r.matches(path, name) {
			return !r.negate
		}
	}
	return false
}

func (r *ignoreRule) matches(path, name string) bool {
	if r.basename {
		switch {
		case r.prefix == len(r.pattern):
			return name == r.pattern
		case r.endsWith:
			return strings.HasSuffix(name, r.pattern[1:])
		}
		return wildmatch(r.pattern, name, false)
	}
	rel := path
	if r.base != "" {
		if len(path) <= len(r.base) || path[len(r.base)] != '/' || !strings.HasPrefix(path, r.base) {
			return false
		}
		rel = path[len(r.base)+1:]
	}
	pat := r.pattern
	if r.prefix > 0 {
		if r.prefix > len(rel) || rel[:r.prefix] != pat[:r.prefix] {
			return false
		}
		pat, rel = pat[r.prefix:], rel[r.prefix:]
		if pat == "" && rel == "" {
			return true
		}
	}
	return wildmatch(pat, rel, true)
}

// wildmatch results, as in git's wildmatch.h.
const (
	wmMatch = iota
	wmNoMatch
	wmAbortAll
	wmAbortToStarStar
)

// wildmatch is git's wildmatch() on bytes, case-sensitive. With pathname
// set, '*', '?' and brackets never match '/', and "**" between slashes (or
// at either end) matches any number of directories.
func wildmatch(pattern, text string, pathname bool) bool {
	return dowild(pattern, 0, text, 0, pathname) == wmMatch
}

// at returns s[i], or 0 past the end (C's terminating NUL).
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func dowild(p string, pi int, t string, ti int, pathname bool) int {
	start := pi
	for ; pi < len(p); pi, ti = pi+1, ti+1 {
		pc := p[pi]
		tc := at(t, ti)
		if ti >= len(t) && pc != '*' {
			return wmAbortAll
		}
		switch pc {
		case '\\':
			pi++
			if tc != at(p, pi) {
				return wmNoMatch
			}
		default:
			if tc != pc {
				return wmNoMatch
			}
		case '?':
			if pathname && tc == '/' {
				return wmNoMatch
			}
		case '*':
			matchSlash := !pathname
			pi++
			if at(p, pi) == '*' {
				prev := pi - 2
				for at(p, pi) == '*' {
					pi++
				}
				next := at(p, pi)
				if (prev < start || p[prev] == '/') &&
					(pi == len(p) || next == '/' || (next == '\\' && at(p, pi+1) == '/')) {
					if next == '/' && dowild(p, pi+1, t, ti, pathname) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				} else {
					matchSlash = false
				}
			}
			if pi == len(p) {
				if !matchSlash && strings.IndexByte(t[ti:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			}
			if !matchSlash && p[pi] == '/' {
				slash := strings.IndexByte(t[ti:], '/')
				if slash < 0 {
					return wmNoMatch
				}
				ti += slash // the loop steps over the slash in both
				continue
			}
			return starLoop(p, pi, t, ti, pathname, matchSlash)
		case '[':
			if m := matchBracket(p, &pi, tc, pathname); m != wmMatch {
				return m
			}
		}
	}
	if ti < len(t) {
		return wmNoMatch
	}
	return wmMatch
}

// starLoop tries the rest of the pattern (from pi) at every position of t
// a star may stop at.
func starLoop(p string, pi int, t string, ti int, pathname, matchSlash bool) int {
	for ti < len(t) {
		// A literal after the star: skip to its next occurrence.
		if lit := p[pi]; !isGlobSpecial(lit) {
			for ti < len(t) && (matchSlash || t[ti] != '/') && t[ti] != lit {
				ti++
			}
			if ti == len(t) || t[ti] != lit {
				if matchSlash {
					return wmAbortAll
				}
				return wmAbortToStarStar
			}
		}
		m := dowild(p, pi, t, ti, pathname)
		if m != wmNoMatch {
			if !matchSlash || m != wmAbortToStarStar {
				return m
			}
		} else if !matchSlash && t[ti] == '/' {
			return wmAbortToStarStar
		}
		ti++
	}
	return wmAbortAll
}

// matchBracket matches tc against the bracket expression starting at *pi
// (on the '['), leaving *pi on its closing ']'. It returns wmMatch when the
// character is accepted.
func matchBracket(p string, pi *int, tc byte, pathname bool) int {
	i := *pi + 1
	pc := at(p, i)
	if pc == '^' {
		pc = '!'
	}
	negated := pc == '!'
	if negated {
		i++
		pc = at(p, i)
	}
	var prev byte
	matched := false
	for {
		if pc == 0 {
			return wmAbortAll
		}
		switch {
		case pc == '\\':
			i++
			pc = at(p, i)
			if pc == 0 {
				return wmAbortAll
			}
			if tc == pc {
				matched = true
			}
		case pc == '-' && prev != 0 && at(p, i+1) != 0 && at(p, i+1) != ']':
			i++
			pc = at(p, i)
			if pc == '\\' {
				i++
				pc = at(p, i)
				if pc == 0 {
					return wmAbortAll
				}
			}
			if tc <= pc && tc >= prev {
				matched = true
			}
			pc = 0 // so prev becomes 0
		case pc == '[' && at(p, i+1) == ':':
			s := i + 2
			j := s
			for j < len(p) && p[j] != ']' {
				j++
			}
			if j == len(p) {
				return wmAbortAll
			}
			if j-s-1 < 0 || p[j-1] != ':' {
				// No ":]": an ordinary '['.
				if tc == '[' {
					matched = true
				}
				break
			}
			in, ok := charClass(p[s:j-1], tc)
			if !ok {
				return wmAbortAll
			}
			if in {
				matched = true
			}
			i = j
			pc = 0
		default:
			if tc == pc {
				matched = true
			}
		}
		prev = pc
		i++
		pc = at(p, i)
		if pc == ']' {
			break
		}
	}
	*pi = i
	if matched == negated || (pathname && tc == '/') {
		return wmNoMatch
	}
	return wmMatch
}

// charClass reports whether c is in the POSIX class name, with git's ASCII
// ctype; ok is false for a class git does not know.
func charClass(name string, c byte) (in, ok bool) {
	upper := c >= 'A' && c <= 'Z'
	lower := c >= 'a' && c <= 'z'
	digit := c >= '0' && c <= '9'
	space := c == ' ' || c == '\t' || c == '\n' || c == '\r'
	print := c >= 0x20 && c < 0x7f
	switch name {
	case "alnum":
		return upper || lower || digit, true
	case "alpha":
		return upper || lower, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return print && c != ' ', true
	case "lower":
		return lower, true
	case "print":
		return print, true
	case "punct":
		return print && !upper && !lower && !digit && c != ' ', true
	case "space":
		return space, true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'), true
	}
	return false, false
}
