package docker

import (
	"fmt"
	"io"
	"strings"

	"github.com/shiroagent/shiro/sandbox"
)

// totals follows a pull's layers and a build's steps in the engine's
// progress stream and reports how far they have come as a whole
// (sandbox.Total) to a writer that takes totals: a pull's bytes summed
// over the layers being downloaded, a build's steps done of all. A total
// is reported when its percent or step changes.
type totals struct {
	w      io.Writer
	layers map[string]*layerTotal
	order  []string
	last   sandbox.Total
}

type layerTotal struct{ done, size int64 }

func newTotals(w io.Writer) *totals { return &totals{w: w, layers: map[string]*layerTotal{}} }

// layer takes one status message of a layer: its download's bytes, or
// the end of the download (after which its bytes are all done).
func (t *totals) layer(id, status string, current, total int64) {
	if id == "" {
		return
	}
	l := t.layers[id]
	switch {
	case status == "Downloading" && total > 0:
		if l == nil {
			l = &layerTotal{}
			t.layers[id] = l
			t.order = append(t.order, id)
		}
		l.done, l.size = min(current, total), total
	case l != nil && (status == "Download complete" || status == "Verifying Checksum" || status == "Extracting" || status == "Pull complete"):
		l.done = l.size
	default:
		return
	}
	var sum sandbox.Total
	for _, id := range t.order {
		sum.Done += t.layers[id].done
		sum.Of += t.layers[id].size
	}
	// Same layers, same percent, not finished: nothing new to show.
	if !t.last.Build && sum.Of == t.last.Of && percent(sum) == percent(t.last) && sum.Done != sum.Of {
		return
	}
	t.report(sum)
}

// step takes the classic builder's "Step n/m : INSTRUCTION" line: step n
// starts, n-1 are done.
func (t *totals) step(line string) {
	rest, ok := strings.CutPrefix(line, "Step ")
	if !ok {
		return
	}
	var n, m int64
	if _, err := fmt.Sscanf(rest, "%d/%d", &n, &m); err != nil || m <= 0 {
		return
	}
	t.report(sandbox.Total{Build: true, Done: n - 1, Of: m})
}

func (t *totals) report(s sandbox.Total) {
	if s == t.last {
		return
	}
	t.last = s
	sandbox.ReportTotal(t.w, s)
}

func percent(t sandbox.Total) int64 {
	if t.Of <= 0 {
		return 0
	}
	return t.Done * 100 / t.Of
}
