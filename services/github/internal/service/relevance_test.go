package service_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/testenv"
	"github.com/thefold/thefold/pkg/tokens"
)

// push makes a repository of the local forge hold the files of dir, pushed with plain git
// as a person would.
func (e *env) push(t testing.TB, repo, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.SkipOrFail(t, "git is not installed")
	}
	if _, err := e.client.CreateRepo(e.alice, &githubv1.CreateRepoRequest{Repo: repo}); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "work")
	if err := os.CopyFS(work, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, work, "init", "--quiet", "--initial-branch=main")
	gitCLI(t, work, "add", "-A", "-f", ".")
	gitCLI(t, work, "-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "--quiet", "-m", "import")
	gitCLI(t, work, "push", "--quiet", e.local.Dir(repo), "main")
}

// moduleDir is a module of the module cache that this module depends on.
func moduleDir(t testing.TB, path string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		_ = exec.Command("go", "mod", "download", path).Run()
		out, _ = exec.Command("go", "list", "-m", "-f", "{{.Dir}}", path).Output()
		dir = strings.TrimSpace(string(out))
	}
	if dir == "" {
		testenv.SkipOrFail(t, "%s is not in the module cache", path)
	}
	return dir
}

// FindRelevantFiles over gRPC on a real repository (google.golang.org/grpc from the module
// cache, pushed to the local forge): for queries written from a function's doc comment
// (without its name), the file that defines it is among those returned; the budget is never
// exceeded, and every included content is counted with the real tokenizer.
func TestFindRelevantFilesOnARealRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes a real repository")
	}
	testenv.CPUBound(t)
	t.Parallel()
	e := start(t)
	dir := moduleDir(t, "google.golang.org/grpc")
	e.push(t, "local/grpc", dir)

	type query struct{ file, name, text string }
	var all []query
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") ||
			strings.Contains(p, "/testdata/") || strings.HasSuffix(p, ".pb.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ParseComments)
		if err != nil {
			return nil
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Doc == nil || len(strings.Fields(fd.Doc.Text())) < 10 {
				continue
			}
			name := regexp.MustCompile(`\b` + regexp.QuoteMeta(fd.Name.Name) + `\b`)
			rel, _ := filepath.Rel(dir, p)
			all = append(all, query{file: filepath.ToSlash(rel), name: fd.Name.Name, text: strings.Join(strings.Fields(name.ReplaceAllString(fd.Doc.Text(), " ")), " ")})
		}
		return nil
	})
	const n = 15
	if len(all) < n {
		t.Fatalf("only %d documented functions in %s", len(all), dir)
	}
	hits := 0
	for i := range n {
		q := all[i*len(all)/n]
		budget := int32(8000 + 4000*i)
		// Each call has a deadline of its own (e.alice's 30 s run from the test's start, and the
		// first call indexes the whole repository, which on a loaded machine takes a while).
		resp, err := e.client.FindRelevantFiles(e.grpc.Context(t, "alice"), &githubv1.FindRelevantFilesRequest{Repo: "local/grpc", Task: q.text, TokenBudget: budget, MaxFiles: 20})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetTokensUsed() > budget || resp.GetTokenizer() != tokens.Name() || resp.GetFilesConsidered() < 500 {
			t.Fatalf("budget %d, used %d, tokenizer %q, considered %d", budget, resp.GetTokensUsed(), resp.GetTokenizer(), resp.GetFilesConsidered())
		}
		sum := int32(0)
		found := false
		for _, f := range resp.GetFiles() {
			sum += f.GetContentTokens()
			if f.GetContentIncluded() != (f.GetInclusion() != githubv1.RelevantFileInclusion_RELEVANT_FILE_INCLUSION_NONE) || f.GetReason() == "" {
				t.Fatalf("%s: inclusion %v, content_included %v, reason %q", f.GetPath(), f.GetInclusion(), f.GetContentIncluded(), f.GetReason())
			}
			if f.GetContentIncluded() && int32(tokens.Count(f.GetContent())) != f.GetContentTokens() {
				t.Fatalf("%s: content_tokens %d, counted %d", f.GetPath(), f.GetContentTokens(), tokens.Count(f.GetContent()))
			}
			found = found || f.GetPath() == q.file
		}
		if sum != resp.GetTokensUsed() {
			t.Fatalf("content tokens sum to %d, tokens_used %d", sum, resp.GetTokensUsed())
		}
		if found {
			hits++
		} else {
			t.Logf("miss: %s (%s) for %q", q.file, q.name, q.text)
		}
	}
	t.Logf("defining file returned for %d of %d doc-comment queries", hits, n)
	if hits*10 < n*9 {
		t.Fatalf("defining file returned for %d of %d queries, want at least 90%%", hits, n)
	}
}

// BenchmarkGetTreeAndFindRelevantFiles reads the tree of, and ranks files in, the Go
// standard library's source (several thousand files) pushed to the local forge, and prints
// the times and token counts.
func BenchmarkGetTreeAndFindRelevantFiles(b *testing.B) {
	e := start(b)
	src := filepath.Join(runtime.GOROOT(), "src")
	e.push(b, "local/gosrc", src)
	task := "parse an HTTP request's multipart form body and limit the memory it uses for file uploads"

	t0 := time.Now()
	first, err := e.client.FindRelevantFiles(e.alice, &githubv1.FindRelevantFilesRequest{Repo: "local/gosrc", Task: task})
	if err != nil {
		b.Fatal(err)
	}
	cold := time.Since(t0)
	t0 = time.Now()
	tree, err := e.client.GetTree(e.alice, &githubv1.GetTreeRequest{Repo: "local/gosrc", PageSize: 10000})
	if err != nil {
		b.Fatal(err)
	}
	treeCold := time.Since(t0)
	b.ResetTimer()
	var used int32
	for b.Loop() {
		resp, err := e.client.FindRelevantFiles(e.alice, &githubv1.FindRelevantFilesRequest{Repo: "local/gosrc", Task: task})
		if err != nil {
			b.Fatal(err)
		}
		used = resp.GetTokensUsed()
		if _, err := e.client.GetTree(e.alice, &githubv1.GetTreeRequest{Repo: "local/gosrc", PageSize: 1000}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	top := ""
	for i, f := range first.GetFiles() {
		if i < 3 {
			top += fmt.Sprintf(" %s (%s)", f.GetPath(), strings.TrimPrefix(f.GetInclusion().String(), "RELEVANT_FILE_INCLUSION_"))
		}
	}
	b.ReportMetric(float64(first.GetFilesConsidered()), "files")
	b.ReportMetric(float64(used), "tokens/answer")
	fmt.Printf("github: %d files indexed; first FindRelevantFiles (archive + index + rank, cl100k_base) %s, then cached (rank + a 1,000-entry GetTree page) per op below; first GetTree page (%d entries, cold) %s; %d of %d tokens used; top:%s\n",
		first.GetFilesConsidered(), cold.Round(time.Millisecond), len(tree.GetEntries()), treeCold.Round(time.Millisecond), used, 30000, top)
}
