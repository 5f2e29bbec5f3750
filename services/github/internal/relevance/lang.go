package relevance

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// lang is the language of a file, decided by its extension; it selects how definitions,
// imports and outlines are found.
type lang uint8

const (
	langOther lang = iota
	langGo
	langJS // JavaScript and TypeScript
	langPython
	langRust
	langJVM // Java, Kotlin, C#
)

func langOf(p string) lang {
	switch path.Ext(p) {
	case ".go":
		return langGo
	case ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs":
		return langJS
	case ".py", ".pyi":
		return langPython
	case ".rs":
		return langRust
	case ".java", ".kt", ".kts", ".cs":
		return langJVM
	}
	return langOther
}

// defPattern finds definition lines of one kind. A line is tried only when it contains one
// of the trigger strings (a cheap filter before the regular expression). Group 1, when the
// expression has one, is the defined name; a pattern without a group marks lines that
// belong in an outline but define no single name (export lists, impl blocks).
type defPattern struct {
	triggers []string
	re       *regexp.Regexp
}

func pat(triggers string, expr string) defPattern {
	return defPattern{triggers: strings.Split(triggers, "|"), re: regexp.MustCompile(expr)}
}

// notNames are words the loose method patterns (Java, C#, class methods in TS/JS) can
// capture from statements that look like declarations.
var notNames = map[string]bool{
	"if": true, "for": true, "while": true, "switch": true, "catch": true, "return": true,
	"function": true, "new": true, "else": true, "do": true, "try": true, "with": true,
	"super": true, "this": true, "foreach": true, "using": true,
	"lock": true, "throw": true, "typeof": true, "await": true, "yield": true, "delete": true,
}

const jsIdent = `([A-Za-z_$][\w$]*)`

var defPatterns = map[lang][]defPattern{
	langJS: {
		pat("function", `^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:async\s+)?function\s*\*?\s*`+jsIdent),
		pat("class", `^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?class\s+`+jsIdent),
		pat("interface", `^\s*(?:export\s+)?(?:declare\s+)?interface\s+`+jsIdent),
		pat("type", `^\s*(?:export\s+)?(?:declare\s+)?type\s+`+jsIdent+`\s*(?:<[^=]*>)?\s*=`),
		pat("enum", `^\s*(?:export\s+)?(?:declare\s+)?(?:const\s+)?enum\s+`+jsIdent),
		pat("const|let|var", `^(?:export\s+)?(?:declare\s+)?(?:const|let|var)\s+`+jsIdent+`\s*(?::[^=]+)?=`),
		// Methods of classes: an indented "name(...) {" line.
		pat("(", `^(?:\t| {2}| {4})(?:(?:public|private|protected|static|async|readonly|get|set|override|abstract)\s+)*\*?`+jsIdent+`\s*(?:<[^>(]*>)?\s*\([^;]*\)\s*(?::\s*[^={;]+)?\{\s*$`),
		pat("export", `^export\s+(?:\{|\*|default\s)`),
	},
	langPython: {
		pat("def", `^\s*(?:async\s+)?def\s+(\w+)`),
		pat("class", `^\s*class\s+(\w+)`),
	},
	langRust: {
		pat("fn", `^\s*(?:pub(?:\([^)]*\))?\s+)?(?:default\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+"[^"]*"\s+)?fn\s+(\w+)`),
		pat("struct|enum|trait|union|type|mod", `^\s*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(?:struct|enum|trait|union|type|mod)\s+(\w+)`),
		pat("const|static", `^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const|static)\s+(?:mut\s+)?(\w+)\s*:`),
		pat("macro_rules", `^\s*macro_rules!\s*(\w+)`),
		pat("impl", `^\s*(?:unsafe\s+)?impl\b`),
	},
	langJVM: {
		pat("class|interface|enum|record|struct|object", `^\s*(?:(?:public|private|protected|internal|static|final|abstract|sealed|open|data|inner|partial|readonly|ref|override|virtual|annotation|companion|value|enum|file)\s+)*(?:class|interface|enum|record|struct|object)\s+(\w+)`),
		pat("fun", `^\s*(?:(?:public|private|protected|internal|override|open|abstract|suspend|inline|operator|infix|tailrec|external|actual|expect)\s+)*fun\s+(?:<[^>]*>\s*)?(?:[\w.]+\.)?(\w+)\s*\(`),
		pat("(", `^\s*(?:(?:public|private|protected|internal|static|final|abstract|synchronized|native|override|virtual|async|sealed|new|extern|unsafe|default|strictfp)\s+)+(?:<[^>]*>\s*)?[\w.<>\[\],?]+(?:\s*<[^>]*>)?\s+(\w+)\s*\(`),
	},
	// Go files are parsed; these patterns serve only when the parser gives up.
	langGo: {
		pat("func", `^func\s+(?:\([^)]*\)\s*)?(\w+)`),
		pat("type", `^type\s+(\w+)`),
		pat("const|var", `^(?:const|var)\s+(\w+)`),
	},
}

