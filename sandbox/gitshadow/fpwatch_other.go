//go:build !linux

package gitshadow

// newChangeWatch has no kernel events to offer here: every fingerprint is
// computed in full.
func newChangeWatch() changeWatch { return nil }
