// Package wordfreq counts the words of a text.
package wordfreq

import (
	"strings"
	"unicode"
)

// Words splits text into lower-cased words: runs of letters and digits.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// Count is how often each word occurs in text.
func Count(text string) map[string]int {
	counts := map[string]int{}
	for _, w := range Words(text) {
		counts[w]++
	}
	return counts
}
