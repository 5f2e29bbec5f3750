package relevance

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestTerms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want []string
	}{
		{"parseHTTPRequest", []string{"pars", "http", "request"}},
		{"user_id-list", []string{"user", "id", "list"}},
		{"base64Encode utf8", []string{"base64", "encod", "utf8"}},
		{"userIDs HTTPServer", []string{"user", "ids", "http", "server"}},
		{"The server and the client of a pool", []string{"server", "client", "pool"}},
		{"x = y + 42 * 0x1f", nil},
		{"parse parses parsed parsing", []string{"pars"}},
		{"entry entries", []string{"entry"}},
		{"running runs run", []string{"run"}},
		{"calling calls called", []string{"call"}},
		{"matches matching match", []string{"match"}},
		{"status process", []string{"status", "process"}},
		{"stopped stopping", []string{"stop"}},
	}
	for _, c := range cases {
		if got := terms(c.in); !slices.Equal(got, c.want) {
			t.Errorf("terms(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestStem(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"connections": "connection", "handlers": "handler", "copies": "copy", "loading": "load",
		"added": "add", "used": "used", "use": "use", "bus": "bus", "class": "class",
		"logging": "log", "set": "set", "sets": "set", "setting": "set", "settings": "set",
	}
	for in, want := range cases {
		if got := string(stem([]byte(in))); got != want {
			t.Errorf("stem(%q) = %q, want %q", in, got, want)
		}
	}
}

// build indexes a map of path → content.
func build(files map[string]string) *Index {
	var fs []File
	for p, c := range files {
		fs = append(fs, File{Path: p, Content: c})
	}
	slices.SortFunc(fs, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return Build(fs)
}

func (ix *Index) signalOf(t *testing.T, task string) (signals, func(path string) int) {
	t.Helper()
	s := ix.score(ix.queryTerms(task))
	return s, func(p string) int {
		i, ok := ix.byPath[p]
		if !ok {
			t.Fatalf("%s not indexed", p)
		}
		return int(i)
	}
}

func paths(rs []Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Path)
	}
	return out
}

func find(rs []Result, p string) (Result, int) {
	for k, r := range rs {
		if r.Path == p {
			return r, k
		}
	}
	return Result{}, -1
}

// filler is neutral prose that matches no query of these tests.
func filler(n int) string {
	return strings.Repeat("lorem ipsum dolor sit amet consectetur adipiscing elit\n", n)
}

func TestBM25Ordering(t *testing.T) {
	t.Parallel()
	ix := build(map[string]string{
		"a.txt": "widget widget widget widget\n" + filler(4),
		"b.txt": "widget\n" + filler(4),
		"c.txt": "widget\n" + filler(40), // same tf as b, much longer
		"d.txt": filler(4),
		"e.txt": "gadget gizmo\n" + filler(4),
	})
	s, at := ix.signalOf(t, "a widget")
	if !(s.bm25[at("a.txt")] > s.bm25[at("b.txt")] && s.bm25[at("b.txt")] > s.bm25[at("c.txt")] && s.bm25[at("c.txt")] > 0) {
		t.Errorf("BM25 a=%v b=%v c=%v, want a > b > c > 0", s.bm25[at("a.txt")], s.bm25[at("b.txt")], s.bm25[at("c.txt")])
	}
	if s.bm25[at("d.txt")] != 0 || s.bm25[at("e.txt")] != 0 {
		t.Errorf("BM25 of files without the term: d=%v e=%v, want 0", s.bm25[at("d.txt")], s.bm25[at("e.txt")])
	}
	// A rare term outweighs a common one.
	s, at = ix.signalOf(t, "widget gizmo")
	if s.bm25[at("e.txt")] <= s.bm25[at("b.txt")] {
		t.Errorf("rare 'gizmo' (e=%v) should beat common 'widget' once (b=%v)", s.bm25[at("e.txt")], s.bm25[at("b.txt")])
	}
	rs, _ := ix.Rank(Query{Task: "widget", TokenBudget: 1000, MaxFiles: 10})
	if got, want := paths(rs), []string{"a.txt", "b.txt", "c.txt"}; !slices.Equal(got, want) {
		t.Errorf("Rank = %v, want %v", got, want)
	}
	if rs[0].Score != 1 || rs[1].Score >= 1 {
		t.Errorf("scores %v, %v: want the best 1 and the next below", rs[0].Score, rs[1].Score)
	}
}

