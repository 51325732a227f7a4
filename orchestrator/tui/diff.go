package tui

import (
	"fmt"
	"strings"
)

// Diff view limits (spec §17.8; every row is kept: the approval prompt
// scrolls them).
const (
	diffContext = 2
	// diffMaxCells bounds the LCS table; a bigger change is shown as the
	// old lines removed and the new ones added.
	diffMaxCells = 1 << 22
)

// diffOp is one line of a line diff: ' ' unchanged, '+' added, '-' removed.
type diffOp struct {
	kind byte
	text string
}

// splitLines splits text into lines; a final newline ends the last line
// rather than starting an empty one.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	return strings.Split(s, "\n")
}

// lineDiff is an LCS line diff of old and new. The common head and tail
// are peeled off first, so an edit in a large file costs little.
func lineDiff(old, new string) []diffOp {
	a, b := splitLines(old), splitLines(new)
	var head, tail []diffOp
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		head = append(head, diffOp{' ', a[0]})
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		tail = append(tail, diffOp{' ', a[len(a)-1]})
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	ops := head
	ops = append(ops, lcsDiff(a, b)...)
	for i := len(tail) - 1; i >= 0; i-- {
		ops = append(ops, tail[i])
	}
	return ops
}

func lcsDiff(a, b []string) []diffOp {
	var ops []diffOp
	if len(a)*len(b) > diffMaxCells || len(a) == 0 || len(b) == 0 {
		for _, l := range a {
			ops = append(ops, diffOp{'-', l})
		}
		for _, l := range b {
			ops = append(ops, diffOp{'+', l})
		}
		return ops
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	w := len(b) + 1
	lcs := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i]})
			i++
			j++
		case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
			ops = append(ops, diffOp{'-', a[i]})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j]})
			j++
		}
	}
	for ; i < len(a); i++ {
		ops = append(ops, diffOp{'-', a[i]})
	}
	for ; j < len(b); j++ {
		ops = append(ops, diffOp{'+', b[j]})
	}
	return ops
}

// diffRow is one rendered row: an op, or a collapsed run ("..." rows have
// kind '.').
type diffRow struct {
	kind byte
	text string
}

// diffRows collapses unchanged lines further than diffContext from a
// change. It also counts the changes.
func diffRows(ops []diffOp) (rows []diffRow, added, removed int) {
	near := make([]bool, len(ops))
	for i, op := range ops {
		if op.kind == ' ' {
			continue
		}
		if op.kind == '+' {
			added++
		} else {
			removed++
		}
		for k := max(0, i-diffContext); k <= min(len(ops)-1, i+diffContext); k++ {
			near[k] = true
		}
	}
	for i := 0; i < len(ops); {
		if near[i] {
			rows = append(rows, diffRow{ops[i].kind, ops[i].text})
			i++
			continue
		}
		n := 0
		for i < len(ops) && !near[i] {
			n++
			i++
		}
		rows = append(rows, diffRow{'.', fmt.Sprintf("... %d unchanged line(s)", n)})
	}
	return rows, added, removed
}
