package docker

import (
	"errors"
	"fmt"
)

// jsoncToJSON turns JSON with comments and trailing commas (the format of
// devcontainer.json) into standard JSON. Comments become spaces and a
// trailing comma becomes a space, so every byte keeps its offset and a
// decoder's error points at the right place of the original file. Strings
// are left as they are, whatever they hold.
func jsoncToJSON(src []byte) ([]byte, error) {
	out := make([]byte, len(src))
	copy(out, src)
	// lastComma is the offset of a comma not yet followed by a value: if
	// the next significant byte closes an object or array, it is dropped.
	lastComma := -1
	// prev is the last significant byte outside comments: a comma right
	// after an opening bracket, a colon or another comma is not a trailing
	// comma but an error, left for the decoder to report.
	var prev byte
	blank := func(from, to int) {
		for i := from; i < to; i++ {
			if out[i] != '\n' && out[i] != '\r' {
				out[i] = ' '
			}
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '"':
			end, err := stringEnd(src, i)
			if err != nil {
				return nil, err
			}
			lastComma = -1
			prev = '"'
			i = end
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			end := i + 2
			for end < len(src) && src[end] != '\n' {
				end++
			}
			blank(i, end)
			i = end - 1
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := -1
			for j := i + 2; j+1 < len(src); j++ {
				if src[j] == '*' && src[j+1] == '/' {
					end = j + 2
					break
				}
			}
			if end < 0 {
				line, col := offsetPosition(src, i)
				return nil, fmt.Errorf("line %d, column %d: comment not closed", line, col)
			}
			blank(i, end)
			i = end - 1
		case c == ',':
			lastComma = -1
			if prev != '[' && prev != '{' && prev != ',' && prev != ':' {
				lastComma = i
			}
			prev = c
		case c == '}' || c == ']':
			if lastComma >= 0 {
				out[lastComma] = ' '
			}
			lastComma = -1
			prev = c
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			lastComma = -1
			prev = c
		}
	}
	return out, nil
}

// stringEnd returns the offset of the quote closing the string that starts
// at src[start].
func stringEnd(src []byte, start int) (int, error) {
	for j := start + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '"':
			return j, nil
		case '\n':
			line, col := offsetPosition(src, start)
			return 0, fmt.Errorf("line %d, column %d: string not closed on its line", line, col)
		}
	}
	line, col := offsetPosition(src, start)
	return 0, fmt.Errorf("line %d, column %d: %w", line, col, errUnterminatedString)
}

var errUnterminatedString = errors.New("string not closed")

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
