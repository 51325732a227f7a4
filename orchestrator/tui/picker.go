package tui

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
)

// pickItem is one choice of a picker.
type pickItem struct {
	label  string
	detail string // shown under the list while the item is highlighted
}

// picker is a list of choices, one highlighted, or several marked when
// multi is set. It draws itself in any height: when the list does not fit,
// it shows a window around the highlighted item with "↑ n more" and
// "↓ n more" rows, so that no choice is out of reach or out of mind.
type picker struct {
	items  []pickItem
	sel    int
	multi  bool
	chosen []bool
}

func newPicker(labels ...string) *picker {
	p := &picker{}
	for _, l := range labels {
		p.items = append(p.items, pickItem{label: l})
	}
	return p
}

// pickerPage is how far page up and page down move.
const pickerPage = 5

// key applies a key; enter reports that the user chose. Up and down wrap
// around; x and space mark items of a multi picker.
func (p *picker) key(k tea.KeyMsg) (enter, handled bool) {
	n := len(p.items)
	if n == 0 {
		return k.Type == tea.KeyEnter, k.Type == tea.KeyEnter
	}
	switch k.Type {
	case tea.KeyUp, tea.KeyShiftTab:
		p.sel = (p.sel - 1 + n) % n
	case tea.KeyDown, tea.KeyTab:
		p.sel = (p.sel + 1) % n
	case tea.KeyPgUp:
		p.sel = max(p.sel-pickerPage, 0)
	case tea.KeyPgDown:
		p.sel = min(p.sel+pickerPage, n-1)
	case tea.KeyHome:
		p.sel = 0
	case tea.KeyEnd:
		p.sel = n - 1
	case tea.KeyEnter:
		return true, true
	case tea.KeySpace:
		return false, p.toggle()
	case tea.KeyRunes:
		switch string(k.Runes) {
		case "x":
			return false, p.toggle()
		case "k":
			p.sel = (p.sel - 1 + n) % n
		case "j":
			p.sel = (p.sel + 1) % n
		default:
			return false, false
		}
	default:
		return false, false
	}
	return false, true
}

func (p *picker) toggle() bool {
	if !p.multi {
		return false
	}
	if p.chosen == nil {
		p.chosen = make([]bool, len(p.items))
	}
	p.chosen[p.sel] = !p.chosen[p.sel]
	return true
}

// marked lists the marked items' indexes, in order.
func (p *picker) marked() []int {
	var out []int
	for i, c := range p.chosen {
		if c {
			out = append(out, i)
		}
	}
	return out
}

// rowsNeeded is the height that shows every item.
func (p *picker) rowsNeeded() int { return max(len(p.items), 1) }

// view draws the picker in at most height rows of width cells.
func (p *picker) view(st styles, width, height int) []string {
	n := len(p.items)
	if n == 0 {
		return []string{st.dim.Render("  (nothing to choose from)")}
	}
	height = max(height, 1)
	first, last := 0, n // the items shown: [first, last)
	switch {
	case n <= height:
	case height < 3: // no room for markers
		first, last = p.sel, p.sel+1
	case p.sel < height-1: // the top: a "more" row at the bottom
		last = height - 1
	case p.sel >= n-(height-1): // the bottom: a "more" row at the top
		first = n - (height - 1)
	default: // the middle: both
		shown := height - 2
		first = min(max(p.sel-shown/2, 1), n-shown-1)
		last = first + shown
	}
	var out []string
	if first > 0 && height >= 3 {
		out = append(out, st.dim.Render(cut(fmt.Sprintf("  ↑ %d more", first), width)))
	}
	for i := first; i < last; i++ {
		it := p.items[i]
		mark := ""
		if p.multi {
			mark = "[ ] "
			if p.chosen != nil && p.chosen[i] {
				mark = "[x] "
			}
		}
		if i == p.sel {
			out = append(out, st.selected.Render(cut("> "+mark+it.label, width)))
		} else {
			out = append(out, cut("  "+mark+it.label, width))
		}
	}
	if last < n && height >= 3 {
		out = append(out, st.dim.Render(cut(fmt.Sprintf("  ↓ %d more", n-last), width)))
	}
	return out
}
