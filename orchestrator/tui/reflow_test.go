package tui

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// frame is a Bubble Tea frame: the climb over the last one, then lines
// (an empty one is left as it was), the cursor back at the line's start.
func frame(up int, lines ...string) string {
	s := "\r" // the first frame only returns to the line's start
	if up > 0 {
		s = "\x1b[" + map[bool]string{true: "", false: itoa(up)}[up == 1] + "A"
	}
	return s + strings.Join(lines, "\r\n") + "\r"
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestReflowWriterClimbsTheRowsATerminalAdded(t *testing.T) {
	t.Parallel()
	wide := strings.Repeat("x", 100)
	tests := []struct {
		name  string
		width []int    // the terminal's width at each write
		write []string // the frames
		want  string   // the last write as it reached the terminal
	}{
		{
			name:  "same width: frames pass as they are",
			width: []int{80, 80},
			write: []string{frame(0, "a", "b", "c"), frame(2, "a", "B", "c")},
			want:  frame(2, "a", "B", "c"),
		},
		{
			name:  "narrower: the wide lines' extra rows are climbed and cleared, and the lines left as they were written again",
			width: []int{100, 60},
			write: []string{frame(0, wide, wide[:97], "short", "status"), frame(3, "", "", "", "status 2")},
			want:  "\x1b[5A\x1b[J" + strings.TrimPrefix(frame(3, wide, wide[:97], "short", "status 2"), "\x1b[3A"),
		},
		{
			name:  "narrower, the last line left as it was",
			width: []int{100, 60},
			write: []string{frame(0, wide, "status"), frame(1, "a", "")},
			want:  "\x1b[2A\x1b[J" + strings.TrimPrefix(frame(1, "a", "status"), "\x1b[A"),
		},
		{
			name:  "a second narrowing climbs the rows of the lines written again",
			width: []int{100, 60, 40},
			write: []string{frame(0, wide, "input", "status"), frame(2, "", "input 2", ""), frame(2, "", "", "")},
			want:  "\x1b[4A\x1b[J" + strings.TrimPrefix(frame(2, wide, "input 2", "status"), "\x1b[2A"),
		},
		{
			name:  "a frame the terminal wrapped as it was written",
			width: []int{60, 60},
			write: []string{frame(0, wide, "input", "status"), frame(2, "a", "b", "c")},
			want:  "\x1b[3A\x1b[J" + strings.TrimPrefix(frame(2, "a", "b", "c"), "\x1b[2A"),
		},
		{
			name:  "lines left as they were keep their width",
			width: []int{100, 100, 60},
			write: []string{frame(0, wide, "input", "status"), frame(2, "", "input 2", ""), frame(2, "a", "b", "c")},
			want:  "\x1b[3A\x1b[J" + strings.TrimPrefix(frame(2, "a", "b", "c"), "\x1b[2A"),
		},
		{
			name:  "wider: nothing to climb",
			width: []int{60, 100},
			write: []string{frame(0, strings.Repeat("y", 60), "status"), frame(1, "a", "b")},
			want:  frame(1, "a", "b"),
		},
		{
			name:  "what is not a frame passes",
			width: []int{100, 60},
			write: []string{frame(0, wide, "status"), "\x1b[?25h"},
			want:  "\x1b[?25h",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			w := newReflowWriter(&out)
			i := 0
			w.width = func() (int, bool) { return tt.width[min(i, len(tt.width)-1)], true }
			for ; i < len(tt.write); i++ {
				out.Reset()
				if n, err := w.Write([]byte(tt.write[i])); err != nil || n != len(tt.write[i]) {
					t.Fatalf("write %d: %d, %v", i, n, err)
				}
			}
			if got := out.String(); got != tt.want {
				t.Errorf("last write\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
