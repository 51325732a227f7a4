package sandbox

import "io"

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