// eachDefLine calls fn with every definition line of content (1-based line number, the
// line without its newline, and the defined name or "").
func eachDefLine(l lang, content string, fn func(lineNo int, line, name string)) {
	pats := defPatterns[l]
	if len(pats) == 0 {
		return
	}
	lineNo := 0
	for rest := content; rest != ""; {
		var line string
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			line, rest = rest, ""
		}
		lineNo++
		if len(line) > 400 { // minified code, data
			continue
		}
		for _, p := range pats {
			if !containsAny(line, p.triggers) {
				continue
			}
			m := p.re.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			name := ""
			if len(m) > 1 {
				name = m[1]
				if notNames[name] {
					continue
				}
			}
			fn(lineNo, strings.TrimRight(line, " \t\r"), name)
			break
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// goSymbol is a definition of a Go file: display name ("Server.Serve" for a method) and the
// name whose terms are matched ("Serve").
type goSymbol struct {
	display, name string
}

// goDecls parses a Go file and returns its top-level definitions, its import paths and
// whether parsing produced a file at all (a file with syntax errors still yields what
// precedes the error).
func goDecls(filename, content string) (syms []goSymbol, imports []string, ok bool) {
	fset := token.NewFileSet()
	f, _ := parser.ParseFile(fset, filename, content, parser.SkipObjectResolution)
	if f == nil {
		return nil, nil, false
	}
	for _, imp := range f.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err == nil {
			imports = append(imports, p)
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			display := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				if r := recvTypeName(d.Recv.List[0].Type); r != "" {
					display = r + "." + display
				}
			}
			syms = append(syms, goSymbol{display: display, name: d.Name.Name})
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					syms = append(syms, goSymbol{display: s.Name.Name, name: s.Name.Name})
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.Name != "_" {
							syms = append(syms, goSymbol{display: n.Name, name: n.Name})
						}
					}
				}
			}
		}
	}
	return syms, imports, true
}

func recvTypeName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr: // generic receiver T[K]
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// generatedGo matches the standard marker of generated Go files
// (https://go.dev/s/generatedcode).
var generatedGo = regexp.MustCompile(`^// Code generated .* DO NOT EDIT\.$`)

// isGenerated reports whether content carries a generated-code marker: for Go the standard
// line before the package clause, for other files "DO NOT EDIT" or "@generated" in the
// first 30 lines.
func isGenerated(l lang, content string) bool {
	for n, rest := 0, content; rest != "" && (l == langGo || n < 30); n++ {
		var line string
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			line, rest = rest, ""
		}
		line = strings.TrimRight(line, "\r")
		if l == langGo {
			if strings.HasPrefix(line, "package ") {
				return false
			}
			if generatedGo.MatchString(line) {
				return true
			}
			continue
		}
		if strings.Contains(line, "DO NOT EDIT") || strings.Contains(line, "@generated") {
			return true
		}
	}
	return false
}

