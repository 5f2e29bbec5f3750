package relevance

// The term splitter shared by documents, paths, symbols and queries: one function, so a
// query word and the same word in a file always become the same term.

// isWordByte reports whether c can be part of a word: ASCII letters and digits. Everything
// else, '_' and '-' included, separates words, which splits snake_case and kebab-case.
// Non-ASCII text is dropped: identifiers are ASCII in nearly all code, and a budget
// ranking gains little from prose in other scripts.
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// splitter turns text into terms. It reuses one buffer, so a splitter is not safe for
// concurrent use; the term passed to the callback is valid only during the call.
type splitter struct {
	buf []byte
}

// each calls fn with every term of s, in order: words split at camelCase boundaries,
// lowercased, stop words and terms shorter than two letters dropped, then stemmed. orig is
// the part of s the term came from.
func (sp *splitter) each(s string, fn func(term []byte, orig string)) {
	n := len(s)
	for i := 0; i < n; {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < n && isWordByte(s[j]) {
			j++
		}
		sp.word(s[i:j], fn)
		i = j
	}
}

// word splits one word at camelCase boundaries: "parseHTTPRequest" → parse, HTTP, Request;
// "base64Encode" → base64, Encode. A digit stays with the letters before it.
func (sp *splitter) word(w string, fn func(term []byte, orig string)) {
	start := 0
	for k := 1; k < len(w); k++ {
		c := w[k]
		if !isUpper(c) {
			continue
		}
		prev := w[k-1]
		// "HTTPServer" splits before the S of Server, but "userIDs" keeps "IDs" whole.
		acronymEnd := isUpper(prev) && k+1 < len(w) && isLower(w[k+1]) && !(k+2 == len(w) && w[k+1] == 's')
		if isLower(prev) || isDigit(prev) || acronymEnd {
			sp.part(w[start:k], fn)
			start = k
		}
	}
	sp.part(w[start:], fn)
}

func (sp *splitter) part(p string, fn func(term []byte, orig string)) {
	if len(p) < minTermLen || isDigit(p[0]) || len(p) > maxTermLen {
		return
	}
	b := sp.buf[:0]
	for k := 0; k < len(p); k++ {
		c := p[k]
		if isUpper(c) {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	sp.buf = b
	if stopWords[string(b)] {
		return
	}
	b = stem(b)
	if len(b) < minTermLen {
		return
	}
	fn(b, p)
}

const (
	// minTermLen drops single letters (loop variables, articles); two-letter terms such
	// as "io", "os", "db", "ui" carry meaning in code and stay.
	minTermLen = 2
	// maxTermLen drops blobs (base64, hashes) that are no one's vocabulary.
	maxTermLen = 40
)

// terms returns the distinct terms of s in order of first appearance.
func terms(s string) []string {
	var sp splitter
	var out []string
	seen := map[string]bool{}
	sp.each(s, func(t []byte, _ string) {
		if !seen[string(t)] {
			seen[string(t)] = true
			out = append(out, string(t))
		}
	})
	return out
}

// stem strips the commonest English inflections in place: plural s / es / ies, -ing, -ed,
// and a final e, so "parse", "parses", "parsed", "parsing" all become "pars". It is
// deliberately light (no Porter suffix tables): the same function runs on queries and
// documents, so consistency matters more than linguistic truth. A stem never gets
// shorter than three letters.
func stem(b []byte) []byte {
	n := len(b)
	switch {
	case n > 4 && hasSuffix(b, "ies"):
		b = append(b[:n-3], 'y')
	case n > 3 && b[n-1] == 's' && b[n-2] != 's' && b[n-2] != 'u' && b[n-2] != 'i':
		b = b[:n-1]
	}
	n = len(b)
	switch {
	case n-3 >= 3 && hasSuffix(b, "ing"):
		b = undouble(b[:n-3])
	case n-2 >= 3 && hasSuffix(b, "ed"):
		b = undouble(b[:n-2])
	}
	if n = len(b); n-1 >= 3 && b[n-1] == 'e' {
		b = b[:n-1]
	}
	return b
}

// undouble turns "runn" (from running) into "run", but keeps ll, ss and zz (calling,
// passing, buzzing) which are doubled in the stem itself.
func undouble(b []byte) []byte {
	n := len(b)
	if n >= 4 && b[n-1] == b[n-2] {
		switch b[n-1] {
		case 'l', 's', 'z', 'a', 'e', 'i', 'o', 'u':
			return b
		}
		return b[:n-1]
	}
	return b
}

func hasSuffix(b []byte, suf string) bool {
	return len(b) >= len(suf) && string(b[len(b)-len(suf):]) == suf
}

// stopWords are English function words and task filler. Code keywords are not listed:
// their low IDF already makes them weigh little.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range []string{
		"a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and",
		"any", "are", "as", "at", "be", "because", "been", "before", "being", "below",
		"between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "done",
		"down", "during", "each", "eg", "either", "etc", "few", "for", "from", "further",
		"had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him",
		"himself", "his", "how", "ie", "if", "in", "into", "is", "it", "its", "itself",
		"just", "me", "might", "more", "most", "must", "my", "myself", "no", "nor", "not",
		"now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves",
		"out", "over", "own", "please", "same", "shall", "she", "should", "so", "some",
		"such", "than", "that", "the", "their", "theirs", "them", "themselves", "then",
		"there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
		"up", "upon", "us", "very", "via", "was", "we", "were", "what", "when", "where",
		"whether", "which", "while", "who", "whom", "whose", "why", "will", "with", "within",
		"without", "would", "yet", "you", "your", "yours", "yourself", "yourselves",
	} {
		m[w] = true
	}
	return m
}()
