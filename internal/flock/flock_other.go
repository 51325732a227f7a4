//go:build !unix

package flock

import "os"

// tryLock takes no lock where flock(2) is missing: every caller gets it.
func tryLock(*os.File) error { return nil }
