package vscan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func randomVectors(rng *rand.Rand, n, dims int) [][]float32 {
	// Clustered, as embeddings are: each vector a centre plus noise.
	centres := make([][]float32, 20)
	for c := range centres {
		centres[c] = make([]float32, dims)
		for j := range dims {
			centres[c][j] = float32(rng.NormFloat64())
		}
	}
	out := make([][]float32, n)
	for i := range out {
		c := centres[rng.IntN(len(centres))]
		v := make([]float32, dims)
		for j := range dims {
			v[j] = c[j] + 0.8*float32(rng.NormFloat64())
		}
		out[i] = v
	}
	return out
}

// exact is the brute-force ranking: ids of the k most similar, most similar first.
func exact(vecs [][]float32, q []float32, k int) []string {
	type s struct {
		id  string
		sim float64
	}
	var all []s
	qn := norm(q)
	for i, v := range vecs {
		var d float64
		for j := range v {
			d += float64(v[j]) * float64(q[j])
		}
		all = append(all, s{fmt.Sprint(i), d / (norm(v) * qn)})
	}
	slices.SortFunc(all, func(a, b s) int {
		if a.sim != b.sim {
			if a.sim > b.sim {
				return -1
			}
			return 1
		}
		return 0
	})
	out := make([]string, k)
	for i := range out {
		out[i] = all[i].id
	}
	return out
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func ids(hs []Hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return out
}

func TestNearestWithAWholePoolIsExact(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := randomVectors(rng, 500, 48)
	s := New(48)
	for i, v := range vecs {
		s.Put(fmt.Sprint(i), v)
	}
	for range 20 {
		q := randomVectors(rng, 1, 48)[0]
		got := s.Nearest(q, 10, 500)
		if want := exact(vecs, q, 10); !slices.Equal(ids(got), want) {
			t.Fatalf("Nearest = %v, exact %v", ids(got), want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Sim > got[i-1].Sim {
				t.Fatalf("not most similar first: %v", got)
			}
		}
		if got[0].Sim < -1.0001 || got[0].Sim > 1.0001 {
			t.Fatalf("similarity %v is not a cosine", got[0].Sim)
		}
	}
}

func TestNearestByBitsFindsMostOfTheExactNearest(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	const n, dims = 5000, 128
	vecs := randomVectors(rng, n, dims)
	s := New(dims)
	for i, v := range vecs {
		s.Put(fmt.Sprint(i), v)
	}
	found, total := 0, 0
	for range 30 {
		q := randomVectors(rng, 1, dims)[0]
		want := exact(vecs, q, 10)
		for _, id := range ids(s.Nearest(q, 10, 500)) {
			if slices.Contains(want, id) {
				found++
			}
		}
		total += 10
	}
	// The pool is 10% of the set: a scan that ignored the bits would find about 10%.
	recall := float64(found) / float64(total)
	t.Logf("recall@10 %.3f with a pool of 500 of %d", recall, n)
	if recall < 0.8 {
		t.Fatalf("recall@10 %.3f with a pool of 500 of %d, want ≥ 0.8", recall, n)
	}
}

func TestPutReplacesAndDeleteRemoves(t *testing.T) {
	t.Parallel()
	s := New(3)
	s.Put("a", []float32{1, 0, 0})
	s.Put("b", []float32{0, 1, 0})
	s.Put("c", []float32{0, 0, 1})
	if got := ids(s.Nearest([]float32{0, 2, 0.1}, 1, 10)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("nearest = %v, want b", got)
	}
	s.Put("b", []float32{-1, 0, 0}) // b moved away
	if got := ids(s.Nearest([]float32{0, 2, 0.1}, 1, 10)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after b moved, nearest = %v, want c", got)
	}
	sims, ok := s.Similarities([]string{"c", "b", "nobody"}, []float32{0, 0, 5})
	if !ok[0] || sims[0] < 0.9999 {
		t.Fatalf("similarity of c to its own direction = %v, %v; want 1", sims[0], ok[0])
	}
	if !ok[1] || sims[1] > 1e-6 || sims[1] < -1e-6 {
		t.Fatalf("similarity of b to a perpendicular direction = %v, %v; want 0", sims[1], ok[1])
	}
	if ok[2] {
		t.Fatal("similarity of an id the set lacks")
	}
	if sims, ok := s.Similarities([]string{"b"}, []float32{1, 0, 0}); !ok[0] || sims[0] > -0.9999 {
		t.Fatalf("similarity of b to the opposite direction = %v, %v; want -1", sims[0], ok[0])
	}
	if _, ok := s.Similarities([]string{"c"}, []float32{0, 0}); ok[0] {
		t.Fatal("similarity to a query of another length")
	}
	s.Delete("a") // the last one (c) takes a's place
	s.Delete("nobody")
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2", s.Len())
	}
	if got := ids(s.Nearest([]float32{0, 0, 1}, 3, 10)); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("after deleting a: %v, want [c b]", got)
	}
	// A vector that cannot be compared is not kept, and removes the one it replaces.
	s.Put("c", []float32{0, 0})
	s.Put("d", []float32{0, 0, 0})
	s.Put("e", []float32{float32(math.NaN()), 1, 1})
	if got := ids(s.Nearest([]float32{0, 0, 1}, 3, 10)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after bad vectors: %v, want [b]", got)
	}
	if got := s.Nearest([]float32{1, 1}, 3, 10); got != nil {
		t.Fatalf("a query of another length found %v", got)
	}
	if got := s.Nearest([]float32{0, 0, 0}, 3, 10); got != nil {
		t.Fatalf("a zero query found %v", got)
	}
}