func TestDefinitionsOutweighOccurrences(t *testing.T) {
	t.Parallel()
	ix := build(map[string]string{
		"widget/make.go": "package widget\n\n// NewFrobnicator returns one.\nfunc NewFrobnicator() *Frobnicator { return &Frobnicator{} }\n\ntype Frobnicator struct{}\n",
		"cmd/use.go":     "package main\n\nfunc main() {\n\tf := widget.NewFrobnicator()\n\tf = widget.NewFrobnicator()\n\tf = widget.NewFrobnicator()\n\t_ = f // frobnicator frobnicator frobnicator frobnicator\n}\n",
	})
	s, at := ix.signalOf(t, "create a frobnicator")
	if s.defs[at("widget/make.go")] != 1 || s.defs[at("cmd/use.go")] != 0 {
		t.Errorf("defs: make.go %v, use.go %v; want 1 and 0", s.defs[at("widget/make.go")], s.defs[at("cmd/use.go")])
	}
	if s.bm25[at("cmd/use.go")] <= s.bm25[at("widget/make.go")] {
		t.Errorf("the caller mentions the word more often: BM25 use.go %v, make.go %v", s.bm25[at("cmd/use.go")], s.bm25[at("widget/make.go")])
	}
	rs, _ := ix.Rank(Query{Task: "create a frobnicator", TokenBudget: 1000, MaxFiles: 10})
	if len(rs) == 0 || rs[0].Path != "widget/make.go" {
		t.Fatalf("Rank = %v, want widget/make.go first", paths(rs))
	}
	if !strings.Contains(rs[0].Reason, "defines Frobnicator") || !strings.Contains(rs[0].Reason, "frobnicator") {
		t.Errorf("reason %q should name the definition and the word", rs[0].Reason)
	}
}

func TestDefinitionsPerLanguage(t *testing.T) {
	t.Parallel()
	ix := build(map[string]string{
		"a.go":   "package a\n\nfunc (s *Server) Serve() {}\nfunc Listen() {}\ntype Config struct{}\nconst Port = 1\nvar (\n\tHost, _ = \"h\", 2\n)\n",
		"b.ts":   "export function parseConfig(s: string) {}\nexport class Loader {\n  async loadAll(x: number): Promise<void> {\n    if (x) {\n    }\n  }\n}\ninterface Opts {}\ntype Mode = 'a' | 'b'\nexport const DEFAULT_PORT = 8080\nconst helper = () => 1\nexport default function () {}\n",
		"c.py":   "class Parser:\n    def parse_line(self, line):\n        pass\n\nasync def fetch_all():\n    pass\n",
		"d.rs":   "pub struct Token;\npub(crate) enum Kind { A }\npub trait Lexer {}\npub async fn lex_all() {}\nfn helper() {}\nimpl Lexer for Token {}\n",
		"E.java": "public class Engine {\n    public static void startEngine(String[] args) {\n        if (x) {}\n    }\n    private int count() { return 1; }\n}\n",
		"f.kt":   "data class Point(val x: Int)\nfun distanceTo(p: Point): Double = 0.0\n",
		"g.cs":   "public sealed class Cache {\n    public async Task<int> GetValue(string key) { return 0; }\n}\n",
	})
	want := map[string][]string{
		"a.go":   {"Server.Serve", "Listen", "Config", "Port", "Host"},
		"b.ts":   {"parseConfig", "Loader", "loadAll", "Opts", "Mode", "DEFAULT_PORT", "helper"},
		"c.py":   {"Parser", "parse_line", "fetch_all"},
		"d.rs":   {"Token", "Kind", "Lexer", "lex_all", "helper"},
		"E.java": {"Engine", "startEngine", "count"},
		"f.kt":   {"Point", "distanceTo"},
		"g.cs":   {"Cache", "GetValue"},
	}
	for p, names := range want {
		var got []string
		for _, s := range ix.docs[ix.byPath[p]].symbols {
			got = append(got, s.name)
		}
		if !slices.Equal(got, names) {
			t.Errorf("%s defines %q, want %q", p, got, names)
		}
	}
}

