package detect

import (
	"regexp"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Patterns run on lexed Python code (comments and string contents blanked), except the
// import patterns, which run on the source.
var (
	pyPickleRe    = regexp.MustCompile(`\b(?:pickle|cPickle|_pickle|dill|cloudpickle)\s*\.\s*loads?\s*\(`)
	pyYAMLRe      = regexp.MustCompile(`\byaml\s*\.\s*(load|load_all|unsafe_load|unsafe_load_all)\s*\(`)
	pySafeLoader  = regexp.MustCompile(`\b(?:SafeLoader|CSafeLoader|BaseLoader)\b`)
	pyVerifyRe    = regexp.MustCompile(`\bverify\s*=\s*False\b`)
	pyUnverified  = regexp.MustCompile(`\bssl\s*\.\s*_create_unverified_context\s*\(`)
	pySQLCallRe   = regexp.MustCompile(`\.\s*(execute|executemany|executescript|raw)\s*\(`)
	pyShellTrueRe = regexp.MustCompile(`^shell\s*=\s*True$`)
	// pyAssignRe is an assignment at the start of a line (with an optional annotation);
	// the match ends where the value starts.
	pyAssignRe = regexp.MustCompile(`(?m)^[ \t]*([A-Za-z_]\w*)\s*(?::\s*[\w.\[\], ]+)?=`)

	pyImportRe     = regexp.MustCompile(`(?m)^[ \t]*import[ \t]+([\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*)`)
	pyFromImportRe = regexp.MustCompile(`(?m)^[ \t]*from[ \t]+(subprocess|os|asyncio)[ \t]+import[ \t]+(?:\(([^)]*)\)|([^\n#]*))`)
	pyImportItemRe = regexp.MustCompile(`^\s*([\w.]+)(?:\s+as\s+(\w+))?\s*$`)
)

// pyShellCalls are, per module, the functions that run a command through a shell:
// always (true) or only with shell=True (false).
var pyShellCalls = map[string]map[string]bool{
	"subprocess": {"run": false, "call": false, "check_call": false, "check_output": false, "Popen": false, "getoutput": true, "getstatusoutput": true},
	"os":         {"system": true, "popen": true},
	"asyncio":    {"create_subprocess_shell": true},
}

// dangerousPy finds dangerous calls in Python by lexical scanning: comments and string
// contents are blanked first, so text inside them never matches.
//
// Decisions: a method named eval or exec (model.eval()) and ast.literal_eval are not the
// builtins and are not flagged; eval, exec, os.system and shell=True with a single
// constant string cannot be injected into and are not flagged; pickle.load and
// pickle.loads are both flagged (a pickle file is as dangerous as a pickle string); SQL
// is flagged only when a value is spliced where a value belongs (see inValuePosition),
// not when column lists or clauses are. Known gaps: values that flow through function
// calls or attributes, modules imported under names this file does not show, SQL built
// over several statements (query += ...), and table or column names taken from input.
func dangerousPy(f File) []Finding {
	lx := lexPy(f.Content)
	li := newLineIndex(f.Content)
	code := lx.code
	h := lx.history(pyAssignRe, true)
	var out []Finding
	add := func(off int, rule string, sev typev1.Severity, msg string) {
		out = append(out, li.finding(off, rule, sev, msg))
	}
	const errSev, warnSev = typev1.Severity_SEVERITY_ERROR, typev1.Severity_SEVERITY_WARNING

	modules, bare := pyShellImports(f.Content)
	for _, m := range callRe.FindAllStringIndex(code, -1) {
		name := strings.TrimRight(code[m[0]:m[1]-1], " \t\r\n\\")
		open := m[1] - 1
		if w := wordBefore(code, m[0]); w == "def" || w == "class" {
			continue
		}
		p := prevNonSpace(code, m[0])
		dotted := p >= 0 && code[p] == '.'
		qualifier := ""
		if dotted {
			qualifier = wordBefore(code, p)
		}
		isEval := (name == "eval" || name == "exec") && (!dotted || qualifier == "builtins")
		module, fn := "", name
		if dotted {
			module = modules[qualifier]
			if module == "" && pyShellCalls[qualifier] != nil {
				module = qualifier // used without a visible import
			}
		} else if b, ok := bare[name]; ok {
			module, fn = b[0], b[1]
		}
		always, isShell := pyShellCalls[module][fn]
		if !isEval && !isShell {
			continue
		}
		close := lx.matchClose(open)
		if close < 0 {
			continue
		}
		args := splitArgs(code, open, close)
		if len(args) == 0 {
			continue
		}
		l, ok := lx.soleLiteral(args[0][0], args[0][1])
		constArg := ok && !l.interp
		if isEval {
			if !constArg || len(args) > 1 {
				add(m[0], "py/eval", errSev, name+" runs a string as Python code: input that reaches it runs with the program's privileges; use ast.literal_eval for literals or dispatch on values")
			}
			continue
		}
		if constArg || code[args[0][0]] == '[' || code[args[0][0]] == '(' {
			continue
		}
		if !always && !hasArg(code, args, pyShellTrueRe) {
			continue
		}
		add(args[0][0], "py/shell-injection", errSev, module+"."+fn+" runs a command built from non-literal values through a shell: metacharacters in them run arbitrary commands; pass an argument list without shell=True")
	}

	for _, m := range pyPickleRe.FindAllStringIndex(code, -1) {
		add(m[0], "py/pickle", warnSev, "unpickling runs code chosen by whoever wrote the data: never unpickle data that is not fully trusted; use JSON or another data-only format")
	}
	for _, m := range pyYAMLRe.FindAllStringSubmatchIndex(code, -1) {
		fn := code[m[2]:m[3]]
		if !strings.HasPrefix(fn, "unsafe") {
			if close := lx.matchClose(m[1] - 1); close > 0 && pySafeLoader.MatchString(code[m[1]:close]) {
				continue
			}
		}
		add(m[0], "py/yaml-load", warnSev, "yaml."+fn+" without SafeLoader can construct arbitrary Python objects from the document, running code; use yaml.safe_load")
	}
	for _, m := range pyVerifyRe.FindAllStringIndex(code, -1) {
		if p := prevNonSpace(code, m[0]); p >= 0 && strings.IndexByte("(,.", code[p]) >= 0 {
			add(m[0], "py/tls-verify-off", errSev, "verify=False disables TLS certificate verification, so anyone on the network path can read and alter the traffic; pass verify= the path of the right CA bundle instead")
		}
	}
	for _, m := range pyUnverified.FindAllStringIndex(code, -1) {
		add(m[0], "py/tls-verify-off", errSev, "ssl._create_unverified_context disables TLS certificate verification; use ssl.create_default_context with the right CA")
	}
	for _, c := range splicedSQLCalls(code, pySQLCallRe, lx, h, true) {
		add(c.arg, "py/sql-concat", errSev, "the SQL passed to "+c.callee+" is built from values (f-string, % or .format() or concatenation), which allows SQL injection; use placeholders and pass the values as the second argument")
	}
	return out
}

// hasArg reports whether one of the arguments, as lexed code, matches re.
func hasArg(code string, args [][2]int, re *regexp.Regexp) bool {
	for _, a := range args {
		if re.MatchString(code[a[0]:a[1]]) {
			return true
		}
	}
	return false
}

// pyShellImports finds the names under which this file reaches the shell-running
// modules: module aliases (sp for "import subprocess as sp") and bare function names
// ("from subprocess import run as sh_run" maps sh_run to subprocess.run).
func pyShellImports(src string) (modules map[string]string, bare map[string][2]string) {
	modules, bare = map[string]string{}, map[string][2]string{}
	for _, m := range pyImportRe.FindAllStringSubmatch(src, -1) {
		for _, item := range strings.Split(m[1], ",") {
			im := pyImportItemRe.FindStringSubmatch(item)
			if im == nil || pyShellCalls[im[1]] == nil {
				continue
			}
			if im[2] != "" {
				modules[im[2]] = im[1]
			} else {
				modules[im[1]] = im[1]
			}
		}
	}
	for _, m := range pyFromImportRe.FindAllStringSubmatch(src, -1) {
		for _, item := range strings.Split(m[2]+m[3], ",") {
			im := pyImportItemRe.FindStringSubmatch(item)
			if im == nil {
				continue
			}
			if _, ok := pyShellCalls[m[1]][im[1]]; !ok {
				continue
			}
			alias := im[1]
			if im[2] != "" {
				alias = im[2]
			}
			bare[alias] = [2]string{m[1], im[1]}
		}
	}
	return modules, bare
}
