package relevance

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// BenchmarkBuildAndRank indexes $GOROOT/src (several thousand files, ~100 MB) and ranks it
// for a task, reporting build and rank time, files indexed, and tokens included.
func BenchmarkBuildAndRank(b *testing.B) {
	root := filepath.Join(runtime.GOROOT(), "src")
	files := loadTree(b, root)
	if len(files) < 1000 {
		b.Skipf("only %d files under %s", len(files), root)
	}
	size := 0
	for _, f := range files {
		size += len(f.Content)
	}
	q := Query{
		Task:        "The HTTP server should close idle keep-alive connections when Shutdown is called, and report the number of active connections while draining.",
		TokenBudget: 30000,
		MaxFiles:    30,
	}
	var build, cold, warm time.Duration
	var used, n int
	for b.Loop() {
		t0 := time.Now()
		ix := Build(files)
		t1 := time.Now()
		results, u := ix.Rank(q)
		t2 := time.Now()
		ix.Rank(q)
		t3 := time.Now()
		build += t1.Sub(t0)
		cold += t2.Sub(t1)
		warm += t3.Sub(t2)
		used, n = u, ix.Len()
		if len(results) == 0 {
			b.Fatal("no results")
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(ms(build), "build-ms")
	// The first Rank on a fresh index counts the tokens of the files it returns (BPE,
	// cached in the index); a later Rank with the same files only scores.
	b.ReportMetric(ms(cold), "rank-cold-ms")
	b.ReportMetric(ms(warm), "rank-warm-ms")
	b.ReportMetric(float64(n), "files")
	b.ReportMetric(float64(size)/1e6, "MB")
	b.ReportMetric(float64(used), "tokens")
}