func TestPathSignal(t *testing.T) {
	t.Parallel()
	ix := build(map[string]string{
		"billing/other.go": "package billing\n",
		"other/billing.go": "package other\n",
		"misc/misc.go":     "package misc\n",
	})
	s, at := ix.signalOf(t, "billing")
	if !(s.path[at("other/billing.go")] > s.path[at("billing/other.go")] && s.path[at("billing/other.go")] > 0) {
		t.Errorf("path: file name %v, directory %v; want file name > directory > 0", s.path[at("other/billing.go")], s.path[at("billing/other.go")])
	}
	if s.path[at("misc/misc.go")] != 0 {
		t.Errorf("path of misc/misc.go = %v, want 0", s.path[at("misc/misc.go")])
	}
	rs, _ := ix.Rank(Query{Task: "billing", TokenBudget: 100, MaxFiles: 5})
	if r, _ := find(rs, "other/billing.go"); !strings.Contains(r.Reason, "path matches 'billing'") {
		t.Errorf("reason %q should say the path matches", r.Reason)
	}
}

func TestPenalties(t *testing.T) {
	t.Parallel()
	body := "package q\n\n// Quux handles quux requests.\nfunc Quux() {}\n"
	ix := build(map[string]string{
		"q/quux.go":              body,
		"q/quux_test.go":         body,
		"q/zz_generated.go":      "// Code generated by gen. DO NOT EDIT.\n\n" + body,
		"vendor/x/q/quux.go":     body,
		"node_modules/x/quux.ts": "export function Quux() {}\n",
	})
	rs, _ := ix.Rank(Query{Task: "quux requests", TokenBudget: 1000, MaxFiles: 10})
	if len(rs) != 5 {
		t.Fatalf("Rank = %v, want all five files (penalised, not excluded)", paths(rs))
	}
	if rs[0].Path != "q/quux.go" {
		t.Errorf("Rank = %v, want q/quux.go first", paths(rs))
	}
	for _, r := range rs[1:] {
		if r.Score >= rs[0].Score || !strings.Contains(r.Reason, "penalised") {
			t.Errorf("%s: score %v reason %q, want below %v and penalised", r.Path, r.Score, r.Reason, rs[0].Score)
		}
	}
}

func TestIncludePathsFirst(t *testing.T) {
	t.Parallel()
	ix := build(map[string]string{
		"a.go": "package a\n\nfunc Widget() {}\n",
		"b.go": "package a\n\n// widget widget\n",
		"z.md": "# unrelated notes\n",
	})
	rs, _ := ix.Rank(Query{Task: "widget", TokenBudget: 1000, MaxFiles: 3, IncludePaths: []string{"z.md", "missing.go", "z.md"}})
	if got, want := paths(rs), []string{"z.md", "a.go", "b.go"}; !slices.Equal(got, want) {
		t.Fatalf("Rank = %v, want %v", got, want)
	}
	if !strings.HasPrefix(rs[0].Reason, "requested") {
		t.Errorf("reason %q, want it to say the file was requested", rs[0].Reason)
	}
	rs, _ = ix.Rank(Query{Task: "widget", TokenBudget: 1000, MaxFiles: 1, IncludePaths: []string{"z.md"}})
	if got := paths(rs); !slices.Equal(got, []string{"z.md"}) {
		t.Errorf("MaxFiles 1: Rank = %v, want only the requested file", got)
	}
}

