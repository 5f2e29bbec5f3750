package vscan

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestDistancesAreTheHammingDistancesEveryWay(t *testing.T) {
	t.Logf("this machine: %s", simd())
	rng := rand.New(rand.NewPCG(1, 2))
	for _, words := range []int{1, 2, 5, 6, 7, 16, 31, 32} {
		for _, blocks := range []int{1, 3, 17} {
			codes := make([]uint64, blocks*block*words)
			for i := range codes {
				codes[i] = rng.Uint64()
			}
			if blocks == 3 { // extremes: all bits differ, none differ
				for w := range words {
					codes[w*block] = math.MaxUint64
					codes[w*block+1] = 0
				}
			}
			qc := make([]uint64, words)
			for w := range qc {
				qc[w] = rng.Uint64()
			}
			if blocks == 3 {
				clear(qc)
			}
			want := make([]uint16, blocks*block)
			for i := range want {
				d := 0
				for w := range words {
					d += bits.OnesCount64(codes[i/block*words*block+w*block+i%block] ^ qc[w])
				}
				want[i] = uint16(d)
			}
			for name, way := range distanceWays(words) {
				got := make([]uint16, len(want))
				way(codes, qc, got)
				if !slices.Equal(got, want) {
					t.Fatalf("%s, %d words, %d blocks: got %v, want %v", name, words, blocks, got, want)
				}
			}
		}
	}
}

func TestDotIsTheDotProduct(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range append([]int{1, 7, 8, 9, 15, 16, 31, 32, 33, 40, 63, 64, 100, 384, 385, 1536}, rng.IntN(2000)+1) {
		a, b := make([]float32, n), make([]float32, n+3) // b may be longer: b[:len(a)]
		var want, mag float64
		for i := range a {
			a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			want += float64(a[i]) * float64(b[i])
			mag += math.Abs(float64(a[i]) * float64(b[i]))
		}
		for name, f := range map[string]func(a, b []float32) float32{"dot": dot, "Go": dotGo} {
			if got := f(a, b); math.Abs(float64(got)-want) > 1e-5*mag {
				t.Fatalf("%s of %d: got %v, want %v", name, n, got, want)
			}
		}
	}
}

// TestCodesStayInTheirBlocks checks the blocked codes after puts, replacements and
// deletes in any order: each vector's code is its own, and the padding of the last block
// is zero.
func TestCodesStayInTheirBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dims := range []int{384, 100, 64, 3} {
		s := New(dims)
		vecs := map[string][]float32{}
		for step := range 600 {
			id := fmt.Sprint(rng.IntN(120))
			if rng.IntN(3) == 0 {
				s.Delete(id)
				delete(vecs, id)
			} else {
				v := randomVectors(rng, 1, dims)[0]
				s.Put(id, v)
				vecs[id] = v
			}
			n := len(s.ids)
			if n != len(vecs) || len(s.codes) != (n+block-1)/block*s.words*block {
				t.Fatalf("%d dims, step %d: %d ids, %d vectors, %d code words", dims, step, n, len(vecs), len(s.codes))
			}
			for i, id := range s.ids {
				u, _ := unit(vecs[id], dims)
				want := make([]uint64, s.words)
				s.code(u, want)
				if got := s.codeOf(i); !slices.Equal(got, want) {
					t.Fatalf("%d dims, step %d: code of %s (at %d) %x, want %x", dims, step, id, i, got, want)
				}
			}
			for i := n; i < (n+block-1)/block*block; i++ {
				if c := s.codeOf(i); slices.ContainsFunc(c, func(x uint64) bool { return x != 0 }) {
					t.Fatalf("%d dims, step %d: padding %d holds %x", dims, step, i, c)
				}
			}
		}
	}
}
