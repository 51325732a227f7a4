package termsafe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// attack is what a model or a repository's script may print: a clipboard
// write (OSC 52), a link (OSC 8), a window title, a bell, cursor moves and
// erases, a device control string, a C1 CSI and a bidi override.
const attack = "a\x1b]52;c;ZWNobyBwd25lZA==\x07b\x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\c" +
	"\x1b]0;owned\x07d\x07e\x1b[2J\x1b[H\x1b[3Af\x1b[Kg\x1bPq#0\x1b\\h\u009b2Ji\u202ej\x1b7k\x1b(Bl\x08m\rn"

func TestModes(t *testing.T) {
	t.Parallel()
	ui := Mode{SGR: true, TabWidth: 4}
	term := Mode{SGR: true}
	file := Mode{}
	tests := []struct {
		name, in       string
		ui, term, file string
	}{
		{"plain text passes", "hello\nworld", "hello\nworld", "hello\nworld", "hello\nworld"},
		{"control bytes go", "a\x00b\x07c\x0ed\x7fe", "abcde", "abcde", "abcde"},
		{"SGR stays where styles may", "\x1b[31mred\x1b[0m \x1b[2Jx\x1b]0;title\x07y", "\x1b[31mred\x1b[0m xy", "\x1b[31mred\x1b[0m xy", "red xy"},
		{"tabs are laid out by the UI only", "a\tb", "a   b", "a\tb", "a\tb"},
		{"a carriage return goes", "10%\r50%\r\n", "10%50%\n", "10%50%\n", "10%50%\n"},
		{"invalid UTF-8 and C1 go", "x\xff\xfey\u0085z", "xyz", "xyz", "xyz"},
		{"bidirectional overrides go", "abc\u202edef\u2066g", "abcdefg", "abcdefg", "abcdefg"},
		{"a malformed sequence goes", "a\x1b[12\x01b", "ab", "ab", "ab"},
		{"an SGR with intermediates is not SGR", "a\x1b[1 mb\x1b[?25lc", "abc", "abc", "abc"},
		{"an OSC ended by another ESC ends there", "a\x1b]0;t\x1b[1mb", "a\x1b[1mb", "a\x1b[1mb", "ab"},
		{"an unfinished sequence at the end goes", "a\x1b]52;c;AAAA", "a", "a", "a"},
		{"ESC with intermediates and a final goes whole", "a\x1b(Bb\x1b#8c", "abc", "abc", "abc"},
		{"CJK and emoji stay", "日本語 🙂", "日本語 🙂", "日本語 🙂", "日本語 🙂"},
		{"every attack at once", attack, "ablinkcdefgh2Jijklmn", "ablinkcdefgh2Jijklmn", "ablinkcdefgh2Jijklmn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range []struct {
				mode Mode
				want string
			}{{ui, tt.ui}, {term, tt.term}, {file, tt.file}} {
				if got := c.mode.String(tt.in); got != c.want {
					t.Errorf("%+v: String(%q) = %q, want %q", c.mode, tt.in, got, c.want)
				}
			}
		})
	}
}

// TestWriterJudgesASequenceCutBetweenWrites: whatever the cut, a stream
// comes out as the whole text would.
func TestWriterJudgesASequenceCutBetweenWrites(t *testing.T) {
	t.Parallel()
	in := attack + "\x1b[1;31mbold\x1b[0m 日本語\xe6\x97"
	for _, m := range []Mode{{SGR: true}, {}} {
		want := m.String(in)
		for cut := range len(in) {
			var b bytes.Buffer
			w := NewWriter(&b, m)
			w.Write([]byte(in[:cut]))
			w.Write([]byte(in[cut:]))
			if b.String() != want {
				t.Fatalf("%+v cut at %d: %q, want %q", m, cut, b.String(), want)
			}
		}
		// One byte at a time.
		var b bytes.Buffer
		w := NewWriter(&b, m)
		for i := range len(in) {
			w.Write([]byte{in[i]})
		}
		if b.String() != want {
			t.Errorf("%+v byte by byte: %q, want %q", m, b.String(), want)
		}
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"a plain name stays", "src/main.go", "src/main.go"},
		{"spaces and unicode stay", "my notes/日本.md", "my notes/日本.md"},
		{"an escape is quoted", "x\x1b[2Jy.md", `"x\x1b[2Jy.md"`},
		{"a newline is quoted", "a\nb", `"a\nb"`},
		{"a bidi override is quoted", "a\u202eb", `"a\u202eb"`},
		{"invalid UTF-8 is quoted", "a\xffb", `"a\xffb"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Name(tt.in); got != tt.want {
				t.Errorf("Name(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// TestJSONKeepsTheTextAndPrintsNoControl: the decoded text is exactly what
// went in; the encoded line holds no byte a terminal acts on.
func TestJSONKeepsTheTextAndPrintsNoControl(t *testing.T) {
	t.Parallel()
	in := "a\x1b]52;c;AAAA\x07\x7f\u009b2J\u202e日本"
	var b bytes.Buffer
	if err := json.NewEncoder(JSON(&b)).Encode(map[string]string{"text": in}); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSuffix(b.String(), "\n")
	if (Mode{}).String(line) != line {
		t.Errorf("the JSON line holds something a terminal acts on: %q", line)
	}
	var got map[string]string
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["text"] != in {
		t.Errorf("decoded %q, want %q", got["text"], in)
	}
}