// goModule is a small module with a nested module and a package that no query term reaches.
var goModule = map[string]string{
	"go.mod":                    "module example.com/app\n\ngo 1.22\n",
	"cmd/app/main.go":           "package main\n\nimport (\n\t\"example.com/app/internal/store\"\n\t\"fmt\"\n)\n\n// main frobnicates the ledger.\nfunc main() { fmt.Println(store.Open()) }\n",
	"internal/store/store.go":   "package store\n\n// Open opens the database.\nfunc Open() *DB { return &DB{} }\n",
	"internal/store/db.go":      "package store\n\ntype DB struct{}\n",
	"internal/store/db_test.go": "package store\n\nimport \"testing\"\n\nfunc TestDB(t *testing.T) {}\n",
	"internal/api/api.go":       "package api\n\nimport \"example.com/app/internal/store\"\n\nvar _ = store.Open\n",
	"internal/other/other.go":   "package other\n\n// Unrelated code.\nfunc Other() {}\n",
	"plugins/go.mod":            "module example.com/plugins\n",
	"plugins/foo/foo.go":        "package foo\n\nfunc Foo() {}\n",
	"plugins/bar/bar.go":        "package bar\n\nimport (\n\t\"example.com/plugins/foo\"\n\t\"example.com/app/plugins/foo\"\n)\n",
	"tools/tool.go":             "package tools\n\nimport _ \"example.com/app/plugins/foo\"\n",
}

func importsOf(ix *Index, p string) []string {
	var out []string
	for _, j := range ix.imports[ix.byPath[p]] {
		out = append(out, ix.docs[j].path)
	}
	slices.Sort(out)
	return out
}

func TestGoImports(t *testing.T) {
	t.Parallel()
	ix := build(goModule)
	cases := map[string][]string{
		"cmd/app/main.go":     {"internal/store/db.go", "internal/store/store.go"}, // not the test file
		"internal/api/api.go": {"internal/store/db.go", "internal/store/store.go"},
		"plugins/bar/bar.go":  {"plugins/foo/foo.go"}, // via the nested module's own path only
		"tools/tool.go":       nil,                    // plugins/foo belongs to example.com/plugins
	}
	for p, want := range cases {
		if got := importsOf(ix, p); !slices.Equal(got, want) {
			t.Errorf("%s imports %v, want %v", p, got, want)
		}
	}
}

func TestImportGraphBoost(t *testing.T) {
	t.Parallel()
	ix := build(goModule)
	rs, _ := ix.Rank(Query{Task: "frobnicate the ledger", TokenBudget: 1000, MaxFiles: 4})
	if len(rs) < 3 || rs[0].Path != "cmd/app/main.go" {
		t.Fatalf("Rank = %v, want cmd/app/main.go first", paths(rs))
	}
	s, at := ix.signalOf(t, "frobnicate the ledger")
	for _, p := range []string{"internal/store/store.go", "internal/store/db.go"} {
		if s.base[at(p)] != 0 {
			t.Fatalf("%s has base score %v; the test needs it to match nothing", p, s.base[at(p)])
		}
		r, k := find(rs, p)
		if k < 0 {
			t.Errorf("%s (imported by the top file) missing from %v", p, paths(rs))
			continue
		}
		if !strings.Contains(r.Reason, "imported by cmd/app/main.go") || r.Score <= 0 {
			t.Errorf("%s: reason %q score %v, want 'imported by cmd/app/main.go' and a positive score", p, r.Reason, r.Score)
		}
	}
	if _, k := find(rs, "internal/other/other.go"); k >= 0 {
		t.Errorf("internal/other/other.go is unrelated but was returned: %v", paths(rs))
	}

	// The other direction: requesting store.go lifts the files importing it.
	rs, _ = ix.Rank(Query{Task: "nothing matches this", TokenBudget: 1000, MaxFiles: 5, IncludePaths: []string{"internal/store/store.go"}})
	r, k := find(rs, "internal/api/api.go")
	if k < 0 || !strings.Contains(r.Reason, "imports internal/store/store.go") {
		t.Errorf("Rank = %v; api.go reason %q, want 'imports internal/store/store.go'", paths(rs), r.Reason)
	}
}

