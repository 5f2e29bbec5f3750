package embed

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// isConnector reports the characters that join an identifier's parts in code and paths:
// max_retry_count, well-known, pkg.Func, internal/embed.
func isConnector(r rune) bool {
	return r == '_' || r == '-' || r == '.' || r == '/'
}

func isTokenRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || isConnector(r)
}

// tokens calls yield with each token of text: a maximal run of letters, digits, combining
// marks and connectors, without connectors at either end (so a sentence's full stop or a
// leading "./" is not part of the word).
func tokens(text string, yield func(tok string)) {
	start := -1
	emit := func(end int) {
		if tok := strings.TrimFunc(text[start:end], isConnector); tok != "" {
			yield(tok)
		}
		start = -1
	}
	for i, r := range text {
		switch {
		case isTokenRune(r):
			if start < 0 {
				start = i
			}
		case start >= 0:
			emit(i)
		}
	}
	if start >= 0 {
		emit(len(text))
	}
}

// runeClass is what splitting an identifier looks at.
type runeClass int

const (
	classOther runeClass = iota // connectors
	classLower                  // lower case, and letters without case (Han, Arabic…)
	classUpper
	classDigit
	classMark // a combining mark stays with the rune before it
)

func classify(r rune) runeClass {
	switch {
	case isConnector(r):
		return classOther
	case unicode.IsUpper(r) || unicode.IsTitle(r):
		return classUpper
	case unicode.IsDigit(r):
		return classDigit
	case unicode.IsMark(r):
		return classMark
	default:
		return classLower
	}
}

// splitIdentifier splits a token into its lower-cased parts at connectors, at case changes
// (camelCase, PascalCase, an acronym before a word: "parseHTTPRequest" → parse, http,
// request) and between letters and digits ("utf8Decode" → utf, 8, decode). It appends to
// parts and returns it, so the caller can reuse the slice.
func splitIdentifier(tok string, parts []string) []string {
	start := -1
	prev := classOther
	flush := func(end int) {
		if start >= 0 && end > start {
			parts = append(parts, strings.ToLower(tok[start:end]))
		}
		start = -1
	}
	for i, r := range tok {
		c := classify(r)
		switch {
		case c == classOther:
			flush(i)
		case start < 0:
			start = i
		case c == classMark:
			continue // neither a boundary nor a class change
		case (prev == classDigit) != (c == classDigit):
			flush(i)
			start = i
		case prev == classLower && c == classUpper:
			flush(i)
			start = i
		case prev == classUpper && c == classUpper:
			// The last capital of an acronym starts the next word: HTTPRequest.
			if next, _ := utf8.DecodeRuneInString(tok[i+utf8.RuneLen(r):]); classify(next) == classLower && next != utf8.RuneError {
				flush(i)
				start = i
			}
		}
		prev = c
	}
	flush(len(tok))
	return parts
}

// stopWords are English function words. They carry little meaning, so they weigh less and
// add no n-grams or bigrams; without this, any two sentences look alike through "the".
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "to": true, "in": true, "on": true,
	"at": true, "by": true, "for": true, "with": true, "from": true, "and": true, "or": true,
	"is": true, "are": true, "was": true, "were": true, "be": true, "been": true, "it": true,
	"its": true, "this": true, "that": true, "as": true, "into": true,
}
