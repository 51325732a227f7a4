//go:build !linux

package checkpoint

// newEvents has no change notification to offer here: every scan walks
// the whole workspace (with the stat index).
func newEvents(string) events { return nil }
