// Package detect holds the post-run checks TheFold runs on code an LLM produced, before a
// human reviews it: hard-coded secrets in known formats, high-entropy string literals that
// look like credentials, and dangerous API calls per language (disabled TLS verification,
// shell and SQL injection, eval, unescaped HTML).
//
// The checks are deliberately conservative. A finding that turns out to be ordinary code
// teaches reviewers to ignore every finding, so each rule looks for the shape of the
// problem (a literal secret, a query built from a variable, a shell command built from a
// variable) and stays quiet about the safe twin (a placeholder, a parameterised query, a
// command with a fixed argument list). The known gaps are listed on each detector.
//
// Every detector works on one file at a time, without type information or network access,
// and never fails on input it cannot understand: a Go file that does not parse simply
// yields no dangerous-API findings.
package detect

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// File is a produced file: its path relative to the repository root, '/'-separated, and
// its content.
type File struct{ Path, Content string }

// Finding is one problem in a file.
type Finding struct {
	// Path is the File's path.
	Path string
	// Line is the 1-based line of the problem.
	Line int
	// Column is the 1-based column of the problem, counted in bytes from the start of the
	// line (as go/token does), not in runes or display cells.
	Column int
	// Rule identifies the check, as "<family>/<name>", e.g. "secrets/aws-access-key" or
	// "go/insecure-skip-verify".
	Rule string
	// Severity is how serious the problem is.
	Severity typev1.Severity
	// Message is one line saying what was found and why it matters. It never contains a
	// whole secret: secrets are masked to their first four characters and "…".
	Message string
}

// Detector names, usable as a skill rule of kind "detector".
const (
	// Secrets finds credentials in known formats (cloud and SaaS keys, private keys,
	// JWTs) and passwords, tokens and API keys assigned a string literal.
	Secrets = "secrets"
	// Entropy finds long, random-looking string literals that are likely credentials
	// even when their format is unknown.
	Entropy = "entropy"
	// DangerousAPI finds dangerous calls per language: Go, JavaScript/TypeScript and
	// Python.
	DangerousAPI = "dangerous-api"
)

// detectors maps each detector name to its implementation. It is never modified.
var detectors = map[string]func(File) []Finding{
	Secrets:      detectSecrets,
	Entropy:      detectEntropy,
	DangerousAPI: detectDangerousAPI,
}

// Names lists the detectors, in a fixed order.
func Names() []string {
	return []string{Secrets, Entropy, DangerousAPI}
}

// Run runs the named detector on f and returns its findings sorted by line, then column,
// then rule. An unknown name is an error, so a skill that names a detector this build does
// not have fails loudly instead of silently checking nothing. The detectors read
// arbitrary generated text; should one of them still panic on some input, Run returns
// the panic as an error rather than taking the calling service down.
func Run(name string, f File) (_ []Finding, err error) {
	d, ok := detectors[name]
	if !ok {
		return nil, fmt.Errorf("detect: unknown detector %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("detect: detector %q failed on %s: %v", name, f.Path, r)
		}
	}()
	fs := d(f)
	for i := range fs {
		fs[i].Path = f.Path
	}
	sortFindings(fs)
	return fs, nil
}

// Language is the lower-case language of a path by its extension: "go", "typescript",
// "javascript", "python", or "" when the language is unknown (or has no dangerous-API
// rules).
func Language(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".go":
		return "go"
	case ".ts", ".tsx", ".mts", ".cts":
		return "typescript"
	case ".js", ".jsx", ".mjs", ".cjs":
		return "javascript"
	case ".py", ".pyi":
		return "python"
	}
	return ""
}

// detectDangerousAPI dispatches to the language's rules; other languages have none.
// Minified JavaScript is vendored output, not code anyone reviews line by line.
func detectDangerousAPI(f File) []Finding {
	if strings.HasSuffix(f.Path, ".min.js") {
		return nil
	}
	switch Language(f.Path) {
	case "go":
		return dangerousGo(f)
	case "typescript", "javascript":
		return dangerousJS(f)
	case "python":
		return dangerousPy(f)
	}
	return nil
}

// sortFindings orders findings by line, then column, then rule, then message, so a run's
// output is deterministic.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Message < b.Message
	})
}

// lineIndex converts byte offsets of one text into 1-based lines and byte columns.
type lineIndex []int

// newLineIndex records where each line of s starts.
func newLineIndex(s string) lineIndex {
	starts := []int{0}
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// pos is the 1-based line and byte column of offset off.
func (li lineIndex) pos(off int) (line, col int) {
	i, found := slices.BinarySearch(li, off)
	if !found {
		i--
	}
	return i + 1, off - li[i] + 1
}

// finding builds a Finding at byte offset off of a file indexed by li.
func (li lineIndex) finding(off int, rule string, sev typev1.Severity, msg string) Finding {
	line, col := li.pos(off)
	return Finding{Line: line, Column: col, Rule: rule, Severity: sev, Message: msg}
}

// mask shows the first four characters of a secret followed by "…", so a message can say
// which value it means without leaking it.
func mask(s string) string {
	r := []rune(s)
	if len(r) <= 4 {
		return strings.Repeat("*", len(r)) + "…"
	}
	return string(r[:4]) + "…"
}

// testDirs are directories that hold test data and fixtures.
var testDirs = []string{"testdata", "test_data", "fixtures", "__fixtures__", "__tests__", "corpus"}

// isTestPath reports whether p is a Go test file, has "testdata" or "test_data" in its
// name, or lies under a test-data or fixture directory: those are expected to hold test
// vectors and fake credentials.
func isTestPath(p string) bool {
	base := path.Base(p)
	if strings.HasSuffix(base, "_test.go") || strings.Contains(base, "testdata") || strings.Contains(base, "test_data") {
		return true
	}
	for _, d := range testDirs {
		if strings.HasPrefix(p, d+"/") || strings.Contains(p, "/"+d+"/") {
			return true
		}
	}
	return false
}

// isDocPath reports whether p is prose documentation or an API description (Markdown,
// reStructuredText, AsciiDoc, plain text, OpenAPI/Swagger, anything under docs/), whose
// values are examples.
func isDocPath(p string) bool {
	base := strings.ToLower(path.Base(p))
	switch path.Ext(base) {
	case ".md", ".markdown", ".mdx", ".rst", ".adoc", ".txt":
		return true
	}
	return strings.Contains(base, "swagger") || strings.Contains(base, "openapi") ||
		strings.HasPrefix(p, "docs/") || strings.Contains(p, "/docs/")
}

// isIdentByte reports whether c can be part of an identifier in the languages checked
// here ('$' is one in JavaScript).
func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
