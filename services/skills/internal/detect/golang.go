package detect

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"regexp"
	"strconv"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// goSQLMethods are the database/sql, pgx and sqlx methods whose argument is SQL text.
var goSQLMethods = map[string]bool{
	"Query": true, "QueryRow": true, "QueryContext": true, "QueryRowContext": true,
	"Exec": true, "ExecContext": true, "Prepare": true, "PrepareContext": true,
}

// goShells are programs that run their "-c" argument as a shell script.
var goShells = map[string]bool{"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "ash": true, "csh": true, "tcsh": true, "fish": true}

// goTemplateTypes are the html/template types that mark a string as already safe.
var goTemplateTypes = map[string]bool{"HTML": true, "HTMLAttr": true, "JS": true, "JSStr": true, "CSS": true, "URL": true, "Srcset": true}

var (
	// shellCFlagRe is a shell option cluster that includes -c ("-c", "-ec", "-lc").
	shellCFlagRe = regexp.MustCompile(`^-[a-zA-Z]*c[a-zA-Z]*$`)
	// sqlWordRe is a SQL keyword, as a word, in any case.
	sqlWordRe = regexp.MustCompile(`(?i)\b(SELECT|INSERT|UPDATE|DELETE|FROM|WHERE|VALUES|INTO|JOIN|ORDER\s+BY|GROUP\s+BY|LIMIT|OFFSET|HAVING|UNION|CREATE|DROP|ALTER|TRUNCATE|GRANT|REVOKE|LISTEN|NOTIFY|COPY|MERGE|UPSERT|RETURNING|SET|AND|OR|LIKE)\b`)
)

// goChecker holds what dangerousGo knows about one parsed file.
type goChecker struct {
	fset *token.FileSet
	// imports maps a local package name to its import path.
	imports map[string]string
	// consts and vars are the names the file declares as constants and as variables
	// (parameters, results and receivers included). A name in both counts as a variable.
	consts, vars map[string]bool
	out          []Finding
}

// taint remembers, within one top-level declaration, the variables last assigned an
// unsafe SQL string or an unsafe string in general.
type taint struct{ sql, str map[string]bool }

// dangerousGo parses Go source and walks its syntax tree for disabled TLS verification,
// shell commands and SQL built from variables, and html/template values marked safe. A
// file that does not parse yields nothing.
//
// Values are judged without type information: a literal, a declared constant, a name
// this file does not declare (most likely a constant of the package), a package-qualified
// name and the result of a quoting or sanitising call ("pgx.Identifier{…}.Sanitize()",
// "pq.QuoteIdentifier", "strconv.Itoa") are safe; variables, parameters, fields and other
// calls are not. A shell script built from an unsafe value is flagged wherever the value
// goes; SQL only when the value goes where a value belongs (see inValuePosition), since
// splicing column lists, WHERE clauses of placeholders and sanitised identifiers is how
// dynamic queries are written. InsecureSkipVerify set from configuration is not flagged.
//
// Known gaps: a table or column name taken from input, SQL or a command built in one
// function and run in another, queries built with "+=" or strings.Builder, and methods
// reached under other names.
func dangerousGo(f File) []Finding {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, f.Path, f.Content, parser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	c := &goChecker{fset: fset, imports: map[string]string{}, consts: map[string]bool{}, vars: map[string]bool{}}
	for _, im := range file.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			continue
		}
		name := path.Base(p)
		if im.Name != nil {
			name = im.Name.Name
		}
		c.imports[name] = p
	}
	c.collectNames(file)
	for _, d := range file.Decls {
		t := &taint{sql: map[string]bool{}, str: map[string]bool{}}
		ast.Inspect(d, func(n ast.Node) bool {
			c.visit(n, t)
			return true
		})
	}
	return c.out
}

