package detect

import (
	"regexp"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// jsCPModule is the child_process module name, as a quoted import path.
const jsCPModule = `['"](?:node:)?child_process['"]`

// Patterns run on lexed JavaScript code (comments and string contents blanked).
var (
	jsNewFunctionRe = regexp.MustCompile(`\bnew\s+Function\s*\(`)
	jsInnerHTMLRe   = regexp.MustCompile(`\.\s*(innerHTML|outerHTML)\s*\+?=`)
	jsInsertHTMLRe  = regexp.MustCompile(`\.\s*insertAdjacentHTML\s*\(`)
	jsDangerousRe   = regexp.MustCompile(`\bdangerouslySetInnerHTML\b`)
	jsHTMLValueRe   = regexp.MustCompile(`\b__html\s*:\s*`)
	jsRejectRe      = regexp.MustCompile(`\brejectUnauthorized\s*[:=]\s*false\b`)
	jsNodeTLSRe     = regexp.MustCompile(`\bNODE_TLS_REJECT_UNAUTHORIZED\s*=\s*`)
	jsSQLCallRe     = regexp.MustCompile(`\.\s*\$?(query|execute|raw|queryRawUnsafe|executeRawUnsafe)\s*\(`)
	// jsAssignRe is a declaration or an assignment at the start of a statement; the
	// match ends where the value starts.
	jsAssignRe = regexp.MustCompile(`(?m)(?:\b(?:const|let|var)\s+|^[ \t]*)([A-Za-z_$][\w$]*)\s*(?::\s*[\w.<>\[\]|]+\s*)?=`)

	// child_process imports, matched on the source: a namespace or default import, a
	// destructured or named import, a direct require, and util.promisify wrappers.
	jsCPNamespace  = regexp.MustCompile(`(?:import\s+\*\s+as\s+|import\s+)([A-Za-z_$][\w$]*)\s+from\s*` + jsCPModule + `|(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*require\(\s*` + jsCPModule + `\s*\)`)
	jsCPNamed      = regexp.MustCompile(`import\s*\{([^}]*)\}\s*from\s*` + jsCPModule + `|(?:const|let|var)\s*\{([^}]*)\}\s*=\s*require\(\s*` + jsCPModule + `\s*\)`)
	jsCPDirect     = regexp.MustCompile(`require\(\s*` + jsCPModule + `\s*\)\s*\.\s*(exec|execSync)\s*\(`)
	jsPromisifyRe  = regexp.MustCompile(`(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:util\s*\.\s*)?promisify\(\s*([A-Za-z_$][\w$]*(?:\s*\.\s*[A-Za-z_$][\w$]*)?)\s*\)`)
	jsImportItemRe = regexp.MustCompile(`^\s*([A-Za-z_$][\w$]*)\s*(?:(?:as|:)\s*([A-Za-z_$][\w$]*))?\s*$`)
)

// jsGlobalObjects qualify a call that still reaches the global eval.
var jsGlobalObjects = map[string]bool{"window": true, "globalThis": true, "global": true, "self": true}

// jsShellFns are the child_process functions that run their first argument through a
// shell.
var jsShellFns = map[string]bool{"exec": true, "execSync": true}

// dangerousJS finds dangerous calls in JavaScript and TypeScript by lexical scanning:
// comments, strings, templates and regular expressions are blanked first, so text
// inside them never matches.
//
// Decisions: a method named eval (model.eval(), page.$eval()) is not the global eval and
// is not flagged, but window.eval() and globalThis.eval() are; eval and exec of a single
// constant string cannot be injected into and are not flagged; assigning a constant
// string to innerHTML (el.innerHTML = "") is not flagged; tagged templates (sql`…`)
// pass values separately and are safe. SQL is flagged only when a value is spliced where
// a value belongs (see inValuePosition), not when column lists or clauses are. A
// child_process call is only recognised under a name this file imports it as (so
// RegExp.prototype.exec is never mistaken for it). Known gaps: values that flow through
// function calls or object properties, and table or column names taken from input.
func dangerousJS(f File) []Finding {
	lx := lexJS(f.Content)
	li := newLineIndex(f.Content)
	code := lx.code
	h := lx.history(jsAssignRe, false)
	var out []Finding
	add := func(off int, rule string, sev typev1.Severity, msg string) {
		out = append(out, li.finding(off, rule, sev, msg))
	}
	const errSev, warnSev = typev1.Severity_SEVERITY_ERROR, typev1.Severity_SEVERITY_WARNING

	shellNames, shellModules := jsShellImports(f.Content)
	for _, m := range callRe.FindAllStringIndex(code, -1) {
		name := strings.TrimRight(code[m[0]:m[1]-1], " \t\r\n")
		open := m[1] - 1
		if wordBefore(code, m[0]) == "function" {
			continue
		}
		p := prevNonSpace(code, m[0])
		dotted := p >= 0 && code[p] == '.'
		qualifier := ""
		if dotted {
			qualifier = wordBefore(code, p)
		}
		switch {
		case name == "eval" && (!dotted || jsGlobalObjects[qualifier]):
			close := lx.matchClose(open)
			if close < 0 || isJSDefinition(code, close) {
				continue
			}
			args := splitArgs(code, open, close)
			if l, ok := lx.soleLiteral(args0(args)); ok && len(args) == 1 && !l.interp {
				continue
			}
			add(m[0], "js/eval", errSev, "eval runs a string as code: if any part of it comes from input, that input runs with the page's or process's privileges; parse data with JSON.parse or dispatch on values instead")
		case !dotted && shellNames[name] || dotted && jsShellFns[name] && shellModules[qualifier]:
			close := lx.matchClose(open)
			if close < 0 {
				continue
			}
			args := splitArgs(code, open, close)
			if len(args) == 0 {
				continue
			}
			s, e := args[0][0], args[0][1]
			built, _ := lx.builtString(s, e, false)
			if !built {
				if ev, ok := h.last(identAt(code, s, e), s); !ok || !ev.str {
					continue
				}
			}
			add(s, "js/shell-injection", errSev, "the command passed to child_process "+name+" is built from non-literal values and runs through a shell: metacharacters in them run arbitrary commands; use execFile or spawn with an argument array")
		}
	}

	for _, m := range jsNewFunctionRe.FindAllStringIndex(code, -1) {
		add(m[0], "js/new-function", errSev, "new Function compiles a string into code, like eval: input that reaches it runs as code; avoid generating code from strings")
	}

	for _, m := range jsInnerHTMLRe.FindAllStringSubmatchIndex(code, -1) {
		if m[1] < len(code) && code[m[1]] == '=' {
			continue // a comparison
		}
		vs := skipSpace(code, m[1])
		if l, ok := lx.soleLiteral(vs, exprEnd(code, vs, false)); ok && !l.interp {
			continue // a constant: no input reaches the DOM
		}
		add(m[2], "js/unescaped-html", warnSev, code[m[2]:m[3]]+" is assigned a non-constant value, which the browser parses as HTML: input in it can inject script (XSS); use textContent or sanitise it")
	}
	for _, m := range jsInsertHTMLRe.FindAllStringIndex(code, -1) {
		close := lx.matchClose(m[1] - 1)
		if close < 0 {
			continue
		}
		args := splitArgs(code, m[1]-1, close)
		if len(args) == 2 {
			if l, ok := lx.soleLiteral(args[1][0], args[1][1]); ok && !l.interp {
				continue
			}
		}
		add(skipSpace(code, m[0]+1), "js/unescaped-html", warnSev, "insertAdjacentHTML parses a non-constant value as HTML: input in it can inject script (XSS); insert text nodes or sanitise it")
	}
	for _, m := range jsDangerousRe.FindAllStringIndex(code, -1) {
		if v := jsHTMLValueRe.FindStringIndex(code[m[1]:min(len(code), m[1]+200)]); v != nil {
			vs := m[1] + v[1]
			if l, ok := lx.soleLiteral(vs, exprEnd(code, vs, false)); ok && !l.interp {
				continue
			}
		}
		add(m[0], "js/unescaped-html", warnSev, "dangerouslySetInnerHTML inserts its value as raw HTML: input in it can inject script (XSS); render it as text or sanitise it (e.g. DOMPurify)")
	}

	for _, m := range jsRejectRe.FindAllStringIndex(code, -1) {
		// An object key ({ rejectUnauthorized: false }) or an assignment
		// (opts.rejectUnauthorized = false), not the end of a conditional
		// (a ? b.rejectUnauthorized : false).
		p := prevNonSpace(code, m[0])
		colon := strings.IndexByte(code[m[0]:m[1]], ':') >= 0
		if colon && p >= 0 && code[p] != '{' && code[p] != ',' {
			continue
		}
		add(m[0], "js/tls-verify-off", errSev, "rejectUnauthorized: false disables TLS certificate verification, so anyone on the network path can read and alter the traffic; trust the right CA via the ca option instead")
	}
	for _, m := range jsNodeTLSRe.FindAllStringIndex(code, -1) {
		if l, ok := lx.literalAt(m[1]); ok && strings.TrimSpace(l.body(f.Content)) == "0" {
			add(m[0], "js/tls-verify-off", errSev, "NODE_TLS_REJECT_UNAUTHORIZED=0 disables TLS certificate verification for the whole process; trust the right CA via NODE_EXTRA_CA_CERTS instead")
		}
	}

	for _, c := range splicedSQLCalls(code, jsSQLCallRe, lx, h, false) {
		add(c.arg, "js/sql-concat", errSev, "the SQL passed to "+c.callee+" is built from non-literal values (template substitution or concatenation), which allows SQL injection; use placeholders and pass the values as parameters")
	}
	return out
}

// args0 returns the span of the first argument, or an empty span.
func args0(args [][2]int) (int, int) {
	if len(args) == 0 {
		return 0, 0
	}
	return args[0][0], args[0][1]
}

// isJSDefinition reports whether the parenthesised list closed at code[close] belongs
// to a method definition ("eval(x) {", "eval(x): T") rather than a call.
func isJSDefinition(code string, close int) bool {
	n := skipSpace(code, close+1)
	return n < len(code) && (code[n] == '{' || code[n] == ':' && !strings.HasPrefix(code[n:], "::"))
}

// jsShellImports finds the names under which this file reaches child_process's shell
// functions: bare names (exec, or an alias such as run, or a promisified wrapper such as
// execAsync) and module names (cp in cp.exec).
func jsShellImports(src string) (names, modules map[string]bool) {
	names, modules = map[string]bool{}, map[string]bool{}
	for _, m := range jsCPNamespace.FindAllStringSubmatch(src, -1) {
		modules[m[1]+m[2]] = true
	}
	for _, m := range jsCPNamed.FindAllStringSubmatch(src, -1) {
		for _, item := range strings.Split(m[1]+m[2], ",") {
			im := jsImportItemRe.FindStringSubmatch(item)
			if im == nil || !jsShellFns[im[1]] {
				continue
			}
			if im[2] != "" {
				names[im[2]] = true
			} else {
				names[im[1]] = true
			}
		}
	}
	if jsCPDirect.MatchString(src) {
		modules[""] = true
	}
	for _, m := range jsPromisifyRe.FindAllStringSubmatch(src, -1) {
		target := strings.Join(strings.Fields(m[2]), "")
		mod, fn, dotted := strings.Cut(target, ".")
		if dotted && modules[mod] && jsShellFns[fn] || !dotted && names[target] {
			names[m[1]] = true
		}
	}
	return names, modules
}
