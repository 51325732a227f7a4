//go:build !linux

package gitshadow

// newEvents has no kernel events to offer here: every scan walks the tree.
func newEvents() eventSource { return nil }
