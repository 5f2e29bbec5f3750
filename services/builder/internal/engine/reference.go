package engine

import (
	"context"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/tokens"

	"github.com/thefold/thefold/services/builder/internal/analysis"
	"github.com/thefold/thefold/services/builder/internal/depgraph"
	"github.com/thefold/thefold/services/builder/internal/outline"
)

// Reference files: outlines of the repository files a generation or fix is likely to use
// or be used by, beside the dependency files it gets in full.

const (
	// maxReferenceFiles is the ai service's bound on a request's list of context files.
	maxReferenceFiles = 200
	// maxReferenceRead is the largest file outlined: a bigger one is generated or data.
	maxReferenceRead = 1 << 20
)

// workspace reads the sandbox's files for reference outlines, each at most once per run:
// the build's own writes replace what it holds, so it never serves a file older than the
// sandbox's.
type workspace struct {
	src   analysis.Source
	files map[string]*wsFile
}

type wsFile struct {
	content string
	// ok is false for a file that could not be read or is no text (missing, binary, too
	// large): it gives no outline.
	ok      bool
	outline *string // computed on first use
	// tokens is the outline's token count, -1 until first asked (outlineTokens): counting
	// is cl100k's regexp pre-tokenizer, and every step of a build asks again for the same
	// files (a quarter of the builder's CPU in BuildOrchestration when it was not kept).
	tokens int
}

func newWorkspace(src analysis.Source) *workspace {
	return &workspace{src: src, files: map[string]*wsFile{}}
}

// read returns p's content; ok is false when p cannot be outlined.
func (w *workspace) read(ctx context.Context, p string) (string, bool) {
	if f, ok := w.files[p]; ok {
		return f.content, f.ok
	}
	f := &wsFile{tokens: -1}
	c, err := w.src.Read(ctx, p)
	switch code := status.Code(err); {
	case err == nil:
		f.content, f.ok = c, len(c) <= maxReferenceRead && utf8.ValidString(c) && !strings.ContainsRune(c, 0)
	case code != codes.NotFound && code != codes.InvalidArgument:
		return "", false // not remembered: the sandbox may answer next time
	}
	w.files[p] = f
	return f.content, f.ok
}

// outline returns p's outline, "" when it has none.
func (w *workspace) outline(ctx context.Context, p string) string {
	if _, ok := w.read(ctx, p); !ok {
		return ""
	}
	f := w.files[p]
	if f.outline == nil {
		o := outline.File(p, f.content)
		f.outline = &o
	}
	return *f.outline
}

// wrote records that the build wrote content to p.
func (w *workspace) wrote(p, content string) {
	w.files[p] = &wsFile{content: content, ok: utf8.ValidString(content) && len(content) <= maxReferenceRead, tokens: -1}
}

// deleted records that the build deleted p.
func (w *workspace) deleted(p string) { w.files[p] = &wsFile{tokens: -1} }

// outlineTokens is the token count of p's outline (o, what outline returned), counted once.
func (w *workspace) outlineTokens(p, o string) int {
	f := w.files[p]
	if f == nil || f.outline == nil || *f.outline != o {
		return tokens.Count(o)
	}
	if f.tokens < 0 {
		f.tokens = tokens.Count(o)
	}
	return f.tokens
}

// referenceFiles are the outlines for a generation or fix of target (whose current content
// is content; empty for a new file), in priority order: the build's context paths, the
// other files of target's directory (for Go its package), and for Go the module's packages
// content imports. target and the dependency files are left out. They are given while
// they fit ReferenceBudget tokens; the first that does not is cut to what is left (marked
// truncated) and ends the list.
func (r *run) referenceFiles(ctx context.Context, target, content string, deps []*aiv1.ContextFile) []*aiv1.ContextFile {
	budget := r.e.cfg.ReferenceBudget
	if budget <= 0 {
		return nil
	}
	seen := map[string]bool{target: true}
	for _, d := range deps {
		seen[d.Path] = true
	}
	var paths []string
	add := func(ps ...string) {
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		}
	}
	add(r.b.ContextPaths...)
	structure := r.projectStructure(ctx)
	add(siblings(structure, target)...)
	if path.Ext(target) == ".go" {
		add(r.goImports(ctx, structure, target, content)...)
	}
	ws := r.workspace()
	var out []*aiv1.ContextFile
	for _, p := range paths {
		if len(out) == maxReferenceFiles || budget <= 0 {
			break
		}
		o := ws.outline(ctx, p)
		if o == "" {
			continue
		}
		if n := ws.outlineTokens(p, o); n <= budget {
			out = append(out, &aiv1.ContextFile{Path: p, Content: o})
			budget -= n
			continue
		}
		if cut := cutTokens(o, budget); cut != "" {
			out = append(out, &aiv1.ContextFile{Path: p, Content: cut, Truncated: true})
		}
		break
	}
	return out
}

func (r *run) workspace() *workspace {
	if r.ws == nil {
		r.ws = newWorkspace(analysis.SandboxSource(r.e.sb, r.b.SandboxId))
	}
	return r.ws
}

