package detect

import (
	"regexp"
	"sort"
	"strings"
)

// This file holds what the JavaScript and Python rules share: judging an expression
// from its lexed code and literals, and remembering which variables were last assigned
// a string built from other values.

// sqlStartRe is text that starts like SQL (or like a clause appended to SQL).
var sqlStartRe = regexp.MustCompile(`(?i)^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|DROP|ALTER|TRUNCATE|REPLACE|MERGE|UPSERT|GRANT|REVOKE|CALL|EXEC|EXECUTE|SHOW|DESCRIBE|PRAGMA|SET|WHERE|AND|OR|FROM|JOIN|LEFT|INNER|ORDER|GROUP|LIMIT|OFFSET|VALUES|INTO|HAVING|UNION|RETURNING)\b`)

// callRe is an identifier followed by '(' in lexed code: a call, or a definition.
var callRe = regexp.MustCompile(`[A-Za-z_$][\w$]*\s*\(`)

// exprEnd returns where the expression starting at code[s] ends: at a top-level ';' or
// ',' or an unbalanced closing bracket, or at a line end not continued by an operator
// (or, in Python, a backslash or an open bracket), and at most maxExprLen bytes on.
func exprEnd(code string, s int, py bool) int {
	depth := 0
	limit := min(len(code), s+maxExprLen)
	for i := s; i < limit; i++ {
		switch c := code[i]; c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				return i
			}
			depth--
		case ';', ',':
			if depth == 0 {
				return i
			}
		case '\n':
			if depth > 0 {
				continue
			}
			p := prevNonSpace(code, i)
			if p >= s && (py && code[p] == '\\' || !py && strings.IndexByte("+=(,?:&|", code[p]) >= 0) {
				continue
			}
			if n := skipSpace(code, i); !py && n < len(code) && strings.IndexByte("+.?:&|", code[n]) >= 0 {
				continue
			}
			return i
		}
	}
	return limit
}

// maxExprLen bounds the expressions judged, so that half-written code (an unclosed
// bracket, a dangling operator) cannot make a file's analysis quadratic.
const maxExprLen = 1 << 16

// trimSpan narrows [s, e) to exclude surrounding white space.
func trimSpan(code string, s, e int) (int, int) {
	for s < e && isSpace(code[s]) {
		s++
	}
	for e > s && isSpace(code[e-1]) {
		e--
	}
	return s, e
}

// soleLiteral returns the literal that makes up all of [s, e), if one does.
func (lx *lexed) soleLiteral(s, e int) (strLit, bool) {
	s, e = trimSpan(lx.code, s, e)
	l, ok := lx.literalAt(s)
	return l, ok && l.end == e
}

// isTagged reports whether a JavaScript template literal is tagged (sql`…`), which hands
// its substitutions to the tag function separately instead of splicing them in.
func (lx *lexed) isTagged(l strLit) bool {
	p := prevNonSpace(lx.code, l.start)
	return l.quote == '`' && p >= 0 && isIdentByte(lx.code[p])
}

// builtString reports whether the expression in [s, e) builds a string from a value
// that is not a literal: an interpolated literal, a '+' chain with a non-literal
// operand, or (in Python) a literal formatted with '%' or .format(). It also returns
// the literals involved.
func (lx *lexed) builtString(s, e int, py bool) (bool, []strLit) {
	lits := lx.literalsIn(s, e)
	if len(lits) == 0 {
		return false, nil
	}
	code := lx.code
	for _, l := range lits {
		if l.interp && !lx.isTagged(l) {
			return true, lits
		}
		if py {
			j := skipSpace(code, l.end)
			if j < e && code[j] == '%' && (j+1 >= len(code) || code[j+1] != '=') {
				return true, lits
			}
			if j < e && strings.HasPrefix(code[j:e], ".format(") {
				return true, lits
			}
		}
	}
	// A top-level '+' with an operand that is not a literal.
	depth, plus := 0, false
	for i := s; i < e; i++ {
		switch code[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case '+':
			if depth == 0 && (i+1 >= len(code) || code[i+1] != '+' && code[i+1] != '=') && (i == 0 || code[i-1] != '+') {
				plus = true
			}
		}
	}
	if !plus {
		return false, lits
	}
	residue := []byte(code[s:e])
	for _, l := range lits {
		blank(residue, l.start-s, l.end-s)
	}
	for _, c := range residue {
		if isIdentByte(c) {
			return true, lits
		}
	}
	return false, lits
}

