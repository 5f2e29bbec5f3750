package outline

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"regexp"
	"strings"
)

// elideValue: a var or const value whose source is longer than this, or that holds a
// function literal, is printed as "...".
const elideValue = 80

// goOutline prints a Go file without function bodies, keeping the doc comments of the
// package, its declarations and their fields and methods (and their line comments); it
// reports false when the file does not parse.
func goOutline(p, content string) (string, bool) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, p, content, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return "", false
	}
	keep := map[*ast.CommentGroup]bool{}
	mark := func(gs ...*ast.CommentGroup) {
		for _, g := range gs {
			if g != nil {
				keep[g] = true
			}
		}
	}
	mark(f.Doc)
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			d.Body = nil
			mark(d.Doc)
		case *ast.GenDecl:
			mark(d.Doc)
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ImportSpec:
					mark(s.Doc, s.Comment)
				case *ast.TypeSpec:
					mark(s.Doc, s.Comment)
					ast.Inspect(s.Type, func(n ast.Node) bool {
						if fl, ok := n.(*ast.Field); ok {
							mark(fl.Doc, fl.Comment)
						}
						return true
					})
				case *ast.ValueSpec:
					mark(s.Doc)
					elided := false
					for i, v := range s.Values {
						if long(fset, v) || hasFuncLit(v) {
							s.Values[i] = &ast.Ident{Name: "...", NamePos: v.Pos()}
							elided = true
						}
					}
					if !elided {
						// A line comment after an elided value would float to a line of
						// its own.
						mark(s.Comment)
					}
				}
			}
		}
	}
	// Only the kept groups are printed: the comments inside bodies and elided values go
	// with them.
	var kept []*ast.CommentGroup
	for _, g := range f.Comments {
		if keep[g] {
			kept = append(kept, g)
		}
	}
	f.Comments = kept
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

// goDecl matches the first line of a top-level Go declaration (line-scan fallback).
var goDecl = regexp.MustCompile(`^(package|import|func|type|const|var)\b`)

// goKind chooses what the line scan keeps of a Go declaration.
func goKind(line string) declKind {
	if strings.HasPrefix(line, "func") {
		return cutBody
	}
	if strings.HasPrefix(line, "var") && strings.Contains(line, "func") {
		return cutBody
	}
	return keepFull
}
