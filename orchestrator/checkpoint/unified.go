package checkpoint

import (
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/utils/diff"
	"github.com/sergi/go-diff/diffmatchpatch"
)

// contextLines is the context of a unified diff, as git's default.
const contextLines = 3

type diffLine struct {
	op   byte // ' ', '-', '+'
	text string
}

// unified is a unified diff of from and to, headed as git heads it.
func unified(path string, action Action, from, to string) string {
	var lines []diffLine
	for _, d := range diff.Do(from, to) {
		op := byte(' ')
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			op = '-'
		case diffmatchpatch.DiffInsert:
			op = '+'
		}
		text := d.Text
		for text != "" {
			line, rest, found := strings.Cut(text, "\n")
			if found {
				line += "\n"
			}
			lines = append(lines, diffLine{op, line})
			text = rest
		}
	}
	var b strings.Builder
	a, z := "a/"+path, "b/"+path
	switch action {
	case Created:
		a = "/dev/null"
	case Deleted:
		z = "/dev/null"
	}
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", a, z)
	// Hunks: runs of changes with up to contextLines around, merged when
	// their context overlaps.
	oldNo, newNo := make([]int, len(lines)+1), make([]int, len(lines)+1)
	for i, l := range lines {
		oldNo[i+1], newNo[i+1] = oldNo[i], newNo[i]
		if l.op != '+' {
			oldNo[i+1]++
		}
		if l.op != '-' {
			newNo[i+1]++
		}
	}
	for i := 0; i < len(lines); {
		if lines[i].op == ' ' {
			i++
			continue
		}
		start := max(0, i-contextLines)
		end := i
		for j := i; j < len(lines); j++ {
			if lines[j].op != ' ' {
				end = j + 1
			} else if j-end >= 2*contextLines {
				break
			}
		}
		stop := min(len(lines), end+contextLines)
		oldCount, newCount := oldNo[stop]-oldNo[start], newNo[stop]-newNo[start]
		oldStart, newStart := oldNo[start]+1, newNo[start]+1
		if oldCount == 0 {
			oldStart--
		}
		if newCount == 0 {
			newStart--
		}
		fmt.Fprintf(&b, "@@ -%s +%s @@\n", hunkRange(oldStart, oldCount), hunkRange(newStart, newCount))
		for _, l := range lines[start:stop] {
			b.WriteByte(l.op)
			b.WriteString(l.text)
			if !strings.HasSuffix(l.text, "\n") {
				b.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = stop
	}
	return b.String()
}

func hunkRange(start, count int) string {
	if count == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}
