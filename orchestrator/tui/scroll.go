package tui

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
)

// scroller shows a text taller than its room as a window on its rows, with
// one row saying which rows are shown and how to see the others.
type scroller struct {
	top      int  // the first row shown
	seen     int  // the window's height at the last draw, for paging
	overflow bool // the text did not fit at the last draw
}

// window returns at most height rows of lines from the scroll position.
func (s *scroller) window(st styles, lines []string, width, height int, hint string) []string {
	height = max(height, 2)
	s.overflow = len(lines) > height
	if !s.overflow {
		s.top, s.seen = 0, len(lines)
		return lines
	}
	shown := height - 1
	s.top = max(min(s.top, len(lines)-shown), 0)
	s.seen = shown
	out := append([]string(nil), lines[s.top:s.top+shown]...)
	more := fmt.Sprintf("rows %d-%d of %d · %s", s.top+1, s.top+shown, len(lines), hint)
	return append(out, st.dim.Render(cut(more, width)))
}

// key scrolls on page up/down, and on up/down when arrows is set; it
// reports whether it used the key.
func (s *scroller) key(k tea.KeyMsg, arrows bool) bool {
	page := max(s.seen-1, 1)
	switch k.Type {
	case tea.KeyPgDown:
		s.top += page
	case tea.KeyPgUp:
		s.top = max(s.top-page, 0)
	case tea.KeyDown:
		if !arrows {
			return false
		}
		s.top++
	case tea.KeyUp:
		if !arrows {
			return false
		}
		s.top = max(s.top-1, 0)
	default:
		return false
	}
	return true
}
