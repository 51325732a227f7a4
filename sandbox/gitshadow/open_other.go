//go:build !unix

package gitshadow

const (
	oNoFollow = 0
	oNonBlock = 0
)
