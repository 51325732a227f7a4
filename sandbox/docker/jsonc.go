package docker

import (
	"bytes"
	"errors"
	"strings"

	"github.com/tailscale/hujson"
)

// utf8BOM is the byte order mark some editors put at the start of a file.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// jsoncToJSON turns JSON with comments and trailing commas (the format of
// devcontainer.json) into standard JSON, with hujson. A UTF-8 byte order
// mark at the start is accepted. Comments, trailing commas and the mark
// become spaces, so every byte keeps its offset and a decoder's error
// points at the right place of the original file.
func jsoncToJSON(src []byte) ([]byte, error) {
	in := src
	if bytes.HasPrefix(src, utf8BOM) {
		in = append([]byte("   "), src[len(utf8BOM):]...)
	}
	v, err := hujson.Parse(in)
	if err != nil {
		// "hujson: line 3, column 2: invalid character ..." reads better
		// without the library's name.
		return nil, errors.New(strings.TrimPrefix(err.Error(), "hujson: "))
	}
	v.Standardize()
	return v.Pack(), nil
}

// offsetPosition is the 1-based line and byte column of an offset.
func offsetPosition(src []byte, off int) (line, col int) {
	line, col = 1, 1
	for i := 0; i < off && i < len(src); i++ {
		if src[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