// isTestPath reports whether p is a test file by the conventions of its language.
func isTestPath(p string) bool {
	base := path.Base(p)
	switch {
	case strings.HasSuffix(base, "_test.go"),
		strings.Contains(base, ".test."), strings.Contains(base, ".spec."),
		strings.HasPrefix(base, "test_") && strings.HasSuffix(base, ".py"),
		strings.HasSuffix(base, "_test.py"), base == "conftest.py",
		strings.HasSuffix(base, "Test.java"), strings.HasSuffix(base, "Tests.java"),
		strings.HasSuffix(base, "Test.kt"), strings.HasSuffix(base, "Tests.cs"):
		return true
	}
	for _, dir := range strings.Split(path.Dir(p), "/") {
		switch dir {
		case "test", "tests", "__tests__":
			return true
		}
	}
	return false
}

// isVendoredPath reports whether p lies in a directory of third-party or fixture code.
func isVendoredPath(p string) bool {
	for _, dir := range strings.Split(path.Dir(p), "/") {
		switch dir {
		case "vendor", "node_modules", "testdata":
			return true
		}
	}
	return false
}

// importRef is an import as written in a file, before resolution to files.
type importRef struct {
	spec  string   // Go import path, JS/TS specifier, Python dotted module
	level int      // Python: leading dots of a relative import (0 = absolute)
	names []string // Python "from m import a, b": a and b may be submodules
}

// jsImport finds the relative specifiers of import/export ... from, bare import, require()
// and import().
var jsImport = regexp.MustCompile(`(?:\b(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?|\b(?:require|import)\s*\(\s*)['"](\.{1,2}/[^'"\n]*|\.{1,2})['"]`)

func jsImports(content string) []importRef {
	if !strings.Contains(content, "./") {
		return nil
	}
	var out []importRef
	for _, m := range jsImport.FindAllStringSubmatch(content, -1) {
		out = append(out, importRef{spec: m[1]})
	}
	return out
}

// pyImports reads "import a.b, c" and "from .x import y, z" statements, line by line
// (parenthesised name lists spanning lines contribute their first line's names).
func pyImports(content string) []importRef {
	var out []importRef
	for rest := content; rest != ""; {
		var line string
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			line, rest = rest, ""
		}
		line = strings.TrimSpace(line)
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case strings.HasPrefix(line, "import "):
			for _, part := range strings.Split(line[len("import "):], ",") {
				if mod := firstField(part); mod != "" {
					out = append(out, importRef{spec: mod})
				}
			}
		case strings.HasPrefix(line, "from "):
			fields := strings.Fields(line)
			if len(fields) < 3 || fields[2] != "import" {
				continue
			}
			mod := fields[1]
			level := len(mod) - len(strings.TrimLeft(mod, "."))
			ref := importRef{spec: mod[level:], level: level}
			names := strings.Join(fields[3:], " ")
			names = strings.Trim(names, "()\\ ")
			for _, n := range strings.Split(names, ",") {
				if n = firstField(strings.Trim(n, "() ")); n != "" && n != "*" {
					ref.names = append(ref.names, n)
				}
			}
			out = append(out, ref)
		}
	}
	return out
}

func firstField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// goModulePath returns the module path declared by a go.mod file's content.
func goModulePath(content string) string {
	for rest := content; rest != ""; {
		var line string
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			line, rest = rest, ""
		}
		line = strings.TrimSpace(line)
		if m, ok := strings.CutPrefix(line, "module"); ok && (m == "" || m[0] == ' ' || m[0] == '\t') {
			m = strings.TrimSpace(m)
			if i := strings.Index(m, "//"); i >= 0 {
				m = strings.TrimSpace(m[:i])
			}
			if u, err := strconv.Unquote(m); err == nil {
				m = u
			}
			return m
		}
	}
	return ""
}
