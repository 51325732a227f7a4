package tui

import (
	"strings"

	"github.com/charmbracelet/glamour"
	gstyles "github.com/charmbracelet/glamour/styles"
	"github.com/muesli/termenv"
)

// markdown renders assistant text with glamour, keeping one renderer per
// width (building one parses its style).
type markdown struct {
	profile termenv.Profile
	width   int
	r       *glamour.TermRenderer
}

// render renders src for the given width; on a renderer failure the text
// is shown as it came.
func (md *markdown) render(src string, width int) string {
	width = max(width, 20)
	if md.r == nil || md.width != width {
		md.r, md.width = newGlamour(md.profile, width), width
	}
	if md.r == nil {
		return strings.TrimRight(src, "\n")
	}
	out, err := md.r.Render(src)
	if err != nil {
		return strings.TrimRight(src, "\n")
	}
	return tidyLines(out)
}

func newGlamour(profile termenv.Profile, width int) *glamour.TermRenderer {
	style := gstyles.DarkStyleConfig
	zero := uint(0)
	style.Document.Margin = &zero
	style.Document.BlockPrefix, style.Document.BlockSuffix = "", ""
	// A level-one heading looks like the others ("# Plan" as "## Code"
	// does), not a padded block with a background.
	h1 := style.H2
	h1.Prefix = "# "
	h1.BlockSuffix = ""
	style.H1 = h1
	formatter := map[termenv.Profile]string{
		termenv.Ascii:     "noop",
		termenv.ANSI:      "terminal",
		termenv.ANSI256:   "terminal256",
		termenv.TrueColor: "terminal16m",
	}[profile]
	r, err := glamour.NewTermRenderer(
		glamour.WithStyles(style),
		glamour.WithColorProfile(profile),
		glamour.WithWordWrap(width),
		glamour.WithChromaFormatter(formatter),
	)
	if err != nil {
		return nil
	}
	return r
}

// splitFinished splits streaming markdown at the last block boundary: a
// blank line outside a fenced code block, followed by a complete line.
// What comes before it is finished (its rendering cannot change as more
// text arrives); the rest is still growing.
func splitFinished(src string) (done, rest string) {
	var fence string // the open fence's marker ("```", "~~~~"), or ""
	boundary := 0
	prevBlank := false
	for off := 0; off < len(src); {
		nl := strings.IndexByte(src[off:], '\n')
		complete := nl >= 0
		if !complete {
			nl = len(src) - off
		}
		line := src[off : off+nl]
		trimmed := strings.TrimSpace(line)
		// A block starts after a blank line (an indented line may continue
		// a list item, so it does not count).
		if fence == "" && prevBlank && trimmed != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") {
			boundary = off
		}
		if !complete {
			break // the last line is still being written
		}
		switch m := fenceMarker(trimmed); {
		case fence != "":
			if m != "" && m[0] == fence[0] && len(m) >= len(fence) && m == trimmed {
				fence = ""
			}
		case m != "":
			fence = m
		}
		prevBlank = trimmed == "" && fence == ""
		off += nl + 1
	}
	return src[:boundary], src[boundary:]
}

// fenceMarker returns the run of ` or ~ (three or more) a line starts with.
func fenceMarker(line string) string {
	if len(line) < 3 || (line[0] != '`' && line[0] != '~') {
		return ""
	}
	n := 0
	for n < len(line) && line[n] == line[0] {
		n++
	}
	if n < 3 {
		return ""
	}
	return line[:n]
}
