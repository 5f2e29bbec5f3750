package service_test

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/thefold/thefold/services/memory/internal/vscan"
)

// BenchmarkBinaryScan measures the in-process vector ranking (package vscan) on the latency
// benchmark's 100k generated memories and 200 queries (local@2, or THEFOLD_BENCH_EMBEDDER):
// an exhaustive scan of one bit per dimension by Hamming distance, and the nearest `pool`
// re-ranked by exact cosine. It prints recall@10 against exact search and the time per
// query for several pools; it asserts nothing about time. Not in make bench (a minute of
// set-up):
//
//	go test -run '^$' -bench BinaryScan -benchtime 1x ./internal/service/
func BenchmarkBinaryScan(b *testing.B) {
	local, _ := benchEmbedder(b)
	mems := benchMemories(100_000)
	texts := make([]string, len(mems))
	for i, m := range mems {
		texts[i] = m.summary + "\n" + m.content // what bulkInsert embeds
	}
	vecs := local.Embed(texts)
	set := vscan.New(len(vecs[0]))
	for i, v := range vecs {
		set.Put(fmt.Sprint(i), v)
	}
	queries := local.Embed(benchQueryTexts(benchQueries, mems))
	exact := make([][]string, len(queries))
	for qi, q := range queries {
		exact[qi] = nearestExact(vecs, q, 10)
	}
	b.ResetTimer()
	for range b.N {
		for _, pool := range []int{500, 1000, 2000, 4000} {
			found := 0
			var took []time.Duration
			for qi, q := range queries {
				t0 := time.Now()
				hits := set.Nearest(q, 10, pool)
				took = append(took, time.Since(t0))
				for _, h := range hits {
					if slices.Contains(exact[qi], h.ID) {
						found++
					}
				}
			}
			slices.Sort(took)
			p50, p99 := took[len(took)/2], took[len(took)*99/100]
			recall := float64(found) / float64(10*len(queries))
			b.Logf("in-process scan of %d memories (%d dims), the nearest %d by bits re-ranked: recall@10 %.3f, p50/p99 %v/%v per query",
				len(vecs), set.Dims(), pool, recall, p50.Round(time.Microsecond), p99.Round(time.Microsecond))
			if pool == 1000 {
				b.ReportMetric(recall, "recall@10")
				b.ReportMetric(float64(p50)/1e6, "p50-ms")
			}
		}
	}
	b.ReportMetric(0, "ns/op")
}

// nearestExact is the ids of the k vectors most similar to q by cosine, by brute force.
func nearestExact(vecs [][]float32, q []float32, k int) []string {
	type scored struct {
		i   int
		sim float64
	}
	all := make([]scored, len(vecs))
	for i, v := range vecs {
		var d, nv, nq float64
		for j := range v {
			d += float64(v[j]) * float64(q[j])
			nv += float64(v[j]) * float64(v[j])
			nq += float64(q[j]) * float64(q[j])
		}
		all[i] = scored{i, d / (math.Sqrt(nv) * math.Sqrt(nq))}
	}
	slices.SortFunc(all, func(a, b scored) int { return cmp.Compare(b.sim, a.sim) })
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprint(all[i].i)
	}
	return out
}
