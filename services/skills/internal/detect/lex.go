package detect

import (
	"sort"
	"strings"
)

// strLit is one string literal found by a lexer.
type strLit struct {
	// start and end delimit the whole literal, prefix and quotes included.
	start, end int
	// bodyStart and bodyEnd delimit its content between the quotes.
	bodyStart, bodyEnd int
	// quote is the delimiter: '"', '\'' or '`'.
	quote byte
	// prefix is a Python string prefix in lower case ("f", "rb", ...), else "".
	prefix string
	// interp is set for a JavaScript template literal with a ${...} substitution or a
	// Python f-string (or t-string) with a {...} replacement field.
	interp bool
}

// body is the literal's raw content, escapes not interpreted.
func (s strLit) body(src string) string { return src[s.bodyStart:s.bodyEnd] }

// lexed is a source file split into code and string literals. code has the same length
// and line structure as the source, with comments and the contents of string, template
// and regular-expression literals replaced by spaces (delimiters and newlines are kept),
// so patterns run on code never match text inside a comment or a string.
type lexed struct {
	src  string
	code string
	strs []strLit
	// closeOf maps the offset of each balanced opening bracket in code to its closing
	// bracket; see matchClose.
	closeOf map[int]int
}

// literalAt returns the string literal that starts exactly at off.
func (lx *lexed) literalAt(off int) (strLit, bool) {
	i := sort.Search(len(lx.strs), func(i int) bool { return lx.strs[i].start >= off })
	if i < len(lx.strs) && lx.strs[i].start == off {
		return lx.strs[i], true
	}
	return strLit{}, false
}

// literalsIn returns the string literals lying inside [start, end).
func (lx *lexed) literalsIn(start, end int) []strLit {
	i := sort.Search(len(lx.strs), func(i int) bool { return lx.strs[i].start >= start })
	var out []strLit
	for ; i < len(lx.strs) && lx.strs[i].end <= end; i++ {
		out = append(out, lx.strs[i])
	}
	return out
}

// blank replaces src[from:to] with spaces in b, keeping newlines.
func blank(b []byte, from, to int) {
	for i := from; i < to && i < len(b); i++ {
		if b[i] != '\n' {
			b[i] = ' '
		}
	}
}

// scanQuoted returns the offset just past a quoted literal whose opening quote q is at
// src[i]. Backslash escapes are honoured; the literal ends at an unescaped q or, when
// unterminated, at the end of the line.
func scanQuoted(src string, i int, q byte) int {
	j := i + 1
	for j < len(src) {
		switch src[j] {
		case '\\':
			j += 2
			continue
		case q:
			return j + 1
		case '\n':
			return j
		}
		j++
	}
	return len(src)
}

// lexJS splits JavaScript or TypeScript source into code and literals. It understands
// line and block comments, quoted strings, template literals (with nested ${...}
// expressions) and, heuristically, regular-expression literals.
func lexJS(src string) *lexed {
	b := []byte(src)
	lx := &lexed{src: src}
	var prevSig byte    // last significant code byte
	var prevWord string // last identifier or keyword, when it was the last token
	n := len(src)
	for i := 0; i < n; {
		c := src[i]
		switch {
		case c == '/' && i+1 < n && src[i+1] == '/':
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = n - i
			}
			blank(b, i, i+end)
			i += end
		case c == '/' && i+1 < n && src[i+1] == '*':
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				end = n
			} else {
				end = i + 2 + end + 2
			}
			blank(b, i, end)
			i = end
		case c == '"' || c == '\'':
			end := scanQuoted(src, i, c)
			bodyEnd := end
			if end > i+1 && src[end-1] == c {
				bodyEnd = end - 1
			}
			lx.strs = append(lx.strs, strLit{start: i, end: end, bodyStart: i + 1, bodyEnd: bodyEnd, quote: c})
			blank(b, i+1, bodyEnd)
			i, prevSig, prevWord = end, c, ""
		case c == '`':
			end, interp := scanTemplate(src, i)
			bodyEnd := end
			if end > i+1 && src[end-1] == '`' {
				bodyEnd = end - 1
			}
			lx.strs = append(lx.strs, strLit{start: i, end: end, bodyStart: i + 1, bodyEnd: bodyEnd, quote: '`', interp: interp})
			blank(b, i+1, bodyEnd)
			i, prevSig, prevWord = end, c, ""
		case c == '/' && regexAllowed(prevSig, prevWord):
			if end, ok := scanRegex(src, i); ok {
				blank(b, i+1, end-1)
				i, prevSig, prevWord = end, '/', ""
			} else {
				i, prevSig, prevWord = i+1, '/', ""
			}
		case isIdentByte(c):
			j := i
			for j < n && isIdentByte(src[j]) {
				j++
			}
			prevWord, prevSig = src[i:j], src[j-1]
			i = j
		default:
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				prevSig, prevWord = c, ""
			}
			i++
		}
	}
	lx.code = string(b)
	return lx
}