func TestJSAndPythonImports(t *testing.T) {
	t.Parallel()
	ix := build(map[string]string{
		"web/src/app.ts":        "import { a } from './util'\nimport type { B } from \"./lib\"\nimport {\n  c,\n  d,\n} from '../shared/x.js'\nconst e = require('./legacy')\nimport('./lazy').then()\nimport React from 'react'\n",
		"web/src/util.ts":       "export const a = 1\n",
		"web/src/lib/index.tsx": "export type B = 1\n",
		"web/shared/x.ts":       "export const c = 1, d = 2\n",
		"web/src/legacy.js":     "module.exports = {}\n",
		"web/src/lazy.mjs":      "export default 1\n",
		"pkg/__init__.py":       "",
		"pkg/a.py":              "from .b import thing\nfrom . import c\nimport pkg.sub.mod\nfrom pkg import sub\nimport os, json\n",
		"pkg/b.py":              "thing = 1\n",
		"pkg/c.py":              "",
		"pkg/sub/__init__.py":   "",
		"pkg/sub/mod.py":        "from ..b import thing\n",
		"src/lib/x.py":          "from lib import y\n",
		"src/lib/y.py":          "",
		"src/lib/__init__.py":   "",
	})
	cases := map[string][]string{
		"web/src/app.ts": {"web/shared/x.ts", "web/src/lazy.mjs", "web/src/legacy.js", "web/src/lib/index.tsx", "web/src/util.ts"},
		"pkg/a.py":       {"pkg/__init__.py", "pkg/b.py", "pkg/c.py", "pkg/sub/__init__.py", "pkg/sub/mod.py"},
		"pkg/sub/mod.py": {"pkg/b.py"},
		"src/lib/x.py":   {"src/lib/__init__.py", "src/lib/y.py"},
	}
	for p, want := range cases {
		if got := importsOf(ix, p); !slices.Equal(got, want) {
			t.Errorf("%s imports %v, want %v", p, got, want)
		}
	}
}

// realFiles loads $GOROOT/src/net/http without testdata and files over 60 KB: real code of
// many sizes, small enough for token counting under the race detector.
func realFiles(t *testing.T) []File {
	t.Helper()
	root := filepath.Join(runtime.GOROOT(), "src", "net", "http")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("no Go source tree: %v", err)
	}
	var out []File
	for _, f := range loadTree(t, root) {
		if !strings.Contains(f.Path, "testdata/") && len(f.Content) <= 60<<10 {
			out = append(out, f)
		}
	}
	return out
}

func TestBudgetNeverExceeded(t *testing.T) {
	t.Parallel()
	files := realFiles(t)
	ix := Build(files)
	content := map[string]string{}
	for _, f := range files {
		content[f.Path] = f.Content
	}
	tasks := []string{
		"The server should close idle keep-alive connections on Shutdown",
		"cookie jar: parse Set-Cookie headers with an expiry date",
		"reverse proxy rewrites the request URL and forwards X-Forwarded-For",
	}
	for _, budget := range []int{1, 10, 100, 1000, 50000} {
		for _, task := range tasks {
			rs, used := ix.Rank(Query{Task: task, TokenBudget: budget, MaxFiles: 25})
			if len(rs) == 0 {
				t.Fatalf("budget %d, %q: no results", budget, task)
			}
			checkBudget(t, rs, used, budget, true)
			kinds := map[Inclusion]int{}
			for _, r := range rs {
				kinds[r.Inclusion]++
				full := content[r.Path]
				switch r.Inclusion {
				case InclusionWhole:
					if r.Content != full || r.ContentTokens != r.Tokens || r.Tokens*4 > budget {
						t.Errorf("budget %d: %s whole with %d of %d tokens", budget, r.Path, r.ContentTokens, r.Tokens)
					}
				case InclusionOutline:
					if r.ContentTokens*2 > budget {
						t.Errorf("budget %d: outline of %s takes %d tokens, more than half", budget, r.Path, r.ContentTokens)
					}
					if strings.HasPrefix(full, r.Content) && !strings.HasSuffix(r.Content, "\n") && r.Content != full {
						t.Errorf("budget %d: %s cut mid-line", budget, r.Path)
					}
				case InclusionNone:
					if r.Content != "" || r.ContentTokens != 0 {
						t.Errorf("budget %d: %s listed with content", budget, r.Path)
					}
				}
			}
			if budget == 50000 && kinds[InclusionWhole] == 0 {
				t.Errorf("budget %d, %q: no whole file among %v", budget, task, kinds)
			}
			if budget >= 1000 && used < budget/4 {
				t.Errorf("budget %d, %q: only %d tokens used", budget, task, used)
			}
		}
	}
}

