package evalset

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// CodeDoc returns, for every exported function and method with a doc comment of at least
// five words under root (not tests, testdata, vendor or generated files), the doc comment
// with the function's name removed as the query and the function's source (signature and
// body, without the doc comment) as the document. skipDir may skip more directories (by
// path relative to root).
func CodeDoc(root string, skipDir func(rel string) bool) []Pair {
	var out []Pair
	seen := map[string]bool{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			n := d.Name()
			if p != root && (n == "testdata" || n == "vendor" || n == "node_modules" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") ||
				(skipDir != nil && skipDir(filepath.ToSlash(rel)))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil || generated.Match(src[:min(len(src), 2000)]) {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Doc == nil || fn.Body == nil || !fn.Name.IsExported() {
				continue
			}
			q := removeName(fn.Doc.Text(), fn.Name.Name)
			if len(strings.Fields(q)) < 5 {
				continue
			}
			doc := string(src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset])
			if seen[doc] || seen[q] {
				continue
			}
			seen[doc], seen[q] = true, true
			out = append(out, Pair{Source: filepath.ToSlash(rel) + ":" + fn.Name.Name, Query: q, Doc: doc})
		}
		return nil
	})
	return out
}

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// removeName removes the function's name from its doc comment ("Foo returns…" →
// "returns…"), so a query cannot match the document by its name alone.
func removeName(doc, name string) string {
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
	return strings.Join(strings.Fields(re.ReplaceAllString(doc, "")), " ")
}
