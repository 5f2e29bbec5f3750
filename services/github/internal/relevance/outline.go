package relevance

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"strings"

	"github.com/thefold/thefold/pkg/tokens"
)

// outline is the structural outline of one file, built once per index on first need.
// compact is a smaller variant (Go without doc comments, others without the header
// comment) used when the full outline does not fit.
type outline struct {
	full, compact       string
	fullTok, compactTok int
}

// outlineWithin returns the outline of file i if one fits in limit tokens: the full
// outline, else the compact one, else — only when the file has no definitions to outline —
// its first whole lines that fit.
func (ix *Index) outlineWithin(i int32, limit int) (string, int, bool) {
	if limit <= 0 {
		return "", 0, false
	}
	o := ix.outlineOf(i)
	if o.full == "" {
		text, n := firstLines(ix.docs[i].content, limit)
		return text, n, text != ""
	}
	if o.fullTok <= limit {
		return o.full, o.fullTok, true
	}
	if o.compact != "" && o.compactTok <= limit {
		return o.compact, o.compactTok, true
	}
	return "", 0, false
}

func (ix *Index) outlineOf(i int32) *outline {
	d := &ix.docs[i]
	d.outlineOnce.Do(func() { d.outline = buildOutline(d) })
	return d.outline
}

func buildOutline(d *doc) *outline {
	o := &outline{}
	if d.lang == langGo {
		if full, ok := goOutline(d.path, d.content, true); ok {
			o.full = full
			o.compact, _ = goOutline(d.path, d.content, false)
		}
	}
	if o.full == "" {
		o.full = lineOutline(d.lang, d.content, true)
		o.compact = lineOutline(d.lang, d.content, false)
	}
	if o.compact == o.full {
		o.compact = ""
	}
	if o.full != "" {
		o.fullTok = tokens.Count(o.full)
	}
	if o.compact != "" {
		o.compactTok = tokens.Count(o.compact)
	}
	return o
}

// elideValue: a var or const initialiser longer than this (bytes of source) is shown as
// "..." — tables and function literals are bodies, not signatures.
const elideValue = 80

// goOutline prints the package clause, imports, type / const / var declarations and func
// and method signatures of a Go file, with their doc comments when docs is set, and no
// function bodies. It reports false when the file does not parse into any declaration.
func goOutline(filename, src string, docs bool) (string, bool) {
	fset := token.NewFileSet()
	mode := parser.SkipObjectResolution
	if docs {
		mode |= parser.ParseComments
	}
	f, err := parser.ParseFile(fset, filename, src, mode)
	if f == nil || (err != nil && len(f.Decls) == 0) {
		return "", false
	}
	var buf bytes.Buffer
	if docs && f.Doc != nil {
		for _, c := range f.Doc.List {
			buf.WriteString(c.Text)
			buf.WriteByte('\n')
		}
	}
	fmt.Fprintf(&buf, "package %s\n", f.Name.Name)
	cfg := printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			d.Body = nil
			if !docs {
				d.Doc = nil
			}
		case *ast.GenDecl:
			if !docs {
				stripDocs(d)
			}
			for _, s := range d.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok || len(vs.Values) == 0 {
					continue
				}
				if span := fset.Position(vs.Values[len(vs.Values)-1].End()).Offset - fset.Position(vs.Values[0].Pos()).Offset; span > elideValue {
					vs.Values = []ast.Expr{ast.NewIdent("...")}
				}
			}
		default:
			continue
		}
		buf.WriteByte('\n')
		if err := cfg.Fprint(&buf, fset, decl); err != nil {
			return "", false
		}
		buf.WriteByte('\n')
	}
	return buf.String(), true
}

// stripDocs removes the comments a declaration carries, down to struct fields.
func stripDocs(d *ast.GenDecl) {
	d.Doc = nil
	ast.Inspect(d, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeSpec:
			n.Doc, n.Comment = nil, nil
		case *ast.ValueSpec:
			n.Doc, n.Comment = nil, nil
		case *ast.ImportSpec:
			n.Doc, n.Comment = nil, nil
		case *ast.Field:
			n.Doc, n.Comment = nil, nil
		}
		return true
	})
}

// maxHeaderLines bounds the first comment block of a line outline.
const maxHeaderLines = 40

// lineOutline is the outline of a file that is not parsed: its first comment block (when
// header is set) followed by its definition lines as "12: func ...". It is empty when the
// file has no definition lines.
func lineOutline(l lang, content string, header bool) string {
	var defs strings.Builder
	eachDefLine(l, content, func(lineNo int, line, _ string) {
		fmt.Fprintf(&defs, "%d: %s\n", lineNo, line)
	})
	if defs.Len() == 0 {
		return ""
	}
	if !header {
		return defs.String()
	}
	h := headerComment(content)
	if h == "" {
		return defs.String()
	}
	return h + "\n" + defs.String()
}

// headerComment returns the comment block at the top of a file (after blank lines and a
// #! line): consecutive lines starting with //, /*, *, # or --, or a Python module
// docstring, whole lines, at most maxHeaderLines.
func headerComment(content string) string {
	var out []string
	inDoc := "" // closing quote of an open Python docstring
	inBlock := false
	for rest, n := content, 0; rest != "" && len(out) < maxHeaderLines; n++ {
		var line string
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			line, rest = rest, ""
		}
		line = strings.TrimRight(line, " \t\r")
		t := strings.TrimSpace(line)
		switch {
		case inDoc != "":
			out = append(out, line)
			if strings.Contains(t, inDoc) {
				return strings.Join(out, "\n") + "\n"
			}
			continue
		case inBlock:
			out = append(out, line)
			if strings.Contains(t, "*/") {
				inBlock = false
			}
			continue
		case t == "" && len(out) == 0, n == 0 && strings.HasPrefix(t, "#!"):
			continue
		case strings.HasPrefix(t, `"""`) || strings.HasPrefix(t, `'''`):
			if len(out) > 0 {
				return strings.Join(out, "\n") + "\n"
			}
			q := t[:3]
			out = append(out, line)
			if len(t) < 6 || !strings.HasSuffix(t, q) {
				inDoc = q
				continue
			}
			return strings.Join(out, "\n") + "\n"
		case strings.HasPrefix(t, "/*"):
			out = append(out, line)
			inBlock = !strings.Contains(t[2:], "*/")
			continue
		case strings.HasPrefix(t, "//"), strings.HasPrefix(t, "#"), strings.HasPrefix(t, "--"):
			out = append(out, line)
			continue
		}
		break
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

// firstLines returns the longest prefix of content made of whole lines whose token count
// is at most limit, and that count. Lines are counted one by one to find the cut, then the
// prefix is counted as a whole, dropping lines until it fits (BPE merges across a line
// break rarely make the whole differ from the sum of its lines).
func firstLines(content string, limit int) (string, int) {
	if limit <= 0 || content == "" {
		return "", 0
	}
	var ends []int // byte offset after each line's newline
	sum := 0
	for off := 0; off < len(content); {
		end := len(content)
		if i := strings.IndexByte(content[off:], '\n'); i >= 0 {
			end = off + i + 1
		}
		sum += tokens.Count(content[off:end])
		if sum > limit {
			break
		}
		ends = append(ends, end)
		off = end
	}
	for k := len(ends); k > 0; {
		text := content[:ends[k-1]]
		if n := tokens.Count(text); n <= limit {
			return text, n
		}
		k -= max(1, k/10)
	}
	return "", 0
}
