package outline

import (
	"regexp"
	"strings"
)

// The line scan of Python sources.

// pyLine is one logical line of Python source.
type pyLine struct {
	first, last int // physical lines
	indent      string
	text        string // the first physical line, trimmed
	colon       int    // offset in text of the ':' ending a header at bracket depth 0, or -1
}

// pyLogical splits Python source into logical lines (joining bracketed and backslash-
// continued lines and triple-quoted strings), skipping blank and comment-only lines.
func pyLogical(lines []string) []pyLine {
	var out []pyLine
	depth := 0
	var triple string // the open triple quote
	var cur *pyLine
	for n, line := range lines {
		if cur != nil && depth > 0 && triple == "" && pyRestart(line, cur.indent) {
			// A bracket left open (malformed source) does not swallow the definitions
			// that follow: the logical line ends before one at its indentation or less.
			cur.last = n - 1
			out = append(out, *cur)
			cur, depth = nil, 0
		}
		if cur == nil {
			t := strings.TrimSpace(line)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			cur = &pyLine{first: n, indent: line[:len(line)-len(strings.TrimLeft(line, " \t"))], text: t, colon: -1}
		}
		cont := false
		for i := 0; i < len(line); i++ {
			c := line[i]
			if triple != "" {
				if strings.HasPrefix(line[i:], triple) {
					i += 2
					triple = ""
				} else if c == '\\' {
					i++
				}
				continue
			}
			switch c {
			case '#':
				i = len(line)
			case '"', '\'':
				if strings.HasPrefix(line[i:], strings.Repeat(string(c), 3)) {
					triple = strings.Repeat(string(c), 3)
					i += 2
					continue
				}
				for i++; i < len(line) && line[i] != c; i++ {
					if line[i] == '\\' {
						i++
					}
				}
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				if depth > 0 {
					depth--
				}
			case ':':
				if depth == 0 && n == cur.first && cur.colon < 0 {
					cur.colon = i - (len(line) - len(strings.TrimLeft(line, " \t")))
				} else if depth == 0 && cur.colon < 0 {
					cur.colon = -2 // a header colon on a later physical line
				}
			case '\\':
				if i == len(strings.TrimRight(line, " \t"))-1 {
					cont = true
				}
			}
		}
		if depth > 0 || triple != "" || cont {
			continue
		}
		cur.last = n
		out = append(out, *cur)
		cur = nil
	}
	if cur != nil {
		cur.last = len(lines) - 1
		out = append(out, *cur)
	}
	return out
}

// pyRestart reports whether line starts a def, class or decorator at indent or less.
func pyRestart(line, indent string) bool {
	t := strings.TrimLeft(line, " \t")
	return len(line)-len(t) <= len(indent) && (pyDef.MatchString(t) || pyClass.MatchString(t) || strings.HasPrefix(t, "@"))
}

var (
	pyDef    = regexp.MustCompile(`^(async\s+)?def\s`)
	pyClass  = regexp.MustCompile(`^class\s`)
	pyAssign = regexp.MustCompile(`^[A-Za-z_]\w*(\s*,\s*[A-Za-z_]\w*)*\s*(:\s*[^=\s][^=]*(=[^=]|$)|=[^=])`)
	// pyCompound is a compound statement whose body the outline skips.
	pyCompound = regexp.MustCompile(`^(if|elif|else|for|while|try|except|finally|with|async\s+(for|with)|match|case)\b`)
)

// maxPyAssign bounds an assignment kept whole; a longer one keeps its target and "...".
const maxPyAssign = 120

// maxDocstring bounds the lines of a docstring kept whole; a longer one keeps its first
// lines and is closed with "...".
const maxDocstring = 12

// pyString is a logical line that is a string literal (a docstring when it comes first).
var pyString = regexp.MustCompile(`^[rRuUbB]{0,2}("""|'''|"|')`)

