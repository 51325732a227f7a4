package gitshadow

import (
	"crypto/sha1"
	"sort"
)

// fixIndexChecksum recomputes an index file's trailing checksum.
func fixIndexChecksum(b []byte) []byte {
	body := b[:len(b)-20]
	sum := sha1.Sum(body)
	return append(append([]byte{}, body...), sum[:]...)
}

func sortStrings(s []string) { sort.Strings(s) }