// collectNames records the constants and variables the file declares.
func (c *goChecker) collectNames(file *ast.File) {
	addFields := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, f := range fl.List {
			for _, n := range f.Names {
				c.vars[n.Name] = true
			}
		}
	}
	addIdent := func(e ast.Expr) {
		if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
			c.vars[id.Name] = true
		}
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			addFields(n.Recv)
		case *ast.FuncType:
			addFields(n.Params)
			addFields(n.Results)
		case *ast.GenDecl:
			for _, s := range n.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for _, id := range vs.Names {
					if n.Tok == token.CONST {
						c.consts[id.Name] = true
					} else {
						c.vars[id.Name] = true
					}
				}
			}
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				addIdent(l)
			}
		case *ast.RangeStmt:
			addIdent(n.Key)
			addIdent(n.Value)
		}
		return true
	})
}

// report records a finding at pos.
func (c *goChecker) report(pos token.Pos, rule string, sev typev1.Severity, msg string) {
	p := c.fset.Position(pos)
	c.out = append(c.out, Finding{Line: p.Line, Column: p.Column, Rule: rule, Severity: sev, Message: msg})
}

// visit checks one node and updates the declaration's taint.
func (c *goChecker) visit(n ast.Node, t *taint) {
	switch n := n.(type) {
	case *ast.CompositeLit:
		for _, e := range n.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "InsecureSkipVerify" && isIdent(kv.Value, "true") {
				c.reportSkipVerify(kv.Key.Pos())
			}
		}
	case *ast.AssignStmt:
		for i, l := range n.Lhs {
			if sel, ok := l.(*ast.SelectorExpr); ok && sel.Sel.Name == "InsecureSkipVerify" && len(n.Rhs) == len(n.Lhs) && isIdent(n.Rhs[i], "true") {
				c.reportSkipVerify(sel.Sel.Pos())
			}
		}
		if n.Tok == token.DEFINE || n.Tok == token.ASSIGN {
			c.track(t, n.Lhs, n.Rhs)
		}
	case *ast.ValueSpec:
		lhs := make([]ast.Expr, len(n.Names))
		for i, id := range n.Names {
			lhs[i] = id
		}
		c.track(t, lhs, n.Values)
	case *ast.CallExpr:
		c.checkCall(n, t)
	}
}

// reportSkipVerify reports InsecureSkipVerify set to true.
func (c *goChecker) reportSkipVerify(pos token.Pos) {
	c.report(pos, "go/insecure-skip-verify", typev1.Severity_SEVERITY_ERROR,
		"InsecureSkipVerify: true disables TLS certificate verification, so anyone on the network path can read and alter the traffic; trust the right CA via RootCAs instead")
}

// track updates the taint of variables assigned in one statement.
func (c *goChecker) track(t *taint, lhs, rhs []ast.Expr) {
	if len(lhs) != len(rhs) {
		return
	}
	for i, l := range lhs {
		id, ok := l.(*ast.Ident)
		if !ok || id.Name == "_" {
			continue
		}
		t.sql[id.Name] = c.injectsSQL(rhs[i])
		t.str[id.Name] = c.unsafeBuild(rhs[i])
	}
}

// checkCall checks one call for SQL built from variables, a shell command built from
// variables, and html/template values marked safe.
func (c *goChecker) checkCall(call *ast.CallExpr, t *taint) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return
	}
	pkg := ""
	if id, ok := sel.X.(*ast.Ident); ok && !c.vars[id.Name] {
		pkg = c.imports[id.Name]
	}
	name := sel.Sel.Name
	switch {
	case pkg == "os/exec" && (name == "Command" || name == "CommandContext"):
		c.checkCommand(call, name == "CommandContext", t)
	case pkg == "html/template" && goTemplateTypes[name] && len(call.Args) == 1:
		if !c.isConstant(call.Args[0]) {
			c.report(call.Pos(), "go/unescaped-html", typev1.Severity_SEVERITY_WARNING,
				"template."+name+" marks a non-constant value as safe, so html/template does not escape it and it can inject script (XSS); pass the plain string and let the template escape it")
		}
	case pkg == "" && goSQLMethods[name] && len(call.Args) > 0:
		i := 0
		if strings.HasSuffix(name, "Context") || c.isContextArg(call.Args[0]) {
			i = 1
		}
		if i >= len(call.Args) {
			return
		}
		arg := call.Args[i]
		how := ""
		switch {
		case c.injectsSQL(arg):
			how = "has a non-constant value"
		case isTainted(arg, t.sql):
			how = "was built with a non-constant value"
		default:
			return
		}
		c.report(arg.Pos(), "go/sql-concat", typev1.Severity_SEVERITY_ERROR,
			"the SQL passed to "+name+" "+how+" spliced in where a value goes (concatenation or fmt.Sprintf), which allows SQL injection; use a placeholder ($1, ?) and pass the value as an argument")
	}
}

