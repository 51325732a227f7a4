//go:build !unix

package helper

import "io"

// pollable returns r: the helper's commands need Linux.
func pollable(r io.Reader) (io.Reader, func()) { return r, func() {} }
