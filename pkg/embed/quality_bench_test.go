package embed

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/embed/internal/evalset"
)

// BenchmarkCodeDescription measures how well each local embedder finds a function from a
// description of it: exported functions' doc comments (their name removed) are the
// queries, the functions' source (signature and body, without the doc comment) the
// documents; recall@1, recall@10 and MRR@10 by exact cosine over all documents, in memory.
// Two corpora: google.golang.org/grpc at the version this module requires (from the module
// cache), and GOROOT's standard library, which no local@2 training or tuning ever read (the
// independent check). It also prints the share of non-zero vector components, which decides
// how well an HNSW graph over the vectors works. It prints figures and asserts nothing.
//
//	go test -run '^$' -bench CodeDescription -benchtime 1x ./embed/
func BenchmarkCodeDescription(b *testing.B) {
	const maxPairs, maxQueries = 5000, 1000
	trained, err := NewTrained(DefaultDims)
	if err != nil {
		b.Fatal(err)
	}
	embedders := []Embedder{NewLocal(DefaultDims), trained}

	corpora := []struct{ name, dir string }{}
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "google.golang.org/grpc").Output(); err == nil && len(out) > 1 {
		dir := strings.TrimSpace(string(out))
		corpora = append(corpora, struct{ name, dir string }{"google.golang.org/grpc (" + filepath.Base(dir) + ")", dir})
	}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil && len(out) > 1 {
		corpora = append(corpora, struct{ name, dir string }{"GOROOT std (independent check)", filepath.Join(strings.TrimSpace(string(out)), "src")})
	}
	b.ReportMetric(0, "ns/op")
	for _, c := range corpora {
		all := evalset.CodeDoc(c.dir, func(rel string) bool { return rel == "cmd" })
		pairs := evalset.Sample(all, maxPairs)
		if len(pairs) < 100 {
			b.Logf("%s: only %d functions with doc comments, skipped", c.name, len(pairs))
			continue
		}
		fmt.Printf("code↔description, %s: %d documented exported functions, %d kept, %d queries\n", c.name, len(all), len(pairs), min(maxQueries, len(pairs)))
		fmt.Printf("  %-9s %8s %9s %7s %9s %8s\n", "embedder", "recall@1", "recall@10", "MRR@10", "non-zero", "time")
		for _, e := range embedders {
			t0 := time.Now()
			s := evalset.Evaluate(e.Embed, pairs, maxQueries)
			fmt.Printf("  %-9s %8.3f %9.3f %7.3f %9.3f %8s\n", e.Version(), s.R1, s.R10, s.MRR, s.NonZero, time.Since(t0).Round(time.Millisecond))
			b.ReportMetric(s.R10, strings.ReplaceAll(e.Version(), "@", "")+"-"+strings.Fields(c.name)[0]+"-r@10")
		}
		p := pairs[0]
		fmt.Printf("  e.g. %s\n    query: %q\n", p.Source, p.Query)
	}
}