var (
	// printfVerbRe is one printf verb (Go) or %-format conversion (Python, with an
	// optional "(name)"); group 1 is the verb, "%" for a literal percent sign.
	printfVerbRe = regexp.MustCompile(`%(?:\([^)]*\)|\[\d+\])?[-+# 0]*(?:\d+|\*)?(?:\.(?:\d+|\*)?)?(?:\[\d+\])?([a-zA-Z%])`)
	// sqlValueEndRe is the end of SQL text after which a value goes.
	sqlValueEndRe = regexp.MustCompile(`(?i)(?:[=<>]|\b(?:i?like|limit|offset|between)|\b(?:in|any|values)\s*\()\s*$`)
	// formatFieldRe is a str.format replacement field.
	formatFieldRe = regexp.MustCompile(`\{[^{}]*\}`)
	// safeCallRe is a call whose result cannot carry quotes: a number conversion or a
	// quoting, escaping or placeholder-building function.
	safeCallRe = regexp.MustCompile(`(?i)^(?:[\w$.]+\.)?(?:int|float|bool|Number|parseInt|parseFloat|len|\w*(?:quote|escape|saniti[sz]e|placeholder)\w*)\s*\(`)
)

// numericVerbs are the printf verbs (Go and Python) that format numbers or booleans and
// so cannot carry quotes.
const numericVerbs = "diboOxXeEfFgGt"

// inValuePosition reports whether SQL text ending with before expects a value next: it
// is inside an open single-quoted string, or ends with a comparison, LIKE, IN (, ANY (,
// VALUES (, LIMIT, OFFSET or BETWEEN. That is where injection happens and where a
// placeholder belongs.
func inValuePosition(before string) bool {
	return strings.Count(before, "'")%2 == 1 || sqlValueEndRe.MatchString(before)
}

// builtSQL reports whether [s, e) builds SQL by splicing a non-literal value where a
// value goes (see inValuePosition): a template substitution or f-string field, a
// '%' or .format() conversion (Python), or a non-literal '+' operand. One of the
// literals must start like SQL.
func (lx *lexed) builtSQL(s, e int, py bool) bool {
	lits := lx.literalsIn(s, e)
	isSQL := false
	for _, l := range lits {
		if sqlStartRe.MatchString(l.body(lx.src)) {
			isSQL = true
		}
	}
	if !isSQL {
		return false
	}
	code := lx.code
	for _, l := range lits {
		body := l.body(lx.src)
		if l.interp && !lx.isTagged(l) {
			for k := 0; k < len(body); k++ {
				switch {
				case !py && strings.HasPrefix(body[k:], "${"),
					py && body[k] == '{' && !strings.HasPrefix(body[k:], "{{"):
					if inValuePosition(body[:k]) {
						return true
					}
				case py && strings.HasPrefix(body[k:], "{{"):
					k++
				}
			}
		}
		if !py {
			continue
		}
		j := skipSpace(code, l.end)
		switch {
		case j < e && code[j] == '%' && (j+1 >= len(code) || code[j+1] != '='):
			for _, m := range printfVerbRe.FindAllStringSubmatchIndex(body, -1) {
				if v := body[m[2]]; v != '%' && !strings.ContainsRune(numericVerbs, rune(v)) && inValuePosition(body[:m[0]]) {
					return true
				}
			}
		case j < e && strings.HasPrefix(code[j:e], ".format("):
			for _, m := range formatFieldRe.FindAllStringIndex(body, -1) {
				if inValuePosition(body[:m[0]]) {
					return true
				}
			}
		}
	}
	// '+' chains: a non-literal operand after SQL text that expects a value.
	var before strings.Builder
	for _, op := range splitTop(code, s, e, '+') {
		if l, ok := lx.soleLiteral(op[0], op[1]); ok {
			before.WriteString(l.body(lx.src))
			continue
		}
		if len(lx.literalsIn(op[0], op[1])) == 0 && before.Len() > 0 && !safeCallRe.MatchString(code[op[0]:op[1]]) && inValuePosition(before.String()) {
			return true
		}
	}
	return false
}

