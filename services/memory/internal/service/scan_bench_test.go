package service_test

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"testing"
	"time"
)

// BenchmarkBinaryScan measures the design an in-process vector ranking would use, on the
// latency benchmark's 100k generated memories and 200 queries (local@2, or
// THEFOLD_BENCH_EMBEDDER): every memory's vector reduced to one bit per dimension (above
// or below the dimension's mean), all of them scanned by Hamming distance to the query's
// bits, and the nearest `pool` re-ranked by exact cosine. It prints recall@10 against
// exact search and the time per query of the scan and of the re-rank, for several pools;
// it asserts nothing about time. Not in make bench (a minute of set-up):
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
	dims := len(vecs[0])
	words := (dims + 63) / 64
	mean := make([]float64, dims)
	for _, v := range vecs {
		for j, x := range v {
			mean[j] += float64(x)
		}
	}
	for j := range mean {
		mean[j] /= float64(len(vecs))
	}
	bitsOf := func(v []float32, out []uint64) {
		for j, x := range v {
			if float64(x) > mean[j] {
				out[j/64] |= 1 << (j % 64)
			}
		}
	}
	// One contiguous array each, as an index would hold them.
	flat := make([]float32, 0, len(vecs)*dims)
	codes := make([]uint64, len(vecs)*words)
	for i, v := range vecs {
		unit(v)
		flat = append(flat, v...)
		bitsOf(v, codes[i*words:(i+1)*words])
	}
	vec := func(i int) []float32 { return flat[i*dims : (i+1)*dims : (i+1)*dims] }
	queries := local.Embed(benchQueryTexts(benchQueries, mems))
	exact := make([][]int, len(queries))
	for qi, q := range queries {
		unit(q)
		exact[qi] = nearest(len(vecs), 10, func(i int) float32 { return -dot(q, vec(i)) })
	}
	b.ResetTimer()
	for range b.N {
		for _, pool := range []int{500, 1000, 2000, 4000} {
			var found int
			var scan, rerank time.Duration
			dist := make([]uint16, len(vecs))
			qbits := make([]uint64, words)
			for qi, q := range queries {
				clear(qbits)
				bitsOf(q, qbits)
				t0 := time.Now()
				// Hamming distances, and the smallest distance that keeps pool of them (a
				// histogram, not a sort: distances are 0…dims).
				hist := make([]int, dims+1)
				for i := range dist {
					c := codes[i*words : (i+1)*words : (i+1)*words]
					h := 0
					for w := range c {
						h += bits.OnesCount64(c[w] ^ qbits[w])
					}
					dist[i] = uint16(h)
					hist[h]++
				}
				limit, n := 0, 0
				for limit = range hist {
					if n += hist[limit]; n >= pool {
						break
					}
				}
				cands := make([]int, 0, n)
				for i, d := range dist {
					if int(d) <= limit {
						cands = append(cands, i)
					}
				}
				t1 := time.Now()
				top := nearest(len(cands), 10, func(k int) float32 { return -dot(q, vec(cands[k])) })
				rerank += time.Since(t1)
				scan += t1.Sub(t0)
				for _, k := range top {
					if slices.Contains(exact[qi], cands[k]) {
						found++
					}
				}
			}
			nq := time.Duration(len(queries))
			b.Logf("binary scan of %d memories (%d dims, %d bytes of bits each), re-rank of the nearest %d: recall@10 %.3f, scan %v, re-rank %v per query",
				len(vecs), dims, words*8, pool, float64(found)/float64(10*len(queries)), (scan / nq).Round(time.Microsecond), (rerank / nq).Round(time.Microsecond))
			if pool == 1000 {
				b.ReportMetric(float64(found)/float64(10*len(queries)), "recall@10")
				b.ReportMetric(float64((scan+rerank)/nq)/1e6, "ms/query")
			}
		}
	}
	b.ReportMetric(0, "ns/op")
}

// nearest returns the k of 0…n-1 with the smallest score.
func nearest(n, k int, score func(int) float32) []int {
	type scored struct {
		i int
		s float32
	}
	all := make([]scored, n)
	for i := range all {
		all[i] = scored{i, score(i)}
	}
	slices.SortFunc(all, func(a, b scored) int { return cmp.Compare(a.s, b.s) })
	out := make([]int, min(k, n))
	for i := range out {
		out[i] = all[i].i
	}
	return out
}

func dot(a, b []float32) float32 {
	var s float32
	for j := range a {
		s += a[j] * b[j]
	}
	return s
}

func unit(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s = math.Sqrt(s); s > 0 {
		for j := range v {
			v[j] = float32(float64(v[j]) / s)
		}
	}
}