// checkCommand reports exec.Command running a shell whose -c script is built from
// variables.
func (c *goChecker) checkCommand(call *ast.CallExpr, withCtx bool, t *taint) {
	args := call.Args
	if withCtx {
		if len(args) == 0 {
			return
		}
		args = args[1:]
	}
	prog, ok := stringLit(args)
	if !ok {
		return
	}
	args = args[1:]
	if path.Base(prog) == "env" {
		if prog, ok = stringLit(args); !ok {
			return
		}
		args = args[1:]
	}
	if !goShells[path.Base(prog)] {
		return
	}
	for i := 0; i+1 < len(args); i++ {
		flag, ok := stringLit(args[i:])
		if !ok || !shellCFlagRe.MatchString(flag) {
			continue
		}
		if call.Ellipsis.IsValid() && i+1 == len(args)-1 {
			return // sh -c args...: the script is not visible here
		}
		script := args[i+1]
		if c.unsafeBuild(script) || isTainted(script, t.str) {
			c.report(script.Pos(), "go/shell-injection", typev1.Severity_SEVERITY_ERROR,
				"exec.Command runs \""+path.Base(prog)+" "+flag+"\" with a script built from non-constant values: shell metacharacters in them run arbitrary commands; run the program directly with separate arguments")
		}
		return
	}
}

// stringLit returns the value of args[0] when it is a string literal.
func stringLit(args []ast.Expr) (string, bool) {
	if len(args) == 0 {
		return "", false
	}
	bl, ok := ast.Unparen(args[0]).(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

// isIdent reports whether e is the identifier name.
func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// isTainted reports whether e is a variable marked in m.
func isTainted(e ast.Expr, m map[string]bool) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && m[id.Name]
}

// isContextArg reports whether e looks like a context.Context (pgx takes one first).
func (c *goChecker) isContextArg(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return strings.Contains(strings.ToLower(e.Name), "ctx")
	case *ast.SelectorExpr:
		return strings.Contains(strings.ToLower(e.Sel.Name), "ctx")
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && c.imports[id.Name] == "context" {
				return true
			}
			return sel.Sel.Name == "Context"
		}
	}
	return false
}

// isConstant reports whether e is a compile-time constant string: literals and
// constants declared in this file, and concatenations of them.
func (c *goChecker) isConstant(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.BasicLit:
		return true
	case *ast.Ident:
		return c.consts[e.Name] && !c.vars[e.Name]
	case *ast.BinaryExpr:
		return c.isConstant(e.X) && c.isConstant(e.Y)
	}
	return false
}

// sanitizerRe matches the names of functions whose result is safe to splice into SQL or
// a shell command: quoting, escaping and identifier sanitising, and number formatting.
var sanitizerRe = regexp.MustCompile(`(?i)quote|escape|saniti[sz]e|ident|literal|placeholder|^args?$|^bind(var)?$|^itoa$|^format(int|uint|float|bool)$|^len$`)

// isSafe reports whether e cannot carry attacker-controlled text into a string: a
// literal, a constant, a name not declared in this file, a package-qualified name, a
// number formatted or a value quoted by a sanitising call, or a combination of those.
func (c *goChecker) isSafe(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.BasicLit:
		return true
	case *ast.Ident:
		return !c.vars[e.Name] || strings.Contains(strings.ToLower(e.Name), "placeholder")
	case *ast.BinaryExpr:
		return c.isSafe(e.X) && c.isSafe(e.Y)
	case *ast.SelectorExpr:
		root := e.X
		for {
			s, ok := root.(*ast.SelectorExpr)
			if !ok {
				break
			}
			root = s.X
		}
		id, ok := root.(*ast.Ident)
		return ok && !c.vars[id.Name]
	case *ast.CallExpr:
		name := ""
		switch f := e.Fun.(type) {
		case *ast.Ident:
			name = f.Name
		case *ast.SelectorExpr:
			name = f.Sel.Name
		}
		if sanitizerRe.MatchString(name) {
			return true
		}
		if name == "Join" && len(e.Args) > 0 {
			return c.isSafe(e.Args[0]) // strings.Join of placeholders
		}
		if c.isSprintf(e) {
			return !c.unsafeBuild(e)
		}
		switch name {
		case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
			return true
		}
	}
	return false
}