// Codes made against the first vectors' mean are made again as the set grows: a set that
// starts with vectors on one side and grows on another still ranks by bits well.
func TestCodesFollowTheGrowingSet(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	const dims = 64
	var vecs [][]float32
	s := New(dims)
	for i := range 4000 {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
			if i < 16 {
				v[j] += 5 // the first few far from the rest
			}
		}
		vecs = append(vecs, v)
		s.Put(fmt.Sprint(i), v)
	}
	found := 0
	for range 20 {
		q := vecs[16+rng.IntN(len(vecs)-16)]
		want := exact(vecs, q, 10)
		for _, id := range ids(s.Nearest(q, 10, 400)) {
			if slices.Contains(want, id) {
				found++
			}
		}
	}
	if recall := float64(found) / 200; recall < 0.8 {
		t.Fatalf("recall@10 %.3f, want ≥ 0.8: the codes still use the first vectors' mean", recall)
	}
}

func TestConcurrentSearchesAndChanges(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	vecs := randomVectors(rng, 2000, 32)
	s := New(32)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(vecs); i += 4 {
				s.Put(fmt.Sprint(i), vecs[i])
				if i%7 == 0 {
					s.Delete(fmt.Sprint(i - 4))
				}
				s.Nearest(vecs[i], 5, 50)
			}
		})
	}
	wg.Wait()
	for i := range vecs {
		want := i%7 != 3 || i+4 >= len(vecs) // i+4 deleted it
		got := s.Nearest(vecs[i], 1, 50)     // its own bits are at distance 0: always in the pool
		if want && (len(got) == 0 || got[0].ID != fmt.Sprint(i)) {
			t.Fatalf("vector %d: nearest %v, want itself", i, got)
		}
	}
}

// A search split across CPUs finds what one part finds, in the same order, for codes of
// 6 words (the loop of their own) and of others.
func TestNearestInPartsIsTheSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dims := range []int{384, 100} {
		vecs := randomVectors(rng, 3000, dims)
		s := New(dims)
		for i, v := range vecs {
			s.Put(fmt.Sprint(i), v)
		}
		for range 10 {
			q := randomVectors(rng, 1, dims)[0]
			old := parallelWork
			parallelWork = 1 << 62
			one := s.Nearest(q, 10, 300)
			parallelWork = 1
			parts := s.Nearest(q, 10, 300)
			parallelWork = old
			if !slices.Equal(one, parts) || len(one) != 10 {
				t.Fatalf("%d dims: in one part %v, in parts %v", dims, one, parts)
			}
		}
	}
}

// BenchmarkNearest is one search of 100k vectors of 384 dimensions with a pool of 1000,
// the memory service's default at the latency benchmark's size.
func BenchmarkNearest(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n, dims = 100_000, 384
	s := New(dims)
	for i, v := range randomVectors(rng, n, dims) {
		s.Put(fmt.Sprint(i), v)
	}
	qs := randomVectors(rng, 64, dims)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		s.Nearest(qs[i%len(qs)], 40, 1000)
	}
}
