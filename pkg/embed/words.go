package embed

// Words calls yield with each content word of text, as both embedders see it: tokens split
// into their lower-cased identifier parts ("parseHTTPRequest" → parse, http, request),
// without stop words. The trainer of the local@2 model reads its corpus through it, so a
// word means the same thing when the model is trained and when a text is embedded.
func Words(text string, yield func(word string)) {
	var parts []string
	tokens(text, func(tok string) {
		parts = splitIdentifier(tok, parts[:0])
		for _, w := range parts {
			if !stopWords[w] {
				yield(w)
			}
		}
	})
}