// isSprintf reports whether call is fmt.Sprintf.
func (c *goChecker) isSprintf(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Sprintf" {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && !c.vars[id.Name] && c.imports[id.Name] == "fmt"
}

// flattenAdd returns the operands of a chain of '+'.
func flattenAdd(e ast.Expr, out []ast.Expr) []ast.Expr {
	if b, ok := ast.Unparen(e).(*ast.BinaryExpr); ok && b.Op == token.ADD {
		return flattenAdd(b.Y, flattenAdd(b.X, out))
	}
	return append(out, e)
}

// unsafeBuild reports whether e builds a string from a value that is not safe: a '+'
// chain with an unsafe operand, or fmt.Sprintf with an unsafe argument for a verb that
// can carry text (%s, %v, %q, ...; numeric verbs cannot).
func (c *goChecker) unsafeBuild(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return false
		}
		for _, p := range flattenAdd(e, nil) {
			if !c.isSafe(p) {
				return true
			}
		}
	case *ast.CallExpr:
		if !c.isSprintf(e) || len(e.Args) == 0 {
			return false
		}
		if format, ok := stringLit(e.Args); ok && onlyNumericVerbs(format) {
			return false
		}
		for _, a := range e.Args[1:] {
			if !c.isSafe(a) {
				return true
			}
		}
		return !c.isSafe(e.Args[0])
	}
	return false
}

// injectsSQL reports whether e splices a value that is not safe into SQL text where a
// value goes (see inValuePosition): a '+' chain or fmt.Sprintf whose literal text looks
// like SQL. Splicing into other positions (column lists, WHERE clauses built from
// placeholders, locking clauses, DDL identifiers) is how dynamic queries are built and
// cannot use placeholders, so it is not flagged.
func (c *goChecker) injectsSQL(e ast.Expr) bool {
	e = ast.Unparen(e)
	if call, ok := e.(*ast.CallExpr); ok {
		if !c.isSprintf(call) || call.Ellipsis.IsValid() {
			return false
		}
		format, ok := stringLit(call.Args)
		if !ok || !sqlWordRe.MatchString(format) {
			return false
		}
		k := 1
		for _, m := range printfVerbRe.FindAllStringSubmatchIndex(format, -1) {
			verb := format[m[2]]
			if verb == '%' {
				continue
			}
			if k >= len(call.Args) {
				break
			}
			arg := call.Args[k]
			k++
			if strings.IndexByte(numericVerbs, verb) < 0 && !c.isSafe(arg) && inValuePosition(format[:m[0]]) {
				return true
			}
		}
		return false
	}
	parts := flattenAdd(e, nil)
	if len(parts) < 2 {
		return false
	}
	var all strings.Builder
	for _, p := range parts {
		if s, ok := stringLit([]ast.Expr{p}); ok {
			all.WriteString(s)
		}
	}
	if !sqlWordRe.MatchString(all.String()) {
		return false
	}
	var before strings.Builder
	for _, p := range parts {
		if s, ok := stringLit([]ast.Expr{p}); ok {
			before.WriteString(s)
			continue
		}
		if !c.isSafe(p) && inValuePosition(before.String()) {
			return true
		}
	}
	return false
}

// onlyNumericVerbs reports whether every printf verb in format formats a number or a
// boolean, which cannot carry quotes or shell metacharacters.
func onlyNumericVerbs(format string) bool {
	for _, m := range printfVerbRe.FindAllStringSubmatch(format, -1) {
		if m[1] != "%" && !strings.Contains(numericVerbs, m[1]) {
			return false
		}
	}
	return true
}
