package vscan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// distanceWays are the ways distances can be computed on this machine, by name.
func distanceWays(words int) map[string]func(codes, qc []uint64, dist []uint16) {
	ways := map[string]func(codes, qc []uint64, dist []uint16){"Go": distancesGo, "distances": distances}
	if haveAVX512 {
		ways["AVX-512"] = func(codes, qc []uint64, dist []uint16) {
			distAVX512(&codes[0], &qc[0], len(qc), &dist[0], len(dist)/block)
		}
	}
	if haveAVX2 && words <= maxAVX2Words {
		ways["AVX2"] = func(codes, qc []uint64, dist []uint16) {
			distAVX2(&codes[0], &qc[0], len(qc), &dist[0], len(dist)/block)
		}
	}
	return ways
}

// TestNearestIsTheSameEveryWay runs whole searches with each way of computing the
// distances this machine has: the same codes give the same candidates, so the same hits.
func TestNearestIsTheSameEveryWay(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, dims := range []int{384, 100} {
		vecs := randomVectors(rng, 2000+dims%7, dims)
		s := New(dims)
		for i, v := range vecs {
			s.Put(fmt.Sprint(i), v)
		}
		old512, old2 := haveAVX512, haveAVX2
		t.Cleanup(func() { haveAVX512, haveAVX2 = old512, old2 })
		for range 10 {
			q := randomVectors(rng, 1, dims)[0]
			haveAVX512, haveAVX2 = false, false
			want := s.Nearest(q, 10, 200)
			for _, way := range []struct{ avx512, avx2 bool }{{false, true}, {true, false}} {
				if way.avx512 && !old512 || way.avx2 && !old2 {
					continue
				}
				haveAVX512, haveAVX2 = way.avx512, way.avx2
				if got := s.Nearest(q, 10, 200); !slices.Equal(got, want) || len(got) != 10 {
					t.Fatalf("%d dims, AVX-512 %v, AVX2 %v: %v, in Go %v", dims, way.avx512, way.avx2, got, want)
				}
			}
		}
	}
}
