package relevance

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/thefold/thefold/pkg/testenv"
	"github.com/thefold/thefold/pkg/tokens"
)

// maxFileSize: larger files are not loaded (the service skips them too).
const maxFileSize = 1 << 20

// loadTree reads the text files under root: no hidden directories, nothing over 1 MB, no
// NUL bytes, valid UTF-8. Paths are relative and '/'-separated.
func loadTree(tb testing.TB, root string) []File {
	tb.Helper()
	var files []File
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if p != root && strings.HasPrefix(e.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil || info.Size() > maxFileSize {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, File{Path: filepath.ToSlash(rel), Content: string(data)})
		return nil
	})
	if err != nil {
		tb.Fatalf("loading %s: %v", root, err)
	}
	return files
}

// grpcDir finds google.golang.org/grpc in the module cache: through the go command (it is
// a dependency of this module), downloading it if needed, else by globbing GOMODCACHE.
func grpcDir(t *testing.T) string {
	t.Helper()
	list := func() string {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "google.golang.org/grpc").Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	dir := list()
	if dir == "" {
		_ = exec.Command("go", "mod", "download", "google.golang.org/grpc").Run()
		dir = list()
	}
	if dir == "" {
		if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
			matches, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "google.golang.org", "grpc@v*"))
			sort.Strings(matches)
			if len(matches) > 0 {
				dir = matches[len(matches)-1]
			}
		}
	}
	if dir == "" {
		testenv.SkipOrFail(t, "google.golang.org/grpc is not in the module cache and cannot be downloaded")
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		testenv.SkipOrFail(t, "google.golang.org/grpc at %s is unusable: %v", dir, err)
	}
	return dir
}

type docQuery struct {
	file, name, query string
}

// docQueries picks about n exported functions of non-test, non-generated, non-testdata Go
// files whose doc comment has at least 8 words, every k-th in (path, position) order. The
// query is the doc comment without the function's own name.
func docQueries(t *testing.T, files []File, n int) []docQuery {
	t.Helper()
	var all []docQuery
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, f := range sorted {
		if !strings.HasSuffix(f.Path, ".go") || isTestPath(f.Path) || isVendoredPath(f.Path) || isGenerated(langGo, f.Content) {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f.Path, f.Content, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Doc == nil {
				continue
			}
			text := fd.Doc.Text()
			if len(strings.Fields(text)) < 8 {
				continue
			}
			name := regexp.MustCompile(`\b` + regexp.QuoteMeta(fd.Name.Name) + `\b`)
			q := strings.Join(strings.Fields(name.ReplaceAllString(text, " ")), " ")
			all = append(all, docQuery{file: f.Path, name: fd.Name.Name, query: q})
		}
	}
	if len(all) < n {
		t.Fatalf("only %d documented exported functions, want at least %d", len(all), n)
	}
	k := len(all) / n
	var out []docQuery
	for i := 0; i < n; i++ {
		out = append(out, all[i*k])
	}
	return out
}

// TestRealRepositoryGRPC ranks google.golang.org/grpc for queries made of the doc comments
// of its own functions (without the function's name) and requires the defining file among
// the 20 results for at least 90% of them.
func TestRealRepositoryGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a real repository")
	}
	testenv.CPUBound(t)
	dir := grpcDir(t)
	files := loadTree(t, dir)
	ix := Build(files)
	t.Logf("indexed %d files of %s", ix.Len(), dir)

	const budget = 30000
	queries := docQueries(t, files, 20)
	hits := 0
	for _, dq := range queries {
		results, used := ix.Rank(Query{Task: dq.query, TokenBudget: budget, MaxFiles: 20})
		checkBudget(t, results, used, budget, false)
		rank := -1
		for k, r := range results {
			if r.Path == dq.file {
				rank = k
				break
			}
		}
		if rank >= 0 {
			hits++
			t.Logf("hit  #%-2d %s (%s): %s", rank+1, dq.file, dq.name, results[rank].Reason)
		} else {
			top := ""
			if len(results) > 0 {
				top = results[0].Path
			}
			t.Logf("miss     %s (%s), top %s; query %q", dq.file, dq.name, top, dq.query)
		}
	}
	rate := float64(hits) / float64(len(queries))
	t.Logf("hit rate %d/%d = %.0f%%", hits, len(queries), 100*rate)
	if rate < 0.9 {
		t.Errorf("hit rate %.0f%%, want at least 90%%", 100*rate)
	}
}

// checkBudget asserts the budget invariants of one Rank answer; with recount, it also
// counts every Content again to check ContentTokens.
func checkBudget(t *testing.T, results []Result, used, budget int, recount bool) {
	t.Helper()
	sum := 0
	for _, r := range results {
		sum += r.ContentTokens
		if (r.Inclusion == InclusionNone) != (r.Content == "" && r.ContentTokens == 0) && r.Tokens > 0 {
			t.Errorf("%s: inclusion %v with %d content tokens", r.Path, r.Inclusion, r.ContentTokens)
		}
		if recount && r.Content != "" {
			if got := tokens.Count(r.Content); got != r.ContentTokens {
				t.Errorf("%s: ContentTokens %d, counted %d", r.Path, r.ContentTokens, got)
			}
		}
	}
	if sum != used {
		t.Errorf("tokensUsed %d, sum of ContentTokens %d", used, sum)
	}
	if used > budget {
		t.Errorf("tokensUsed %d exceeds budget %d", used, budget)
	}
}
