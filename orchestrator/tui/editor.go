package tui

import (
	"strings"
	"unicode"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

// editor is the prompt input: a line of runes and a cursor, with readline
// keys. It is a plain struct; the root model feeds it keys.
type editor struct {
	text   []rune
	cursor int // index into text, 0..len(text)
}

func (e *editor) Value() string { return string(e.text) }

// Set replaces the text and puts the cursor at its end.
func (e *editor) Set(s string) {
	e.text = []rune(s)
	e.cursor = len(e.text)
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
			// A paste arrives whole; carriage returns become newlines.
			rs = []rune(strings.ReplaceAll(strings.ReplaceAll(string(rs), "\r\n", "\n"), "\r", "\n"))
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

// View renders the input after prompt, wrapped to width, with the cursor
// drawn by cursorStyle (nil: not drawn) and the placeholder shown when
// empty.
func (e *editor) View(prompt string, width int, placeholder string, st styles, showCursor bool) string {
	cur := func(s string) string {
		if !showCursor {
			return s
		}
		return st.cursor.Render(s)
	}
	if len(e.text) == 0 {
		ph := placeholder
		if ph == "" {
			return prompt + cur(" ")
		}
		r := []rune(ph)
		return prompt + cur(string(r[0])) + st.dim.Render(string(r[1:]))
	}
	// Build the logical lines with the cursor marked, then wrap each.
	var b strings.Builder
	b.WriteString(prompt)
	indent := strings.Repeat(" ", ansi.StringWidth(prompt))
	for i, r := range e.text {
		if i == e.cursor {
			if r == '\n' {
				b.WriteString(cur(" "))
			} else {
				b.WriteString(cur(string(r)))
				continue
			}
		}
		if r == '\n' {
			b.WriteString("\n" + indent)
			continue
		}
		b.WriteRune(r)
	}
	if e.cursor == len(e.text) {
		b.WriteString(cur(" "))
	}
	if width <= 0 {
		return b.String()
	}
	return ansi.Hardwrap(b.String(), width, true)
}
