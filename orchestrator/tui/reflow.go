package tui

import (
	"bytes"
	"io"
	"strconv"
	"sync"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/term"
)

// reflowWriter sits between Bubble Tea and the terminal and keeps its
// frames in place when the terminal's width changes. Bubble Tea starts each
// frame by climbing one row per line of the last one, to its top. But when
// the terminal narrows, one that rewraps its lines (tmux and most terminal
// emulators do) has turned each line wider than the new width into several
// rows; and a frame written just before Bubble Tea hears of the change may
// hold lines wider than the terminal, which it wraps. Either way the climb
// falls short, and the top of the old frame stays behind: a duplicate in
// the scrollback. So the writer follows what each frame wrote (the width of
// every line) and, before the next one, asks the terminal its width; when
// the old frame now takes more rows than lines, the climb goes that much
// higher and clears below first.
type reflowWriter struct {
	out   io.Writer
	width func() (int, bool) // the terminal's width now, if known

	mu      sync.Mutex
	cells   []int    // the cell widths of the lines written, the live area's last
	text    [][]byte // the same lines as written (without their carriage returns)
	wroteAt int      // the terminal's width when the last frame was written
}

// keepLines bounds what the writer remembers of the lines written.
const keepLines = 256

func newReflowWriter(out io.Writer) *reflowWriter {
	w := &reflowWriter{out: out, width: func() (int, bool) { return 0, false }}
	if f, ok := out.(terminalFile); ok {
		w.width = func() (int, bool) {
			cols, _, err := term.GetSize(f.Fd())
			return cols, err == nil && cols > 0
		}
	}
	return w
}

// Write passes p on. A frame (it starts with the climb) climbs the rows
// its predecessor takes now, and its lines are remembered.
func (w *reflowWriter) Write(p []byte) (int, error) {
	n, up := climb(p)
	first := n == 0 && len(p) > 0 && p[0] == '\r' // the first frame has nothing to climb
	if n == 0 && !first {
		return w.out.Write(p) // not a frame: a mode switch, the cursor
	}
	width, known := w.width()
	w.mu.Lock()
	extra := 0
	if known && n > 0 {
		extra = w.extraRows(up, width)
	}
	body := p[n:]
	if extra > 0 {
		// The climb clears the old frame, so the lines Bubble Tea means to
		// leave as they were are gone: they are written again.
		body = w.restoreKept(body, up)
	}
	w.follow(body, up)
	if known {
		w.wroteAt = width
	}
	w.mu.Unlock()
	if extra == 0 {
		return w.out.Write(p)
	}
	fixed := make([]byte, 0, len(body)+16)
	fixed = append(fixed, ansi.CursorUp(up+extra)...)
	fixed = append(fixed, ansi.EraseScreenBelow...)
	fixed = append(fixed, body...)
	if _, err := w.out.Write(fixed); err != nil {
		return 0, err
	}
	return len(p), nil
}

// restoreKept returns body with each line Bubble Tea left as it was (an
// empty segment, or a lone carriage return for the last line) replaced by
// that line as the last frame wrote it. Callers hold w.mu.
func (w *reflowWriter) restoreKept(body []byte, up int) []byte {
	old := w.text[max(len(w.text)-up-1, 0):]
	segs := bytes.Split(body, []byte("\n"))
	out := make([]byte, 0, len(body)+256)
	for i, seg := range segs {
		if i > 0 {
			out = append(out, '\n')
		}
		if kept(seg) && i < len(old) {
			out = append(out, old[i]...)
			if i < len(segs)-1 || len(seg) == 1 {
				out = append(out, '\r')
			}
			continue
		}
		out = append(out, seg...)
	}
	return out
}

// kept reports whether a frame's segment is a line Bubble Tea left as it
// was.
func kept(seg []byte) bool { return len(seg) == 0 || len(seg) == 1 && seg[0] == '\r' }

// extraRows is how many rows more than up the climb to the top of the
// last frame takes, the terminal being width cells wide: its lines but
// the last take one row per width cells; the cursor sits at the start of
// the last one, on its last row if the terminal wrapped it as it was
// written.
func (w *reflowWriter) extraRows(up, width int) int {
	if up+1 > len(w.cells) {
		return 0 // not a frame the writer saw whole
	}
	frame := w.cells[len(w.cells)-up-1:]
	rowsOf := func(c int) int { return max((c+width-1)/width, 1) }
	climb := 0
	for _, c := range frame[:up] {
		climb += rowsOf(c)
	}
	if last := frame[up]; w.wroteAt > 0 && last > w.wroteAt {
		climb += rowsOf(last) - 1
	}
	return max(climb-up, 0)
}

// follow records the lines a frame wrote: body is what follows its climb,
// one segment per line between newlines. A segment that is empty (or only
// a carriage return) is a line Bubble Tea left as it was.
func (w *reflowWriter) follow(body []byte, up int) {
	segs := bytes.Split(body, []byte("\n"))
	from := max(len(w.cells)-up-1, 0)
	oldCells, oldText := w.cells[from:], w.text[from:]
	var cells []int
	var text [][]byte
	for i, seg := range segs {
		if kept(seg) {
			if i < len(oldCells) {
				cells, text = append(cells, oldCells[i]), append(text, oldText[i])
			} else {
				cells, text = append(cells, 0), append(text, nil)
			}
			continue
		}
		cells = append(cells, ansi.StringWidth(string(seg)))
		text = append(text, bytes.Clone(bytes.Trim(seg, "\r")))
	}
	w.cells, w.text = append(w.cells, cells...), append(w.text, text...)
	if len(w.cells) > keepLines {
		w.cells = append([]int(nil), w.cells[len(w.cells)-keepLines:]...)
		w.text = append([][]byte(nil), w.text[len(w.text)-keepLines:]...)
	}
}

// climb parses the cursor-up sequence a frame starts with: its length and
// its count (0, 0 when p does not start with one).
func climb(p []byte) (n, count int) {
	if len(p) < 3 || p[0] != 0x1b || p[1] != '[' {
		return 0, 0
	}
	i := 2
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	if i >= len(p) || p[i] != 'A' {
		return 0, 0
	}
	if i == 2 {
		return 3, 1 // CSI A climbs one row
	}
	count, err := strconv.Atoi(string(p[2:i]))
	if err != nil {
		return 0, 0
	}
	return i + 1, count
}

// terminalFile is what Bubble Tea needs of its output to know it is a
// terminal (and to ask its size).
type terminalFile interface {
	io.ReadWriteCloser
	Fd() uintptr
}

// reflowFile is a reflowWriter over a terminal: Bubble Tea still sees the
// terminal's descriptor.
type reflowFile struct {
	*reflowWriter
	f terminalFile
}

func (r *reflowFile) Read(p []byte) (int, error) { return r.f.Read(p) }
func (r *reflowFile) Close() error               { return r.f.Close() }
func (r *reflowFile) Fd() uintptr                { return r.f.Fd() }

// output is the writer to hand Bubble Tea: the reflow writer, as a
// terminal when the output is one.
func (w *reflowWriter) output() io.Writer {
	if f, ok := w.out.(terminalFile); ok {
		return &reflowFile{reflowWriter: w, f: f}
	}
	return w
}
