package sandbox

import (
	"fmt"
	"io"
	"strings"
)

// Total is how far an image pull or build has come as a whole, beside its
// progress lines: a pull's bytes over all its layers, a build's steps.
type Total struct {
	// Build is set for a build (Done and Of count steps); otherwise it is
	// a pull (they count bytes).
	Build bool
	// Done is what has been done of Of.
	Done, Of int64
}

// TotalWriter is a progress writer that also takes totals (the session's
// writer, which makes them typed events for the status line).
type TotalWriter interface {
	io.Writer
	Total(Total)
}

// ReportTotal hands t to w when w takes totals; a plain writer gets the
// lines only.
func ReportTotal(w io.Writer, t Total) {
	if tw, ok := w.(TotalWriter); ok {
		tw.Total(t)
	}
}

// HumanBytes shows a byte count in B, kB, MB or GB (powers of 1000, as
// registries and the docker CLI count).
func HumanBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fGB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fMB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fkB", float64(n)/1e3)
	}
	return fmt.Sprintf("%dB", n)
}

// TagMove is an image tag that names another image on its registry than
// the one the workspace's sandbox runs: Old is the digest the sandbox
// runs, New the one the tag names now.
type TagMove struct {
	Ref, Old, New string
}

// Notice says the tag moved and how to take the new image.
func (m TagMove) Notice() string {
	return fmt.Sprintf("the tag %s moved on its registry: the sandbox runs %s, the tag now names %s; "+
		"start with --pull to use the new image", m.Ref, shortDigest(m.Old), shortDigest(m.New))
}

// shortDigest is a digest's first twelve hex digits.
func shortDigest(d string) string {
	if _, hex, ok := strings.Cut(d, ":"); ok {
		d = hex
	}
	return d[:min(12, len(d))]
}
