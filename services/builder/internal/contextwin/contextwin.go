// Package contextwin builds the context window of one file's generation: the files it
// depends on, in full while they fit a token budget, else as outlines (signatures without
// bodies), else left out.
package contextwin

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path"
	"regexp"
	"strings"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// headLines is how many lines the outline of a file of another type keeps.
const headLines = 20

// Dep is one file the generated file depends on.
type Dep struct {
	Path, Content string
}

// Build returns the context files for deps, in the order of deps, within budget tokens as
// count counts them (callers pass tokens.Count). Each dep is given in full when its content
// still fits what is left of the budget; otherwise its Outline, marked Truncated, when that
// fits; otherwise it is left out (and later, smaller deps may still fit). full and outlined
// list the paths given in full and as outlines. A budget of 0 or less gives nothing.
func Build(deps []Dep, budget int, count func(string) int) (files []*aiv1.ContextFile, full []string, outlined []string) {
	if budget <= 0 {
		return nil, nil, nil
	}
	if count == nil {
		count = func(s string) int { return (len(s) + 3) / 4 }
	}
	used := 0
	for _, d := range deps {
		if n := count(d.Content); used+n <= budget {
			used += n
			files = append(files, &aiv1.ContextFile{Path: d.Path, Content: d.Content})
			full = append(full, d.Path)
			continue
		}
		o := Outline(d.Path, d.Content)
		if o == "" {
			continue
		}
		if n := count(o); used+n <= budget {
			used += n
			files = append(files, &aiv1.ContextFile{Path: d.Path, Content: o, Truncated: true})
			outlined = append(outlined, d.Path)
		}
	}
	return files, full, outlined
}

// Outline returns the signatures of a file without their bodies: for Go the package clause,
// imports, type, const and var declarations and func signatures; for TypeScript and
// JavaScript the top-level declarations with function bodies cut; for Python the def and
// class lines with their decorators and module- and class-level assignments, bodies
// replaced by "..."; for other files the first 20 lines.
func Outline(p, content string) string {
	switch path.Ext(p) {
	case ".go":
		if o, ok := goOutline(p, content); ok {
			return o
		}
		return braceOutline(content, goDecl, goFull)
	case ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs":
		return braceOutline(content, jsDecl, jsFull)
	case ".py":
		return pyOutline(content)
	}
	return head(content, headLines)
}

// head returns the first n lines of s.
func head(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.TrimRight(strings.Join(lines, ""), "\n")
}

// elideValue: a var or const value whose source is longer than this, or that holds a
// function literal, is printed as "...".
const elideValue = 80

// goOutline prints a Go file without function bodies; it reports false when the file does
// not parse.
func goOutline(p, content string) (string, bool) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, p, content, parser.SkipObjectResolution)
	if err != nil {
		return "", false
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			d.Body = nil
			d.Doc = nil
		case *ast.GenDecl:
			if d.Tok != token.VAR && d.Tok != token.CONST {
				continue
			}
			for _, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if long(fset, v) || hasFuncLit(v) {
						vs.Values[i] = &ast.Ident{Name: "...", NamePos: v.Pos()}
					}
				}
			}
		}
	}
	f.Comments = nil
	var buf bytes.Buffer
	cfg := printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}
	if err := cfg.Fprint(&buf, fset, f); err != nil {
		return "", false
	}
	return strings.TrimRight(buf.String(), "\n"), true
}

func long(fset *token.FileSet, n ast.Node) bool {
	return fset.Position(n.End()).Offset-fset.Position(n.Pos()).Offset > elideValue
}

func hasFuncLit(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			found = true
		}
		return !found
	})
	return found
}

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
	goDecl = regexp.MustCompile(`^(package|import|func|type|const|var)\b`)
)

// jsExportList is an export list or re-export, kept whole.
var jsExportList = regexp.MustCompile(`^export\s*(type\s*)?(\{|\*)|^export\s*=`)

