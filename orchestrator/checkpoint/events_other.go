//go:build !linux

package checkpoint

import "os"

// newEvents has no change notification to offer here: every scan walks
// the whole workspace (with the stat index).
func newEvents(*os.Root) events { return nil }
