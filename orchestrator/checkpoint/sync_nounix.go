//go:build !unix

package checkpoint

import "os"

// syncRoot does nothing where there is no sync call to make.
func syncRoot(*os.Root) error { return nil }