// jsRegexKeywords are the keywords after which a '/' starts a regular expression.
var jsRegexKeywords = map[string]bool{
	"return": true, "typeof": true, "case": true, "do": true, "else": true, "in": true, "of": true,
	"new": true, "delete": true, "void": true, "throw": true, "instanceof": true, "yield": true, "await": true,
}

// regexAllowed reports whether a '/' after the given token starts a regular-expression
// literal rather than a division.
func regexAllowed(prevSig byte, prevWord string) bool {
	if prevWord != "" {
		return jsRegexKeywords[prevWord]
	}
	return prevSig == 0 || strings.IndexByte("(,=:[!&|?{};+-*%<>~^", prevSig) >= 0
}

// scanRegex returns the offset just past a regular-expression literal starting at src[i]
// and its flags, or false when none ends on this line.
func scanRegex(src string, i int) (int, bool) {
	inClass := false
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '[':
			inClass = true
		case ']':
			inClass = false
		case '\n':
			return 0, false
		case '/':
			if !inClass {
				j++
				for j < len(src) && isIdentByte(src[j]) {
					j++
				}
				return j, true
			}
		}
	}
	return 0, false
}

// scanTemplate returns the offset just past a template literal whose backquote is at
// src[i], and whether it has a ${...} substitution.
func scanTemplate(src string, i int) (int, bool) {
	interp := false
	j := i + 1
	for j < len(src) {
		switch {
		case src[j] == '\\':
			j += 2
		case src[j] == '`':
			return j + 1, interp
		case src[j] == '$' && j+1 < len(src) && src[j+1] == '{':
			interp = true
			j = skipJSExpr(src, j+2)
		default:
			j++
		}
	}
	return len(src), interp
}

// skipJSExpr returns the offset just past the '}' closing a ${...} substitution whose
// expression starts at src[j], skipping nested braces, strings and templates.
func skipJSExpr(src string, j int) int {
	depth := 1
	for j < len(src) {
		switch c := src[j]; c {
		case '{':
			depth++
			j++
		case '}':
			depth--
			j++
			if depth == 0 {
				return j
			}
		case '"', '\'':
			j = scanQuoted(src, j, c)
		case '`':
			j, _ = scanTemplate(src, j)
		default:
			j++
		}
	}
	return len(src)
}

// lexPy splits Python source into code and literals. It understands comments, string
// prefixes (r, b, u, f, t and their combinations) and triple-quoted strings.
func lexPy(src string) *lexed {
	b := []byte(src)
	lx := &lexed{src: src}
	n := len(src)
	for i := 0; i < n; {
		c := src[i]
		switch {
		case c == '#':
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = n - i
			}
			blank(b, i, i+end)
			i += end
		case c == '"' || c == '\'':
			i = lexPyString(src, b, lx, i, i, "")
		case isIdentByte(c):
			j := i
			for j < n && isIdentByte(src[j]) {
				j++
			}
			if j < n && (src[j] == '"' || src[j] == '\'') && isPyPrefix(src[i:j]) {
				i = lexPyString(src, b, lx, i, j, strings.ToLower(src[i:j]))
				continue
			}
			i = j
		default:
			i++
		}
	}
	lx.code = string(b)
	return lx
}

// isPyPrefix reports whether w is a valid Python string prefix.
func isPyPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "u", "b", "f", "t", "br", "rb", "fr", "rf", "tr", "rt":
		return true
	}
	return false
}

