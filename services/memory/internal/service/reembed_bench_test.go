package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/embed"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"

	"github.com/thefold/thefold/services/memory/internal/service"
)

// BenchmarkReembed measures the re-embedding of n memories of one owner for a new version of
// the built-in embedder: how long it takes (the switch's update and the concurrent HNSW
// build after it included, in the service's log lines), and the SearchMemories latency
// before, while the job runs (a search must never wait for it; those of the new model
// before its index is valid are exact scans, reported apart) and after the switch. It
// prints figures and asserts nothing about time.
//
// Run it once: go test -run '^$' -bench Reembed -benchtime 1x ./internal/service/
func BenchmarkReembed(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) { reembedBench(b, n) })
	}
}

func reembedBench(b *testing.B, n int) {
	ctx := context.Background()
	e := start(b, service.Config{})
	service.WithLogger(slog.New(slog.NewTextHandler(os.Stdout, nil)))(e.srv)
	alice := longLived(e.alice)
	mems := benchMemories(n)
	if err := bulkInsert(ctx, e.pool, benchOwner, embed.NewLocal(embed.DefaultDims), mems); err != nil {
		b.Fatal(err)
	}
	if err := buildIndex(ctx, e.pool, "local@1"); err != nil {
		b.Fatal(err)
	}
	queries := benchQueryTexts(100, mems)
	search := func(q string) (time.Duration, string) {
		t := time.Now()
		resp, err := e.client.SearchMemories(alice, &memoryv1.SearchMemoriesRequest{Query: q})
		if err != nil {
			b.Fatal(err)
		}
		return time.Since(t), resp.GetEmbeddingModel()
	}
	measure := func() []time.Duration {
		var out []time.Duration
		for _, q := range queries {
			d, _ := search(q)
			out = append(out, d)
		}
		return out
	}
	for _, q := range queries[:10] { // warm up
		search(q)
	}
	steady := measure()
	e.ai.current.Store(2)
	pending := measure()

	// The job, with searches going on meanwhile.
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- e.srv.Reembed(ctx) }()
	var (
		mu     sync.Mutex
		during []time.Duration
		models = map[string]int{}
		// scans are the searches of the new model that began before its HNSW index was
		// valid (built concurrently after the switch): exact scans.
		scans []time.Duration
	)
	newIndexValid := func() bool {
		var ok bool
		if err := e.pool.QueryRow(ctx, `SELECT coalesce(bool_and(i.indisvalid), false) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			WHERE c.relname LIKE 'memories\_hnsw\_%' AND pg_get_indexdef(c.oid) LIKE '%''local@2''%'`).Scan(&ok); err != nil {
			b.Fatal(err)
		}
		return ok
	}
	var took time.Duration
	for i := 0; ; i++ {
		select {
		case err := <-done:
			if err != nil {
				b.Fatal(err)
			}
			took = time.Since(t0)
		default:
			indexed := newIndexValid()
			d, m := search(queries[i%len(queries)])
			mu.Lock()
			during, models[m] = append(during, d), models[m]+1
			if m == "local@2" && !indexed {
				scans = append(scans, d)
			}
			mu.Unlock()
			continue
		}
		break
	}
	after := measure()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(took.Seconds(), "reembed-s")
	b.ReportMetric(ms(pct(during, 50)), "during-p50-ms")
	b.ReportMetric(ms(slicesMax(during)), "during-max-ms")
	fmt.Printf("re-embedding %dk memories (local@1 → local@2, batches of 64): %s, %.0f rows/s; SearchMemories p50/p99/max: steady %.2f/%.2f/%.2f ms, new model pending %.2f/%.2f/%.2f ms, while the job runs %.2f/%.2f/%.2f ms (%d searches, by model %v; of the new model before its index was valid, exact scans: %.2f/%.2f/%.2f ms, %d searches), after the switch %.2f/%.2f/%.2f ms\n",
		n/1000, took.Round(time.Millisecond), float64(n)/took.Seconds(),
		ms(pct(steady, 50)), ms(pct(steady, 99)), ms(slicesMax(steady)),
		ms(pct(pending, 50)), ms(pct(pending, 99)), ms(slicesMax(pending)),
		ms(pct(during, 50)), ms(pct(during, 99)), ms(slicesMax(during)), len(during), models,
		ms(pct(scans, 50)), ms(pct(scans, 99)), ms(slicesMax(scans)), len(scans),
		ms(pct(after, 50)), ms(pct(after, 99)), ms(slicesMax(after)))
}

func slicesMax(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
