package tui

import (
	"fmt"
	"strings"
	"unicode"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

// editor is the prompt input: a line of runes and a cursor, with readline
// keys. It is a plain struct; the root model feeds it keys.
type editor struct {
	text   []rune
	cursor int      // index into text, 0..len(text)
	pastes []string // long pastes, shown as placeholders (collapsePaste)
}

func (e *editor) Value() string { return string(e.text) }

// Set replaces the text and puts the cursor at its end.
func (e *editor) Set(s string) {
	e.text = []rune(s)
	e.cursor = len(e.text)
	if s == "" {
		e.pastes = nil
	}
}

// SetCursor moves the cursor, clamped.
func (e *editor) SetCursor(i int) { e.cursor = max(0, min(i, len(e.text))) }

// BeforeCursor is the text left of the cursor.
func (e *editor) BeforeCursor() string { return string(e.text[:e.cursor]) }

func (e *editor) insert(rs []rune) {
	out := make([]rune, 0, len(e.text)+len(rs))
	out = append(out, e.text[:e.cursor]...)
	out = append(out, rs...)
	out = append(out, e.text[e.cursor:]...)
	e.text = out
	e.cursor += len(rs)
}

// Update applies one key and reports whether it was an editing key.
func (e *editor) Update(k tea.KeyMsg) bool {
	switch k.Type {
	case tea.KeyRunes, tea.KeySpace:
		rs := k.Runes
		if k.Type == tea.KeySpace {
			rs = []rune{' '}
		}
		if k.Paste {
			// A paste arrives whole; carriage returns become newlines; a
			// long one is shown collapsed.
			rs = []rune(strings.ReplaceAll(strings.ReplaceAll(string(rs), "\r\n", "\n"), "\r", "\n"))
			if e.collapsePaste(rs) {
				return true
			}
		}
		if k.Alt && !k.Paste {
			return e.altKey(rs)
		}
		e.insert(rs)
	case tea.KeyCtrlJ: // a newline without submitting
		e.insert([]rune{'\n'})
	case tea.KeyBackspace, tea.KeyCtrlH:
		if k.Alt {
			e.killWordBack()
		} else if e.cursor > 0 {
			e.text = append(e.text[:e.cursor-1], e.text[e.cursor:]...)
			e.cursor--
		}
	case tea.KeyDelete, tea.KeyCtrlD:
		if e.cursor < len(e.text) {
			e.text = append(e.text[:e.cursor], e.text[e.cursor+1:]...)
		}
	case tea.KeyLeft, tea.KeyCtrlB:
		if k.Alt {
			e.cursor = e.wordLeft()
		} else if e.cursor > 0 {
			e.cursor--
		}
	case tea.KeyRight, tea.KeyCtrlF:
		if k.Alt {
			e.cursor = e.wordRight()
		} else if e.cursor < len(e.text) {
			e.cursor++
		}
	case tea.KeyCtrlLeft:
		e.cursor = e.wordLeft()
	case tea.KeyCtrlRight:
		e.cursor = e.wordRight()
	case tea.KeyHome, tea.KeyCtrlA:
		e.cursor = 0
	case tea.KeyEnd, tea.KeyCtrlE:
		e.cursor = len(e.text)
	case tea.KeyCtrlK:
		e.text = e.text[:e.cursor]
	case tea.KeyCtrlU:
		e.text = append([]rune(nil), e.text[e.cursor:]...)
		e.cursor = 0
	case tea.KeyCtrlW:
		e.killWordBack()
	default:
		return false
	}
	return true
}

// altKey handles alt-b / alt-f / alt-d (word motion and deletion).
func (e *editor) altKey(rs []rune) bool {
	if len(rs) != 1 {
		return false
	}
	switch rs[0] {
	case 'b':
		e.cursor = e.wordLeft()
	case 'f':
		e.cursor = e.wordRight()
	case 'd':
		end := e.wordRight()
		e.text = append(e.text[:e.cursor], e.text[end:]...)
	default:
		return false
	}
	return true
}

func (e *editor) killWordBack() {
	start := e.wordLeft()
	e.text = append(e.text[:start], e.text[e.cursor:]...)
	e.cursor = start
}

// wordLeft is where the word before the cursor starts.
func (e *editor) wordLeft() int {
	i := e.cursor
	for i > 0 && unicode.IsSpace(e.text[i-1]) {
		i--
	}
	for i > 0 && !unicode.IsSpace(e.text[i-1]) {
		i--
	}
	return i
}

// wordRight is where the word after the cursor ends.
func (e *editor) wordRight() int {
	i := e.cursor
	for i < len(e.text) && unicode.IsSpace(e.text[i]) {
		i++
	}
	for i < len(e.text) && !unicode.IsSpace(e.text[i]) {
		i++
	}
	return i
}

// lineUp moves the cursor to the line above, keeping its column where the
// line is long enough; false on the first line.
func (e *editor) lineUp() bool {
	start := e.lineStart(e.cursor)
	if start == 0 {
		return false
	}
	col := e.cursor - start
	prev := e.lineStart(start - 1)
	e.cursor = min(prev+col, start-1)
	return true
}

// lineDown moves the cursor to the line below; false on the last line.
func (e *editor) lineDown() bool {
	end := e.lineEnd(e.cursor)
	if end == len(e.text) {
		return false
	}
	col := e.cursor - e.lineStart(e.cursor)
	e.cursor = min(end+1+col, e.lineEnd(end+1))
	return true
}

func (e *editor) lineStart(i int) int {
	for i > 0 && e.text[i-1] != '\n' {
		i--
	}
	return i
}

func (e *editor) lineEnd(i int) int {
	for i < len(e.text) && e.text[i] != '\n' {
		i++
	}
	return i
}

// pasteLines is the size from which a paste is shown collapsed.
const pasteLines = 10

// collapsePaste replaces a long paste by a placeholder the editor expands
// when the prompt is sent; it reports whether it did.
func (e *editor) collapsePaste(rs []rune) bool {
	text := string(rs)
	n := lineCount(text)
	if n < pasteLines {
		return false
	}
	e.pastes = append(e.pastes, text)
	e.insert([]rune(fmt.Sprintf("[pasted text #%d, %d lines]", len(e.pastes), n)))
	return true
}

// lineCount counts the lines of s, a final newline ending the last.
func lineCount(s string) int { return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1 }

// Expanded is the text with every paste placeholder still in it replaced
// by what was pasted.
func (e *editor) Expanded() string {
	s := string(e.text)
	for i, p := range e.pastes {
		n := lineCount(p)
		s = strings.Replace(s, fmt.Sprintf("[pasted text #%d, %d lines]", i+1, n), p, 1)
	}
	return s
}

// View renders the input after prompt, wrapped to width, in at most
// maxRows rows around the cursor, with the cursor drawn and the
// placeholder shown when empty.
func (e *editor) View(prompt string, width int, placeholder string, st styles, maxRows int) []string {
	cur := func(s string) string { return st.cursor.Render(s) }
	if len(e.text) == 0 {
		if placeholder == "" {
			return []string{prompt + cur(" ")}
		}
		r := []rune(placeholder)
		return []string{cut(prompt+cur(string(r[0]))+st.dim.Render(string(r[1:])), width)}
	}
	// The logical lines, the cursor marked, each wrapped; the row holding
	// the cursor is remembered.
	indent := strings.Repeat(" ", ansi.StringWidth(prompt))
	var out []string
	cursorRow := 0
	lineStart := 0
	for lineStart <= len(e.text) {
		end := e.lineEnd(lineStart)
		var b strings.Builder
		if lineStart == 0 {
			b.WriteString(prompt)
		} else {
			b.WriteString(indent)
		}
		at := -1 // the cursor's offset in this line, if here
		for i := lineStart; i < end; i++ {
			r := e.text[i]
			if i == e.cursor {
				at = i
				b.WriteString(cur(clean(string(r))))
				continue
			}
			b.WriteString(clean(string(r)))
		}
		if e.cursor == end {
			at = end
			b.WriteString(cur(" "))
		}
		wrapped := []string{b.String()}
		if width > 0 {
			wrapped = strings.Split(ansi.Hardwrap(b.String(), width, true), "\n")
		}
		if at >= 0 {
			col := ansi.StringWidth(indent) + ansi.StringWidth(clean(string(e.text[lineStart:at])))
			cursorRow = len(out)
			if width > 0 {
				cursorRow += min(col/width, len(wrapped)-1)
			}
		}
		out = append(out, wrapped...)
		lineStart = end + 1
	}
	if maxRows > 0 && len(out) > maxRows {
		first := min(max(cursorRow-maxRows/2, 0), len(out)-maxRows)
		out = out[first : first+maxRows]
	}
	return out
}
