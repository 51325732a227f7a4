package tools

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// localeCompare orders strings roughly as JavaScript's localeCompare does
// with the default (root) collation: whitespace, then punctuation and
// symbols, then digits, then letters; letters compare without regard to
// case first, and only then lower case before upper case. Unlike full ICU
// collation it compares rune by rune, so strings sharing a prefix stay
// together (a directory's rows stay under it).
func localeCompare(a, b string) int {
	if c := compareWeights(a, b, primaryWeight); c != 0 {
		return c
	}
	if c := compareWeights(a, b, caseWeight); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func compareWeights(a, b string, weight func(rune) int) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if wa, wb := weight(ra), weight(rb); wa != wb {
			if wa < wb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

// ICU's root order of ASCII punctuation and symbols.
const punctOrder = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"

func primaryWeight(r rune) int {
	const tier = 0x200000 // above every code point
	switch {
	case unicode.IsSpace(r):
		return int(r)
	case r < 0x80 && strings.ContainsRune(punctOrder, r):
		return tier + strings.IndexRune(punctOrder, r)
	case unicode.IsDigit(r):
		return 3*tier + int(r)
	case unicode.IsLetter(r):
		return 4*tier + int(unicode.ToLower(r))
	}
	return 2*tier + int(r) // other symbols: after the listed punctuation
}

func caseWeight(r rune) int {
	if unicode.IsUpper(r) {
		return 1
	}
	return 0
}