// cutTokens is the longest run of s's first lines within n tokens ("" when not even the
// first line fits).
func cutTokens(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	lo, hi := 0, len(lines) // lines[:lo] fit; lines[:hi+1] do not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if tokens.Count(strings.TrimRight(strings.Join(lines[:mid], ""), "\n")) <= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return strings.TrimRight(strings.Join(lines[:lo], ""), "\n")
}

// siblings are the files of target's directory that a reader of it may need, in
// structure's (sorted) order: for Go the package's files (tests only for a test), for
// TypeScript/JavaScript and Python the files of the same language, for other files those
// with the same extension.
func siblings(structure []string, target string) []string {
	dir, ext := path.Dir(target), path.Ext(target)
	if ext == "" {
		return nil
	}
	test := strings.HasSuffix(target, "_test.go")
	var out []string
	for _, p := range structure {
		if p == target || path.Dir(p) != dir || family(path.Ext(p)) != family(ext) {
			continue
		}
		if ext == ".go" && !test && strings.HasSuffix(p, "_test.go") {
			continue
		}
		out = append(out, p)
	}
	return out
}

// family groups the extensions of one language.
func family(ext string) string {
	switch ext {
	case ".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs":
		return ".js"
	case ".py", ".pyi":
		return ".py"
	}
	return ext
}

// goImports are the non-test .go files of the module-local packages content imports (the
// packages of target's own module, other than target's own), in import order.
func (r *run) goImports(ctx context.Context, structure []string, target, content string) []string {
	if content == "" {
		return nil
	}
	mods := map[string]bool{} // directories holding a go.mod ("." for the root)
	byDir := map[string][]string{}
	for _, p := range structure {
		switch {
		case path.Base(p) == "go.mod":
			mods[path.Dir(p)] = true
		case path.Ext(p) == ".go" && !strings.HasSuffix(p, "_test.go"):
			byDir[path.Dir(p)] = append(byDir[path.Dir(p)], p)
		}
	}
	root, ok := moduleRoot(mods, path.Dir(target))
	if !ok {
		return nil
	}
	gomod, ok := r.workspace().read(ctx, path.Join(root, "go.mod"))
	if !ok {
		return nil
	}
	var out []string
	for _, dir := range depgraph.LocalImportDirs(nil, target, content, root, depgraph.ModulePath(gomod)) {
		if r, ok := moduleRoot(mods, dir); !ok || r != root || dir == path.Dir(target) {
			continue // a nested module's, or target's own package
		}
		out = append(out, byDir[dir]...)
	}
	return out
}

// moduleRoot is the nearest directory at or above dir holding a go.mod.
func moduleRoot(mods map[string]bool, dir string) (string, bool) {
	for {
		if mods[dir] {
			return dir, true
		}
		if dir == "." || dir == "/" || dir == "" {
			return "", false
		}
		dir = path.Dir(dir)
	}
}

// Limits on the code under test a test's fix is shown.
const (
	maxRelated      = 3
	maxRelatedBytes = 64 << 10
)

// isTest reports a test file by its name: Go's _test.go, Python's test_*.py and *_test.py,
// and TypeScript/JavaScript's *.test.* and *.spec.*.
func isTest(p string) bool {
	base := path.Base(p)
	switch family(path.Ext(p)) {
	case ".go":
		return strings.HasSuffix(base, "_test.go")
	case ".py":
		return strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py")
	case ".js":
		return strings.Contains(base, ".test.") || strings.Contains(base, ".spec.")
	}
	return false
}

// subject is the name of the file a test file tests, by convention ("calc" for
// calc_test.go, test_calc.py, calc.test.ts), or "".
func subject(p string) string {
	base := strings.TrimSuffix(path.Base(p), path.Ext(p))
	for _, cut := range []string{"_test", ".test", ".spec"} {
		base = strings.TrimSuffix(base, cut)
	}
	return strings.TrimPrefix(base, "test_")
}

// codeUnderTest are the files whose code a failing test in target may be failing on, which
// its fix may change too: for a test file, the non-test files of its directory in its
// language, the one its name names first — at most maxRelated, each cut to
// maxRelatedBytes. None for a file that is not a test.
func (r *run) codeUnderTest(ctx context.Context, target string) []*aiv1.ContextFile {
	if !isTest(target) {
		return nil
	}
	var cands []string
	for _, p := range siblings(r.projectStructure(ctx), target) {
		if !isTest(p) {
			cands = append(cands, p)
		}
	}
	name := subject(target)
	slices.SortStableFunc(cands, func(a, b string) int {
		am, bm := strings.TrimSuffix(path.Base(a), path.Ext(a)) == name, strings.TrimSuffix(path.Base(b), path.Ext(b)) == name
		switch {
		case am && !bm:
			return -1
		case bm && !am:
			return 1
		}
		return 0
	})
	var out []*aiv1.ContextFile
	for _, p := range cands {
		if len(out) == maxRelated {
			break
		}
		c, ok := r.workspace().read(ctx, p)
		if !ok {
			continue
		}
		f := &aiv1.ContextFile{Path: p, Content: c}
		if len(c) > maxRelatedBytes {
			f.Content, f.Truncated = cutTokens(c, maxRelatedBytes/4), true
		}
		out = append(out, f)
	}
	return out
}