// bigGoFile is a Go file with doc comments and bodies that each carry a marker.
func bigGoFile(n int) string {
	var b strings.Builder
	b.WriteString("// Package big is big.\npackage big\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n)\n\n")
	b.WriteString("// Limit bounds things.\nconst Limit = 10\n\n")
	b.WriteString("var table = []string{\"" + strings.Repeat("x", 200) + "\"}\n\n")
	b.WriteString("// Thing is a thing.\ntype Thing struct {\n\t// Name names it.\n\tName string\n}\n\n")
	for i := range n {
		fmt.Fprintf(&b, "// Do%d does step %d of the work.\nfunc (t *Thing) Do%d(x int, s string) (int, error) {\n", i, i, i)
		for j := range 8 {
			fmt.Fprintf(&b, "\tfmt.Println(\"BODY_MARKER %d %d\", strings.ToUpper(s), x+%d)\n", i, j, j)
		}
		b.WriteString("\treturn x, nil\n}\n\n")
	}
	return b.String()
}

func TestGoOutline(t *testing.T) {
	t.Parallel()
	src := bigGoFile(60)
	out, ok := goOutline("big.go", src, true)
	if !ok {
		t.Fatal("no outline")
	}
	for _, want := range []string{
		"// Package big is big.\npackage big\n", "import (", "\"strings\"",
		"// Limit bounds things.\nconst Limit = 10", "var table = ...",
		"// Thing is a thing.\ntype Thing struct {", "// Name names it.",
		"// Do0 does step 0 of the work.\nfunc (t *Thing) Do0(x int, s string) (int, error)\n",
		"func (t *Thing) Do59(x int, s string) (int, error)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("outline lacks %q", want)
		}
	}
	if strings.Contains(out, "BODY_MARKER") || strings.Contains(out, "return x") {
		t.Error("outline contains a function body")
	}
	compact, _ := goOutline("big.go", src, false)
	if strings.Contains(compact, "does step") || !strings.Contains(compact, "func (t *Thing) Do7(x int, s string) (int, error)") {
		t.Errorf("compact outline should keep signatures and drop comments:\n%.300s", compact)
	}

	// Through Rank: too big for the budget whole, so it comes as an outline.
	ix := Build([]File{{Path: "big/big.go", Content: src}})
	o := ix.outlineOf(0)
	if o.compactTok >= o.fullTok || o.fullTok >= ix.tokenCount(0) {
		t.Fatalf("outline sizes: compact %d, full %d, file %d", o.compactTok, o.fullTok, ix.tokenCount(0))
	}
	budget := 2 * o.fullTok
	rs, used := ix.Rank(Query{Task: "thing work step", TokenBudget: budget, MaxFiles: 1})
	checkBudget(t, rs, used, budget, true)
	if len(rs) != 1 || rs[0].Inclusion != InclusionOutline || rs[0].Content != o.full {
		t.Fatalf("budget %d: got %v, want the full outline", budget, rs[0].Inclusion)
	}
	if !strings.Contains(rs[0].Content, "func (t *Thing) Do42(") || strings.Contains(rs[0].Content, "BODY_MARKER") {
		t.Error("Rank's outline should have signatures without bodies")
	}
	// A budget whose half holds the compact outline but not the full one.
	budget = 2*o.compactTok + 1
	rs, used = ix.Rank(Query{Task: "thing work step", TokenBudget: budget, MaxFiles: 1})
	checkBudget(t, rs, used, budget, true)
	if rs[0].Inclusion != InclusionOutline || rs[0].Content != o.compact {
		t.Errorf("budget %d: inclusion %v, want the compact outline", budget, rs[0].Inclusion)
	}
	// Less than that: listed only.
	budget = 2*o.compactTok - 2
	rs, used = ix.Rank(Query{Task: "thing work step", TokenBudget: budget, MaxFiles: 1})
	checkBudget(t, rs, used, budget, true)
	if rs[0].Inclusion != InclusionNone {
		t.Errorf("budget %d: inclusion %v, want none", budget, rs[0].Inclusion)
	}
}

