package tui

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/shiroagent/shiro/internal/termsafe"
)

// clean makes text from outside the UI (the model's words, command output,
// error messages, file names) safe to draw: escape sequences and control
// characters go, tabs become spaces, a carriage return keeps what follows it
// on its line (as a terminal would show it), and invalid UTF-8 goes.
func clean(s string) string {
	if !termsafe.NeedsCleaning(s) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.LastIndexByte(strings.TrimRight(l, "\r"), '\r'); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = textMode.String(l)
	}
	return strings.Join(lines, "\n")
}

// scrub is the last pass over every line the UI draws: it keeps the colour
// and style sequences (SGR) the UI's own styles make and drops every other
// escape sequence and control character, so that nothing but printable
// text, newlines and styles reaches the terminal.
func scrub(s string) string { return drawMode.String(s) }

// The UI's two uses of the one sanitiser shiro has (internal/termsafe):
// text from outside loses every sequence; what the UI draws keeps its
// styles. Both lay tabs out as spaces.
var (
	textMode = termsafe.Mode{TabWidth: 4}
	drawMode = termsafe.Mode{SGR: true, TabWidth: 4}
)

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
