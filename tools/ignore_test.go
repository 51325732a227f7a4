package tools

import (
	"testing"
)

// Cases from git's t/t3070-wildmatch.sh (pathname mode unless noted).
func TestWildmatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, text string
		pathname      bool
		want          bool
	}{
		{"foo", "foo", true, true},
		{"bar", "foo", true, false},
		{"", "", true, true},
		{"???", "foo", true, true},
		{"??", "foo", true, false},
		{"*", "foo", true, true},
		{"f*", "foo", true, true},
		{"*f", "foo", true, false},
		{"*foo*", "foo", true, true},
		{"*ob*a*r*", "foobar", true, true},
		{"*ab", "aaaaaaabababab", true, true},
		{`foo\*`, "foo*", true, true},
		{`foo\*bar`, "foobar", true, false},
		{`f\\oo`, `f\oo`, true, true},
		{"*[al]?", "ball", true, true},
		{"[ten]", "ten", true, false},
		{"**[!te]", "ten", true, true},
		{"**[!ten]", "ten", true, false},
		{"t[a-g]n", "ten", true, true},
		{"t[!a-g]n", "ten", true, false},
		{"t[!a-g]n", "ton", true, true},
		{"t[^a-g]n", "ton", true, true},
		{"a[]]b", "a]b", true, true},
		{"a[]-]b", "a-b", true, true},
		{"a[]-]b", "a]b", true, true},
		{"a[]-]b", "aab", true, false},
		{"a[]a-]b", "aab", true, true},
		{"]", "]", true, true},
		{"foo*bar", "foo/baz/bar", true, false},
		{"foo**bar", "foo/baz/bar", true, false},
		{"foo**bar", "foobazbar", true, true},
		{"foo/**/bar", "foo/baz/bar", true, true},
		{"foo/**/**/bar", "foo/baz/bar", true, true},
		{"foo/**/bar", "foo/b/a/z/bar", true, true},
		{"foo/**/**/bar", "foo/b/a/z/bar", true, true},
		{"foo/**/bar", "foo/bar", true, true},
		{"foo/**/**/bar", "foo/bar", true, true},
		{"foo?bar", "foo/bar", true, false},
		{"foo[/]bar", "foo/bar", true, false},
		{"foo[^a-z]bar", "foo/bar", true, false},
		{"f[^eiu][^eiu][^eiu][^eiu][^eiu]r", "foo-bar", true, true},
		{"**/foo", "foo", true, true},
		{"**/foo", "XXX/foo", true, true},
		{"**/foo", "bar/baz/foo", true, true},
		{"*/foo", "bar/baz/foo", true, false},
		{"**/bar*", "foo/bar/baz", true, false},
		{"**/bar/*", "deep/foo/bar/baz", true, true},
		{"**/bar/*", "deep/foo/bar/baz/", true, false},
		{"**/bar/**", "deep/foo/bar/baz/", true, true},
		{"**/bar/*", "deep/foo/bar", true, false},
		{"**/bar/**", "deep/foo/bar/", true, true},
		{"**/bar**", "foo/bar/baz", true, false},
		{"*/bar/**", "foo/bar/baz/x", true, true},
		{"*/bar/**", "deep/foo/bar/baz/x", true, false},
		{"**/bar/*/*", "deep/foo/bar/baz/x", true, true},
		{"a[c-c]st", "acrt", true, false},
		{"a[c-c]rt", "acrt", true, true},
		{"[!]-]", "]", true, false},
		{"[!]-]", "a", true, true},
		{`\`, "", true, false},
		{`\`, `\`, true, false},
		{`*/\`, `XXX/\`, true, false},
		{`*/\\`, `XXX/\`, true, true},
		{"foo", "foo", true, true},
		{"@foo", "@foo", true, true},
		{"@foo", "foo", true, false},
		{`\[ab]`, "[ab]", true, true},
		{"[[]ab]", "[ab]", true, true},
		{"[[:]ab]", "[ab]", true, true},
		{"[[::]ab]", "[ab]", true, false},
		{"[[:digit]ab]", "[ab]", true, true},
		{`[\[:]ab]`, "[ab]", true, true},
		{`\??\?b`, "?a?b", true, true},
		{`\a\b\c`, "abc", true, true},
		{"", "foo", true, false},
		{"**/t[o]", "foo/bar/baz/to", true, true},
		{"[[:alpha:]][[:digit:]][[:upper:]]", "a1B", true, true},
		{"[[:digit:][:upper:][:space:]]", "a", true, false},
		{"[[:digit:][:upper:][:space:]]", "A", true, true},
		{"[[:digit:][:upper:][:space:]]", "1", true, true},
		{"[[:digit:][:upper:][:spaci:]]", "1", true, false},
		{"[[:digit:][:upper:][:space:]]", " ", true, true},
		{"[[:digit:][:upper:][:space:]]", ".", true, false},
		{"[[:digit:][:punct:][:space:]]", ".", true, true},
		{"[[:xdigit:]]", "5", true, true},
		{"[[:xdigit:]]", "f", true, true},
		{"[[:xdigit:]]", "D", true, true},
		{"[a-c[:digit:]x-z]", "5", true, true},
		{"[a-c[:digit:]x-z]", "b", true, true},
		{"[a-c[:digit:]x-z]", "y", true, true},
		{"[a-c[:digit:]x-z]", "q", true, false},
		{"[\\-^]", "]", true, false},
		{"[\\-^]", "[", true, false},
		{"[\\-_]", "-", true, true},
		{"[\\]]", "]", true, true},
		{"[\\]]", "\\]", true, false},
		{"[\\]]", "\\", true, false},
		{"a[]b", "ab", true, false},
		{"a[]b", "a[]b", true, false},
		{"ab[", "ab[", true, false},
		{"[!", "ab", true, false},
		{"[-", "ab", true, false},
		{"[-]", "-", true, true},
		{"[a-", "-", true, false},
		{"[!a-", "-", true, false},
		{"[--A]", "-", true, true},
		{"[--A]", "5", true, true},
		{"[ --]", " ", true, true},
		{"[ --]", "$", true, true},
		{"[ --]", "-", true, true},
		{"[ --]", "0", true, false},
		{"[---]", "-", true, true},
		{"[------]", "-", true, true},
		{"[a-e-n]", "j", true, false},
		{"[a-e-n]", "-", true, true},
		{"[!------]", "a", true, true},
		{"[]-a]", "[", true, false},
		{"[]-a]", "^", true, true},
		{"[!]-a]", "^", true, false},
		{"[!]-a]", "[", true, true},
		{"[a^bc]", "^", true, true},
		{"[a-]b]", "-b]", true, true},
		{`[\]`, `\`, true, false},
		{`[\\]`, `\`, true, true},
		{`[!\\]`, `\`, true, false},
		{"[A-\\\\]", "G", true, true},
		{"b*a", "aaabbb", true, false},
		{"*ba*", "aabcaa", true, false},
		{"[,]", ",", true, true},
		{"[\\\\,]", ",", true, true},
		{"[\\\\,]", "\\", true, true},
		{"[,-.]", "-", true, true},
		{"[,-.]", "+", true, false},
		{"[,-.]", "-.]", true, false},
		{"-*-*-*-*-*-*-12-*-*-*-m-*-*-*", "-adobe-courier-bold-o-normal--12-120-75-75-m-70-iso8859-1", true, true},
		{"-*-*-*-*-*-*-12-*-*-*-m-*-*-*", "-adobe-courier-bold-o-normal--12-120-75-75-X-70-iso8859-1", true, false},
		{"XXX/*/*/*/*/*/*/12/*/*/*/m/*/*/*", "XXX/adobe/courier/bold/o/normal//12/120/75/75/m/70/iso8859/1", true, true},
		{"**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txt", true, true},
		{"**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txtz", true, false},
		{"*/*/*", "foo/bba/arr", true, true},
		{"*/*/*", "foo/bb/aa/rr", true, false},
		{"**/**/**", "foo/bb/aa/rr", true, true},
		{"*X*i", "abcXdefXghi", true, true},
		{"*/*X*/*/*i", "ab/cXd/efXg/hi", true, true},
		{"**/*X*/**/*i", "ab/cXd/efXg/hi", true, true},
		// Without pathname, * and ? match '/'.
		{"foo*bar", "foo/baz/bar", false, true},
		{"foo?bar", "foo/bar", false, true},
		{"*/foo", "bar/baz/foo", false, true},
		{"**/bar*", "foo/bar/baz", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" ~ "+tt.text, func(t *testing.T) {
			t.Parallel()
			if got := wildmatch(tt.pattern, tt.text, tt.pathname); got != tt.want {
				t.Errorf("wildmatch(%q, %q, pathname=%v) = %v, want %v", tt.pattern, tt.text, tt.pathname, got, tt.want)
			}
		})
	}
}

func TestParseIgnore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want []ignoreRule
	}{
		{"comments and blank lines are skipped", "# c\n\n   \nfoo\n", []ignoreRule{{pattern: "foo", prefix: 3, basename: true}}},
		{"BOM and CRLF", "\xef\xbb\xbfa\r\nb\r\n", []ignoreRule{{pattern: "a", prefix: 1, basename: true}, {pattern: "b", prefix: 1, basename: true}}},
		{"unescaped trailing spaces are trimmed, escaped ones kept, leading kept", "a  \nb\\ \n c\n", []ignoreRule{
			{pattern: "a", prefix: 1, basename: true}, {pattern: `b\ `, prefix: 1, basename: true}, {pattern: " c", prefix: 2, basename: true}}},
		{"negation and directory-only", "!d/\n", []ignoreRule{{pattern: "d", prefix: 1, basename: true, negate: true, dirOnly: true}}},
		{"escaped ! and #", "\\!x\n\\#y\n", []ignoreRule{{pattern: `\!x`, basename: true}, {pattern: `\#y`, basename: true}}},
		{"leading slash anchors and is dropped", "/a/b*\n", []ignoreRule{{pattern: "a/b*", prefix: 3}}},
		{"ends-with rule", "*.log\n", []ignoreRule{{pattern: "*.log", basename: true, endsWith: true}}},
		{"a lone ! or / is no rule", "!\n/\n", nil},
		{"no final newline", "x", []ignoreRule{{pattern: "x", prefix: 1, basename: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := parseIgnore([]byte(tt.data), "", nil)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("rule %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestIgnored(t *testing.T) {
	t.Parallel()
	rules := parseIgnore([]byte("*.o\n!keep.o\nbuild/\n/top\ndocs/**/*.md\n"), "", nil)
	rules = parseIgnore([]byte("local\n/anchored\n"), "sub", rules)
	tests := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{"a.o", false, true},
		{"x/y/a.o", false, true},
		{"keep.o", false, false},
		{"build", true, true},
		{"build", false, false},
		{"x/build", true, true},
		{"top", false, true},
		{"x/top", false, false},
		{"docs/a.md", false, true},
		{"docs/x/y/a.md", false, true},
		{"x/docs/a.md", false, false},
		{"sub/local", false, true},
		{"sub/x/local", false, true},
		{"sub/anchored", false, true},
		{"sub/x/anchored", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			name := tt.path[len(tt.path)-len(baseName(tt.path)):]
			if got := ignored(rules, tt.path, name, tt.isDir); got != tt.want {
				t.Errorf("ignored(%q, dir=%v) = %v, want %v", tt.path, tt.isDir, got, tt.want)
			}
		})
	}
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}
