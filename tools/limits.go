package tools

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// Output and input limits shared by every tool.
const (
	// MaxOutput is the most characters one tool result may carry.
	MaxOutput = 30000
	// BinarySniff is how many leading bytes the binary rule inspects.
	BinarySniff = 8192
)

// Cap cuts s to MaxOutput characters (runes), never inside a UTF-8
// sequence, and appends a line saying how many characters were removed.
func Cap(s string) string {
	if len(s) <= MaxOutput { // bytes >= runes: nothing to cut
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= MaxOutput {
		return s
	}
	cut := 0
	for i := range MaxOutput {
		_, size := utf8.DecodeRuneInString(s[cut:])
		cut += size
		_ = i
	}
	return s[:cut] + fmt.Sprintf("\n... [truncated %d chars]", n-MaxOutput)
}

// IsBinary applies the binary rule: a NUL byte in the first BinarySniff bytes.
func IsBinary(head []byte) bool {
	if len(head) > BinarySniff {
		head = head[:BinarySniff]
	}
	return bytes.IndexByte(head, 0) >= 0
}