// lexPyString records the Python string whose prefix starts at start and whose quote is
// at q, blanks its content in b, and returns the offset just past it.
func lexPyString(src string, b []byte, lx *lexed, start, q int, prefix string) int {
	c := src[q]
	var bodyStart, bodyEnd, end int
	if strings.HasPrefix(src[q:], strings.Repeat(string(c), 3)) {
		bodyStart = q + 3
		delim := strings.Repeat(string(c), 3)
		j := bodyStart
		for j < len(src) && !strings.HasPrefix(src[j:], delim) {
			if src[j] == '\\' {
				j++
			}
			j++
		}
		bodyEnd = min(j, len(src))
		end = min(j+3, len(src))
	} else {
		bodyStart = q + 1
		end = scanQuoted(src, q, c)
		bodyEnd = end
		if end > q+1 && src[end-1] == c {
			bodyEnd = end - 1
		}
	}
	s := strLit{start: start, end: end, bodyStart: bodyStart, bodyEnd: bodyEnd, quote: c, prefix: prefix}
	if strings.ContainsAny(prefix, "ft") {
		s.interp = strings.Contains(strings.ReplaceAll(s.body(src), "{{", ""), "{")
	}
	lx.strs = append(lx.strs, s)
	blank(b, bodyStart, bodyEnd)
	return end
}

// scanLiterals finds quoted literals line by line in text of any language. A literal
// does not span lines, and an apostrophe between two letters (as in "don't") does not
// open one. It is used where no real lexer applies, and by the secrets detector, which
// also wants literals inside comments.
func scanLiterals(src string) []strLit {
	var out []strLit
	n := len(src)
	for i := 0; i < n; {
		c := src[i]
		if c != '"' && c != '\'' && c != '`' {
			i++
			continue
		}
		if c == '\'' && i > 0 && i+1 < n && isLetter(src[i-1]) && isLetter(src[i+1]) {
			i++
			continue
		}
		end := scanQuoted(src, i, c)
		if end <= i+1 || src[end-1] != c {
			i = end // unterminated on this line: not a literal
			continue
		}
		out = append(out, strLit{start: i, end: end, bodyStart: i + 1, bodyEnd: end - 1, quote: c})
		i = end
	}
	return out
}

// isLetter reports whether c is an ASCII letter.
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// matchClose returns the offset of the bracket closing the one at code[open], counting
// (), [] and {} together, or -1. Brackets inside strings and comments are already
// blanked in code. The pairs are computed once per file, so that files with many
// unbalanced brackets (half-written code) are not scanned to the end over and over.
func (lx *lexed) matchClose(open int) int {
	if lx.closeOf == nil {
		lx.closeOf = make(map[int]int)
		var stack []int
		for i := 0; i < len(lx.code); i++ {
			switch lx.code[i] {
			case '(', '[', '{':
				stack = append(stack, i)
			case ')', ']', '}':
				if n := len(stack); n > 0 {
					lx.closeOf[stack[n-1]] = i
					stack = stack[:n-1]
				}
			}
		}
	}
	if c, ok := lx.closeOf[open]; ok {
		return c
	}
	return -1
}

// splitArgs splits the arguments between the parentheses at code[open] and code[close]
// on top-level commas and returns each argument's span with surrounding space trimmed.
// Empty arguments (a trailing comma) are dropped.
func splitArgs(code string, open, close int) [][2]int {
	var out [][2]int
	add := func(s, e int) {
		for s < e && isSpace(code[s]) {
			s++
		}
		for e > s && isSpace(code[e-1]) {
			e--
		}
		if s < e {
			out = append(out, [2]int{s, e})
		}
	}
	depth, start := 0, open+1
	for i := open + 1; i < close; i++ {
		switch code[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				add(start, i)
				start = i + 1
			}
		}
	}
	add(start, close)
	return out
}

// isSpace reports whether c is ASCII white space.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// skipSpace returns the first offset at or after i that is not white space.
func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// prevNonSpace returns the offset of the last non-space byte before i, or -1.
func prevNonSpace(s string, i int) int {
	i--
	for i >= 0 && isSpace(s[i]) {
		i--
	}
	return i
}

// wordBefore returns the identifier ending just before offset i (after skipping space).
func wordBefore(s string, i int) string {
	e := prevNonSpace(s, i) + 1
	b := e
	for b > 0 && isIdentByte(s[b-1]) {
		b--
	}
	return s[b:e]
}