// pyOutline keeps decorators, def and class headers with the comment lines right above
// them and their docstrings (bodies as "..."), the module's docstring, and module- and
// class-level assignments.
func pyOutline(src string) string {
	lines := strings.Split(src, "\n")
	logical := pyLogical(lines)
	type ctx struct {
		indent  int
		kind    string // "module", "class", "func", "skip"
		emitted bool
		body    string // indentation of a class body
	}
	stack := []*ctx{{indent: -1, kind: "module"}}
	var out []string
	var decorators []string
	decoFirst := -1 // the first physical line of the pending decorators
	emit := func(s string) {
		for _, c := range stack {
			c.emitted = true
		}
		out = append(out, s)
	}
	physical := func(l pyLine) []string { return lines[l.first : l.last+1] }
	bodyIndent := func(k int) string {
		for _, next := range logical[k+1:] {
			if len(next.indent) > len(logical[k].indent) {
				return next.indent
			}
			break
		}
		return logical[k].indent + "    "
	}
	pop := func(indent int) {
		for len(stack) > 1 && indent <= stack[len(stack)-1].indent {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if c.kind == "class" && !c.emitted {
				out = append(out, c.body+"...")
			}
		}
	}
	// docstring emits the string literal that opens the body of logical line k, if any.
	docstring := func(k int) {
		if k+1 >= len(logical) {
			return
		}
		d := logical[k+1]
		if (k >= 0 && len(d.indent) <= len(logical[k].indent)) || !pyString.MatchString(d.text) {
			return
		}
		ph := physical(d)
		if len(ph) <= maxDocstring {
			for _, p := range ph {
				emit(p)
			}
			return
		}
		for _, p := range ph[:maxDocstring-1] {
			emit(p)
		}
		quote := pyString.FindStringSubmatch(d.text)[1]
		emit(d.indent + "..." + quote)
	}
	// leading emits the comment lines right above physical line first at its indentation
	// (no blank line between).
	leading := func(first int, indent string) {
		start := first
		for start > 0 && strings.HasPrefix(lines[start-1], indent+"#") {
			start--
		}
		for _, c := range lines[start:first] {
			emit(c)
		}
	}
	oneLine := func(l pyLine) bool {
		return l.colon >= 0 && strings.TrimSpace(strings.SplitN(l.text[l.colon+1:], "#", 2)[0]) != ""
	}
	header := func(l pyLine) {
		first := l.first
		if decoFirst >= 0 {
			first = decoFirst
		}
		leading(first, l.indent)
		for _, d := range decorators {
			emit(d)
		}
		decorators, decoFirst = nil, -1
		if oneLine(l) {
			// One-line body: "def f(): return 1".
			emit(l.indent + l.text[:l.colon+1] + " ...")
			return
		}
		for _, p := range physical(l) {
			emit(p)
		}
	}
	if len(logical) > 0 && logical[0].indent == "" && pyString.MatchString(logical[0].text) {
		docstring(-1) // the module's
	}
	for k, l := range logical {
		pop(len(l.indent))
		top := stack[len(stack)-1]
		if top.kind == "func" || top.kind == "skip" {
			continue
		}
		switch {
		case strings.HasPrefix(l.text, "@"):
			if decoFirst < 0 {
				decoFirst = l.first
			}
			decorators = append(decorators, physical(l)...)
			continue
		case pyDef.MatchString(l.text):
			header(l)
			if !oneLine(l) {
				docstring(k)
				emit(bodyIndent(k) + "...")
			}
			stack = append(stack, &ctx{indent: len(l.indent), kind: "func"})
		case pyClass.MatchString(l.text):
			header(l)
			if !oneLine(l) {
				stack = append(stack, &ctx{indent: len(l.indent), kind: "class", body: bodyIndent(k)})
				docstring(k)
			}
		case pyCompound.MatchString(l.text):
			stack = append(stack, &ctx{indent: len(l.indent), kind: "skip"})
		case pyAssign.MatchString(l.text):
			ph := physical(l)
			if len(ph) == 1 && len(l.text) <= maxPyAssign {
				emit(ph[0])
			} else if i := strings.IndexByte(l.text, '='); i > 0 {
				emit(l.indent + strings.TrimRight(l.text[:i], " ") + " = ...")
			} else {
				emit(l.indent + l.text)
			}
		}
		decorators, decoFirst = nil, -1
	}
	pop(-1)
	return strings.Join(out, "\n")
}