// splitTop splits [s, e) of code on the operator sep at bracket depth 0 ("++" and "+="
// are not split on) and returns the trimmed operand spans.
func splitTop(code string, s, e int, sep byte) [][2]int {
	var out [][2]int
	depth, start := 0, s
	for i := s; i < e; i++ {
		switch c := code[i]; {
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case c == sep && depth == 0 && (i+1 >= e || code[i+1] != sep && code[i+1] != '=') && (i == s || code[i-1] != sep):
			a, b := trimSpan(code, start, i)
			out = append(out, [2]int{a, b})
			start = i + 1
		}
	}
	a, b := trimSpan(code, start, e)
	return append(out, [2]int{a, b})
}

// assignEvent is one assignment to a variable, in source order.
type assignEvent struct {
	off      int
	name     string
	sql, str bool // the value is SQL / a string built from a non-literal value
}

// history lists a file's assignments so a use can be judged by the value its variable
// was last assigned before it.
type history []assignEvent

// last returns the last assignment to name before off.
func (h history) last(name string, off int) (assignEvent, bool) {
	i := sort.Search(len(h), func(i int) bool { return h[i].off >= off })
	for i--; i >= 0; i-- {
		if h[i].name == name {
			return h[i], true
		}
	}
	return assignEvent{}, false
}

// history records, for every match of re (whose first group is the variable name
// and which ends where the value starts), whether the value builds a string or SQL.
func (lx *lexed) history(re *regexp.Regexp, py bool) history {
	var h history
	last := 0 // end of the last value: a match before it is inside that value
	for _, m := range re.FindAllStringSubmatchIndex(lx.code, -1) {
		vs := m[1]
		if m[0] < last || vs < len(lx.code) && (lx.code[vs] == '=' || lx.code[vs] == '>') {
			continue // inside the previous value, or "==", "=>"
		}
		ve := exprEnd(lx.code, vs, py)
		last = ve
		str, _ := lx.builtString(vs, ve, py)
		h = append(h, assignEvent{off: m[0], name: lx.code[m[2]:m[3]], str: str, sql: lx.builtSQL(vs, ve, py)})
	}
	sort.Slice(h, func(i, j int) bool { return h[i].off < h[j].off })
	return h
}

// identAt returns the identifier making up all of [s, e), if one does.
func identAt(code string, s, e int) string {
	s, e = trimSpan(code, s, e)
	if s >= e {
		return ""
	}
	for i := s; i < e; i++ {
		if !isIdentByte(code[i]) {
			return ""
		}
	}
	return code[s:e]
}

// sqlCall is a call whose SQL argument is built from spliced values.
type sqlCall struct {
	arg    int    // offset of the SQL argument
	callee string // the method called, e.g. "query"
}

// splicedSQLCalls finds the calls matched by re (its first group the callee, the match
// ending at the opening parenthesis) whose first argument is SQL built from spliced values,
// or a variable h saw assigned such SQL before the call.
func splicedSQLCalls(code string, re *regexp.Regexp, lx *lexed, h history, py bool) []sqlCall {
	var out []sqlCall
	for _, m := range re.FindAllStringSubmatchIndex(code, -1) {
		open := m[1] - 1
		close := lx.matchClose(open)
		if close < 0 {
			continue
		}
		args := splitArgs(code, open, close)
		if len(args) == 0 {
			continue
		}
		s, e := args[0][0], args[0][1]
		if !lx.builtSQL(s, e, py) {
			if ev, ok := h.last(identAt(code, s, e), s); !ok || !ev.sql {
				continue
			}
		}
		out = append(out, sqlCall{arg: s, callee: code[m[2]:m[3]]})
	}
	return out
}
