package tools

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		wantKept string
		removed  int // 0: unchanged
	}{
		{"short text is unchanged", "hello", "hello", 0},
		{"exactly the cap is unchanged", strings.Repeat("a", MaxOutput), strings.Repeat("a", MaxOutput), 0},
		{"one over the cap", strings.Repeat("a", MaxOutput+1), strings.Repeat("a", MaxOutput), 1},
		{"multi-byte characters count once", strings.Repeat("é", MaxOutput+5), strings.Repeat("é", MaxOutput), 5},
		{"more bytes than the cap but fewer characters", strings.Repeat("€", MaxOutput-1), strings.Repeat("€", MaxOutput-1), 0},
		{"four-byte characters are never split", strings.Repeat("𝄞", MaxOutput+2), strings.Repeat("𝄞", MaxOutput), 2},
		{"mixed widths", strings.Repeat("a€", MaxOutput), strings.Repeat("a€", MaxOutput/2), MaxOutput},
		{"a capped text ending like a note is still cut", strings.Repeat("a", MaxOutput*2) + "\n... [truncated 3 chars]", strings.Repeat("a", MaxOutput), MaxOutput + len("\n... [truncated 3 chars]")},
		{"a note-like tail without digits is plain text", strings.Repeat("a", MaxOutput) + "\n... [truncated chars]", strings.Repeat("a", MaxOutput), len("\n... [truncated chars]")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Cap(tt.in)
			want := tt.wantKept
			if tt.removed > 0 {
				want += truncationNote(tt.removed)
			}
			if got != want {
				t.Errorf("Cap = %.40q… (%d bytes), want %.40q… (%d bytes); tail %q", got, len(got), want, len(want), got[max(0, len(got)-40):])
			}
			if !utf8.ValidString(got) {
				t.Error("result is not valid UTF-8")
			}
			if again := Cap(got); again != got {
				t.Errorf("Cap is not idempotent: tail %q", again[max(0, len(again)-40):])
			}
		})
	}
}

func TestTruncationNoteFormat(t *testing.T) {
	t.Parallel()
	if got := Cap(strings.Repeat("x", MaxOutput+1234)); !strings.HasSuffix(got, "x\n... [truncated 1234 chars]") {
		t.Errorf("tail = %q", got[len(got)-40:])
	}
}

// A capWriter fed in arbitrary pieces (splitting characters) gives what Cap
// gives for the whole text.
func TestCapWriterMatchesCapWhateverTheChunks(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "é", "€", "𝄞", "\n"}
	for i := range 50 {
		var b strings.Builder
		for b.Len() < MaxOutput*2+r.IntN(MaxOutput) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		if i%5 == 0 {
			b.Reset()
			b.WriteString(strings.Repeat("é", r.IntN(MaxOutput)))
		}
		s := b.String()
		var w capWriter
		for rest := []byte(s); len(rest) > 0; {
			n := min(len(rest), 1+r.IntN(7000))
			w.Write(rest[:n])
			rest = rest[n:]
		}
		if got, want := w.String(), Cap(s); got != want {
			t.Fatalf("case %d: writer and Cap differ: %d vs %d bytes", i, len(got), len(want))
		}
	}
}

func TestIsBinary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		head string
		want bool
	}{
		{"empty", "", false},
		{"text", "package main\n", false},
		{"NUL at start", "\x00abc", true},
		{"NUL at the last sniffed byte", strings.Repeat("a", BinarySniff-1) + "\x00", true},
		{"NUL just past the sniff", strings.Repeat("a", BinarySniff) + "\x00", false},
		{"invalid UTF-8 without NUL is text", "\xff\xfe\xfd", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsBinary([]byte(tt.head)); got != tt.want {
				t.Errorf("IsBinary = %v, want %v", got, tt.want)
			}
		})
	}
}
