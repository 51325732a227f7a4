package tui

import (
	"io"
	"strconv"
	"sync"

	"github.com/charmbracelet/x/ansi"
)

// reflowWriter sits between Bubble Tea and the terminal. When the terminal
// narrows, one that rewraps its lines (tmux and most terminal emulators
// do) turns each line of the frame on screen that is wider than the new
// width into several rows, where Bubble Tea counts one: its next frame
// starts that many rows too low and leaves the top of the old frame behind,
// a duplicate in the scrollback. After such a change the writer moves the
// first frame up by the extra rows and erases what is below, so that it
// paints over the whole of the old frame.
type reflowWriter struct {
	out io.Writer

	mu       sync.Mutex
	latest   []string // the lines of the newest view
	onScreen []string // the lines of the frame last written
	extra    int      // rows to add to the next frame's climb
}

func newReflowWriter(out io.Writer) *reflowWriter { return &reflowWriter{out: out} }

// viewed records the newest view's lines (called from View).
func (w *reflowWriter) viewed(lines []string) {
	w.mu.Lock()
	w.latest = lines
	w.mu.Unlock()
}

// resized records a change to width: the frame on screen now takes the
// rows a rewrapping terminal gives it.
func (w *reflowWriter) resized(width int) {
	if width <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	extra := 0
	for i, l := range w.onScreen {
		if i == len(w.onScreen)-1 {
			break // the cursor sits at the start of the last line
		}
		if cells := ansi.StringWidth(l); cells > width {
			extra += (cells+width-1)/width - 1
		}
	}
	w.extra += extra
}

// Write passes p on; a frame written after a width change climbs the extra
// rows and clears below first.
func (w *reflowWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	n, up := climb(p)
	if n > 0 {
		// A frame: Bubble Tea starts each with the climb to its top.
		if w.extra > 0 {
			fixed := make([]byte, 0, len(p)+16)
			fixed = append(fixed, ansi.CursorUp(up+w.extra)...)
			fixed = append(fixed, ansi.EraseScreenBelow...)
			fixed = append(fixed, p[n:]...)
			w.extra = 0
			w.onScreen = w.latest
			w.mu.Unlock()
			if _, err := w.out.Write(fixed); err != nil {
				return 0, err
			}
			return len(p), nil
		}
		w.onScreen = w.latest
	}
	w.mu.Unlock()
	return w.out.Write(p)
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
