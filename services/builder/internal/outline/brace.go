package outline

import (
	"regexp"
	"strings"
)

// The line scan of C-like sources: TypeScript and JavaScript, and Go that does not parse.

// declKind is what a top-level declaration line keeps.
type declKind int

const (
	// cutBody keeps the declaration up to its body's opening brace, then "{ ... }".
	cutBody declKind = iota
	// keepFull keeps the whole declaration (types, interfaces, import blocks).
	keepFull
	// classBody keeps the class line and its members' lines, member bodies cut.
	classBody
)

var (
	jsDecl = regexp.MustCompile(`^(export\s+(default\s+)?)?(declare\s+)?(abstract\s+)?(async\s+)?` +
		`(function\b|class\b|interface\b|type\b|const\b|let\b|var\b|enum\b|namespace\b|module\b)` +
		`|^export\s*(\{|\*|default\b|=)`)
	// jsExportList is an export list or re-export, kept whole.
	jsExportList = regexp.MustCompile(`^export\s*(type\s*)?(\{|\*)|^export\s*=`)
)

// jsKind chooses what the scan keeps of a TypeScript/JavaScript declaration.
func jsKind(line string) declKind {
	if jsExportList.MatchString(line) {
		return keepFull
	}
	for _, w := range strings.Fields(strings.NewReplacer("{", " { ", "(", " ( ", "<", " < ").Replace(line)) {
		switch w {
		case "export", "default", "declare", "abstract", "async":
			continue
		case "interface", "type", "enum", "namespace", "module":
			return keepFull
		case "class":
			return classBody
		}
		return cutBody
	}
	return cutBody
}

// lineInfo is the nesting at the start of a line and where braces open on it.
type lineInfo struct {
	text         string
	brace, paren int // depth at the start of the line
	endBrace     int // brace depth at the end of the line
	endParen     int
	// inComment: the line starts inside a /* */ comment.
	inComment bool
	// opens[i] is the byte offset of the first '{' on the line, outside any parentheses or
	// brackets, that raised the brace depth to brace+i.
	opens map[int]int
}

// comment reports whether the line is (the start or the rest of) a comment: it starts
// inside one, or its text starts one.
func (li lineInfo) comment() bool {
	t := strings.TrimSpace(li.text)
	return li.inComment || strings.HasPrefix(t, "//") || strings.HasPrefix(t, "/*")
}

// scanLines tracks brace and paren/bracket depth through a C-like source, ignoring
// strings, template literals (with their ${} holes) and comments.
func scanLines(src string) []lineInfo {
	var out []lineInfo
	brace, paren := 0, 0
	var quote byte          // inside a string literal closed by quote
	block := false          // inside /* */
	var tmpl []int          // brace depths of the template literals whose ${ holes are open
	inTemplateText := false // inside the text of a template literal
	// parens holds the paren depth at each open brace: a brace that closes restores it, so
	// a parenthesis left open inside a body (malformed source) does not leak out of it.
	var parens []int
	open := func() { parens = append(parens, paren); brace++ }
	closeBrace := func() {
		if n := len(parens); n > 0 {
			paren, parens = parens[n-1], parens[:n-1]
		}
		brace--
	}
	for _, line := range strings.Split(src, "\n") {
		li := lineInfo{text: line, brace: brace, paren: paren, inComment: block, opens: map[int]int{}}
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case block:
				if c == '*' && i+1 < len(line) && line[i+1] == '/' {
					block = false
					i++
				}
			case inTemplateText:
				switch {
				case c == '\\':
					i++
				case c == '`':
					inTemplateText = false
				case c == '$' && i+1 < len(line) && line[i+1] == '{':
					inTemplateText = false
					tmpl = append(tmpl, brace)
					open()
					i++
				}
			case quote != 0:
				switch c {
				case '\\':
					i++
				case quote:
					quote = 0
				}
			case c == '/' && i+1 < len(line) && line[i+1] == '/':
				i = len(line)
			case c == '/' && i+1 < len(line) && line[i+1] == '*':
				block = true
				i++
			case c == '"' || c == '\'':
				quote = c
			case c == '`':
				inTemplateText = true
			case c == '{':
				open()
				if _, ok := li.opens[brace-li.brace]; !ok && brace > li.brace && paren == 0 {
					li.opens[brace-li.brace] = i
				}
			case c == '}':
				if n := len(tmpl); n > 0 && tmpl[n-1] == brace-1 {
					tmpl = tmpl[:n-1]
					closeBrace()
					inTemplateText = true
					continue
				}
				if brace > 0 {
					closeBrace()
				}
			case c == '(' || c == '[':
				paren++
			case c == ')' || c == ']':
				if paren > 0 {
					paren--
				}
			}
		}
		quote = 0 // string literals do not span lines
		li.endBrace, li.endParen = brace, paren
		out = append(out, li)
	}
	return out
}

// braceOutline is the line-based outline of a C-like source: top-level lines matching decl
// with the comment lines right above them, kept whole, cut at their body or, for classes,
// with their members (and the members' comments) and the members' bodies cut.
func braceOutline(src string, decl *regexp.Regexp, kind func(string) declKind) string {
	lines := scanLines(src)
	var out []string
	cut := func(li lineInfo, level int) string {
		off := li.opens[level]
		return strings.TrimRight(li.text[:off+1], " ") + " ... }"
	}
	// doc holds the comment lines seen since the last blank line or code line at the
	// current level: they go out with the declaration that follows them.
	var doc []string
	for i := 0; i < len(lines); i++ {
		li := lines[i]
		text := strings.TrimSpace(li.text)
		if li.brace != 0 || li.paren != 0 {
			doc = nil
			continue
		}
		switch {
		case li.comment():
			doc = append(doc, li.text)
			continue
		case !decl.MatchString(text):
			doc = nil
			continue
		}
		out = append(out, doc...)
		doc = nil
		switch kind(text) {
		case keepFull:
			out = append(out, li.text)
			for i+1 < len(lines) && (lines[i].endBrace > 0 || lines[i].endParen > 0 ||
				strings.HasPrefix(strings.TrimSpace(lines[i+1].text), "|") ||
				strings.HasPrefix(strings.TrimSpace(lines[i+1].text), "&")) {
				i++
				out = append(out, lines[i].text)
			}
		case cutBody:
			// The signature may span lines (a parameter list); cut at the first line that
			// opens the body. Lines inside braces within the parentheses are left out.
			for {
				l := lines[i]
				if l.brace == 0 {
					if _, ok := l.opens[1]; ok {
						out = append(out, cut(l, 1))
						for i+1 < len(lines) && lines[i].endBrace > 0 {
							i++
						}
						break
					}
					out = append(out, l.text)
				}
				if (l.endParen == 0 && l.endBrace == 0) || i+1 >= len(lines) {
					break
				}
				i++
			}
		case classBody:
			out = append(out, li.text)
			if li.endBrace == 0 {
				continue
			}
			var memberDoc []string
			for i+1 < len(lines) && lines[i].endBrace > 0 {
				i++
				l := lines[i]
				if l.brace != 1 {
					continue // inside a member's body
				}
				t := strings.TrimSpace(l.text)
				switch {
				case l.comment():
					memberDoc = append(memberDoc, l.text)
				case t == "":
					memberDoc = nil
				case t != "}":
					out = append(out, memberDoc...)
					memberDoc = nil
					if _, ok := l.opens[1]; ok {
						out = append(out, cut(l, 1))
					} else {
						out = append(out, l.text)
					}
				case l.endBrace == 0:
					out = append(out, l.text) // the class's closing brace
				}
			}
		}
	}
	return strings.Join(out, "\n")
}