func TestLineOutlines(t *testing.T) {
	t.Parallel()
	py := "#!/usr/bin/env python3\n\"\"\"Parse configuration files.\n\nMore words.\n\"\"\"\nimport os\n\n\nclass Config:\n    \"\"\"A config.\"\"\"\n\n    def load(self, path):\n        return open(path).read()  # BODY\n\n\ndef parse(text):\n    return text.split()  # BODY\n"
	got := lineOutline(langPython, py, true)
	want := "\"\"\"Parse configuration files.\n\nMore words.\n\"\"\"\n\n9: class Config:\n12:     def load(self, path):\n16: def parse(text):\n"
	if got != want {
		t.Errorf("python outline:\n%s\nwant:\n%s", got, want)
	}
	ts := "// Copyright 2024 Someone.\n// Widgets.\n\nimport { x } from './x'\n\nexport interface Widget {\n  name: string\n}\n\nexport class Box {\n  open(): void {\n    x() // BODY\n  }\n}\n\nexport const make = (n: number) => {\n  return n // BODY\n}\n"
	got = lineOutline(langJS, ts, true)
	want = "// Copyright 2024 Someone.\n// Widgets.\n\n6: export interface Widget {\n10: export class Box {\n11:   open(): void {\n16: export const make = (n: number) => {\n"
	if got != want {
		t.Errorf("ts outline:\n%s\nwant:\n%s", got, want)
	}
	if got := lineOutline(langJS, ts, false); strings.Contains(got, "Copyright") || !strings.HasPrefix(got, "6: export interface") {
		t.Errorf("compact ts outline:\n%s", got)
	}
}

func TestFirstLinesFallback(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, "Line %d of a long document without definitions.\n", i)
	}
	doc := b.String()
	ix := Build([]File{{Path: "NOTES.md", Content: doc}})
	for _, budget := range []int{1, 10, 100, 1000} {
		rs, used := ix.Rank(Query{Task: "long document", TokenBudget: budget, MaxFiles: 1})
		checkBudget(t, rs, used, budget, true)
		r := rs[0]
		if budget < 20 {
			if r.Inclusion != InclusionNone {
				t.Errorf("budget %d: inclusion %v, want none (not even one line fits half the budget)", budget, r.Inclusion)
			}
			continue
		}
		if r.Inclusion != InclusionOutline || !strings.HasPrefix(doc, r.Content) || !strings.HasSuffix(r.Content, "\n") || r.ContentTokens*2 > budget {
			t.Errorf("budget %d: inclusion %v, %d tokens, content %q…", budget, r.Inclusion, r.ContentTokens, r.Content[:min(40, len(r.Content))])
		}
	}
}

func TestDeterministicAndConcurrent(t *testing.T) {
	t.Parallel()
	files := realFiles(t)
	q := Query{Task: "transport dial timeout with proxy CONNECT", TokenBudget: 8000, MaxFiles: 15}
	want, wantUsed := Build(files).Rank(q)
	reversed := slices.Clone(files)
	slices.Reverse(reversed)
	ix := Build(reversed)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, used := ix.Rank(q)
			if used != wantUsed || !reflect.DeepEqual(got, want) {
				t.Errorf("goroutine %d: ranking differs from a fresh index's:\n%v\n%v", g, paths(got), paths(want))
			}
		}()
	}
	wg.Wait()
}

func TestEmptyAndDegenerate(t *testing.T) {
	t.Parallel()
	if rs, used := Build(nil).Rank(Query{Task: "x", TokenBudget: 10, MaxFiles: 5}); rs != nil || used != 0 {
		t.Errorf("empty index: %v %d", rs, used)
	}
	ix := build(map[string]string{"a.go": "package a\n", "b.go": "package a // widget\n", "a.go2": ""})
	if ix.Len() != 3 {
		t.Errorf("Len = %d, want 3", ix.Len())
	}
	if rs, _ := ix.Rank(Query{Task: "widget", TokenBudget: 10, MaxFiles: 0}); rs != nil {
		t.Errorf("MaxFiles 0: %v", rs)
	}
	if rs, _ := ix.Rank(Query{Task: "", TokenBudget: 10, MaxFiles: 5}); len(rs) != 0 {
		t.Errorf("empty task: %v", paths(rs))
	}
	dup := Build([]File{{Path: "a", Content: "first"}, {Path: "a", Content: "second"}})
	if dup.Len() != 1 || dup.docs[0].content != "first" {
		t.Errorf("duplicate paths: Len %d, content %q", dup.Len(), dup.docs[0].content)
	}
}