// jsFull chooses the kind of a matched TypeScript/JavaScript declaration line.
func jsFull(line string) declKind {
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

// goFull chooses the kind of a matched Go declaration line (line-based fallback).
func goFull(line string) declKind {
	if strings.HasPrefix(line, "func") {
		return cutBody
	}
	if strings.HasPrefix(line, "var") && strings.Contains(line, "func") {
		return cutBody
	}
	return keepFull
}

// lineInfo is the nesting at the start of a line and where braces open on it.
type lineInfo struct {
	text         string
	brace, paren int // depth at the start of the line
	endBrace     int // brace depth at the end of the line
	endParen     int
	// opens[i] is the byte offset of the first '{' on the line, outside any parentheses or
	// brackets, that raised the brace depth to brace+i.
	opens map[int]int
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
	for _, line := range strings.Split(src, "\n") {
		li := lineInfo{text: line, brace: brace, paren: paren, opens: map[int]int{}}
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
					brace++
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
				brace++
				if _, ok := li.opens[brace-li.brace]; !ok && brace > li.brace && paren == 0 {
					li.opens[brace-li.brace] = i
				}
			case c == '}':
				if n := len(tmpl); n > 0 && tmpl[n-1] == brace-1 {
					tmpl = tmpl[:n-1]
					brace--
					inTemplateText = true
					continue
				}
				if brace > 0 {
					brace--
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

// braceOutline is the line-based outline of a C-like source: top-level lines matching decl,
// kept whole, cut at their body or, for classes, with their members' bodies cut.
func braceOutline(src string, decl *regexp.Regexp, kind func(string) declKind) string {
	lines := scanLines(src)
	var out []string
	cut := func(li lineInfo, level int) string {
		off := li.opens[level]
		return strings.TrimRight(li.text[:off+1], " ") + " ... }"
	}
	for i := 0; i < len(lines); i++ {
		li := lines[i]
		text := strings.TrimSpace(li.text)
		if li.brace != 0 || li.paren != 0 || !decl.MatchString(text) {
			continue
		}
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
			for i+1 < len(lines) && lines[i].endBrace > 0 {
				i++
				l := lines[i]
				t := strings.TrimSpace(l.text)
				switch {
				case l.brace == 1 && t != "" && t != "}" && !strings.HasPrefix(t, "//") &&
					!strings.HasPrefix(t, "/*") && !strings.HasPrefix(t, "*"):
					if _, ok := l.opens[1]; ok {
						out = append(out, cut(l, 1))
					} else {
						out = append(out, l.text)
					}
				case l.brace == 1 && l.endBrace == 0:
					out = append(out, l.text)
				}
			}
		}
	}
	return strings.Join(out, "\n")
}

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

var (
	pyDef    = regexp.MustCompile(`^(async\s+)?def\s`)
	pyClass  = regexp.MustCompile(`^class\s`)
	pyAssign = regexp.MustCompile(`^[A-Za-z_]\w*(\s*,\s*[A-Za-z_]\w*)*\s*(:\s*[^=\s][^=]*(=[^=]|$)|=[^=])`)
	// pyCompound is a compound statement whose body the outline skips.
	pyCompound = regexp.MustCompile(`^(if|elif|else|for|while|try|except|finally|with|async\s+(for|with)|match|case)\b`)
)

// maxPyAssign bounds an assignment kept whole; a longer one keeps its target and "...".
const maxPyAssign = 120

// pyOutline keeps decorators, def and class headers (bodies as "...") and module- and
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
	header := func(l pyLine) {
		for _, d := range decorators {
			emit(d)
		}
		decorators = nil
		if l.colon >= 0 && strings.TrimSpace(strings.SplitN(l.text[l.colon+1:], "#", 2)[0]) != "" {
			// One-line body: "def f(): return 1".
			emit(l.indent + l.text[:l.colon+1] + " ...")
			return
		}
		for _, p := range physical(l) {
			emit(p)
		}
	}
	for k, l := range logical {
		pop(len(l.indent))
		top := stack[len(stack)-1]
		if top.kind == "func" || top.kind == "skip" {
			continue
		}
		switch {
		case strings.HasPrefix(l.text, "@"):
			decorators = append(decorators, physical(l)...)
			continue
		case pyDef.MatchString(l.text):
			header(l)
			oneLine := l.colon >= 0 && strings.TrimSpace(strings.SplitN(l.text[l.colon+1:], "#", 2)[0]) != ""
			if !oneLine {
				emit(bodyIndent(k) + "...")
			}
			stack = append(stack, &ctx{indent: len(l.indent), kind: "func"})
		case pyClass.MatchString(l.text):
			header(l)
			oneLine := l.colon >= 0 && strings.TrimSpace(strings.SplitN(l.text[l.colon+1:], "#", 2)[0]) != ""
			if !oneLine {
				stack = append(stack, &ctx{indent: len(l.indent), kind: "class", body: bodyIndent(k)})
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
		decorators = nil
	}
	pop(-1)
	return strings.Join(out, "\n")
}
