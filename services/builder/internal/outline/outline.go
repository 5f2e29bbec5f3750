// Package outline reduces a source file to what a reader of another file needs from it:
// its declarations, signatures and doc comments, without function bodies. The builder
// gives the model outlines where whole files would not fit its context: dependencies
// beyond the context budget, and the repository files a generation refers to.
//
// Go is parsed (go/parser, printed with go/printer); a Go file that does not parse, and
// TypeScript, JavaScript and Python files, are outlined by a line scan that tracks
// nesting, strings and comments. Other files keep their first HeadLines lines.
package outline

import (
	"path"
	"strings"
)

// HeadLines is how many lines the outline of a file of another type keeps.
const HeadLines = 20

// File returns the outline of the file at p (its extension chooses the language) with
// content: for Go the package clause, imports, types (with their fields' and methods'
// comments), consts, vars (long values as "...") and func signatures, each with its doc
// comment; for TypeScript and JavaScript the top-level declarations with their leading
// comments, function bodies cut ("{ ... }") and class members' bodies cut; for Python
// the def and class lines with their decorators, leading comments and docstrings, bodies
// as "...", and module- and class-level assignments; for other files the first HeadLines
// lines.
func File(p, content string) string {
	switch path.Ext(p) {
	case ".go":
		if o, ok := goOutline(p, content); ok {
			return o
		}
		return braceOutline(content, goDecl, goKind)
	case ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs":
		return braceOutline(content, jsDecl, jsKind)
	case ".py":
		return pyOutline(content)
	}
	return Head(content, HeadLines)
}

// Head returns the first n lines of s, without the trailing newline.
func Head(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.TrimRight(strings.Join(lines, ""), "\n")
}
