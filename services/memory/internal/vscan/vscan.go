// Package vscan ranks vectors by cosine similarity in the memory service's own process: an
// exhaustive scan of one bit per dimension (is the component above that dimension's mean),
// by Hamming distance to the query's bits, then an exact re-rank of the nearest ones.
//
// Why not a graph (HNSW): on the memory benchmark's 100k memories of 384 dimensions the
// scan of 48-byte codes takes about 0.2 ms of CPU (with AVX-512 or AVX2 where the CPU has
// them, simd_amd64.s; about 1 ms in plain Go) and, with 1,000 re-ranked, finds 0.968 of the
// exact ten nearest, where pgvector's HNSW walk needs 5 ms for 0.958 (BenchmarkBinaryScan,
// docs/benchmarks.md). A scan cannot miss a region of the space as a walk can, needs no
// build, and takes inserts and deletes as they come.
package vscan

import (
	"cmp"
	"container/heap"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// Set is the vectors of one dimension count, by id. It is safe for concurrent use: searches
// share it, a change waits for them.
type Set struct {
	mu    sync.RWMutex
	dims  int
	words int // uint64s of bits per vector
	ids   []string
	pos   map[string]int // index into ids
	vecs  []float32      // unit vectors, dims each, in ids order
	// codes are the vectors' bits in blocks of block vectors, in ids order: word w of
	// vector i is codes[i/block*words*block + w*block + i%block], so word w of a block's
	// vectors lies side by side (one 64-byte line), as a SIMD register holds them
	// (distances). A block not full is padded with zero codes.
	codes []uint64
	// scratch holds a code being made under the write lock (Put, recode).
	scratch []uint64
	// mean is each dimension's mean when the codes were last made; recoded is how many
	// vectors there were then. The codes are made again (recode) when the set has doubled
	// since: the mean of a few first vectors is a poor threshold for many.
	mean    []float32
	recoded int
}

// New returns an empty set of dims-dimensional vectors.
func New(dims int) *Set {
	if dims <= 0 {
		panic("vscan: dims must be positive")
	}
	words := (dims + 63) / 64
	return &Set{dims: dims, words: words, pos: map[string]int{}, mean: make([]float32, dims), scratch: make([]uint64, words)}
}

// Dims is the dimension count of the set's vectors.
func (s *Set) Dims() int { return s.dims }

// Len is how many vectors the set holds.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.ids)
}

// Put adds the vector of id, or replaces it. A vector of another length, or of length 0,
// is not added (and an earlier one of id is removed): it cannot be compared.
func (s *Set) Put(id string, v []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := unit(v, s.dims)
	if !ok {
		s.remove(id)
		return
	}
	i, had := s.pos[id]
	if !had {
		i = len(s.ids)
		s.pos[id] = i
		s.ids = append(s.ids, id)
		s.vecs = append(s.vecs, u...)
		if i%block == 0 {
			s.codes = append(s.codes, make([]uint64, s.words*block)...)
		}
	} else {
		copy(s.vecs[i*s.dims:], u)
	}
	if n := len(s.ids); n >= 2*s.recoded && n >= 16 {
		s.recode()
		return
	}
	s.code(u, s.scratch)
	s.setCode(i, s.scratch)
}

// block is how many vectors' codes are stored interleaved (see Set.codes).
const block = 8

// setCode stores c as vector i's code.
func (s *Set) setCode(i int, c []uint64) {
	base := i/block*s.words*block + i%block
	for w, x := range c[:s.words] {
		s.codes[base+w*block] = x
	}
}

// codeOf is vector i's code, in a new slice.
func (s *Set) codeOf(i int) []uint64 {
	c := make([]uint64, s.words)
	base := i/block*s.words*block + i%block
	for w := range c {
		c[w] = s.codes[base+w*block]
	}
	return c
}

// Delete removes the vector of id, if the set has one.
func (s *Set) Delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(id)
}

func (s *Set) remove(id string) {
	i, ok := s.pos[id]
	if !ok {
		return
	}
	last := len(s.ids) - 1
	if i != last { // the last one takes the hole
		s.ids[i] = s.ids[last]
		s.pos[s.ids[i]] = i
		copy(s.vecs[i*s.dims:(i+1)*s.dims], s.vecs[last*s.dims:])
		s.setCode(i, s.codeOf(last))
	}
	clear(s.scratch)
	s.setCode(last, s.scratch) // the padding of a block is zero codes
	delete(s.pos, id)
	s.ids = s.ids[:last]
	s.vecs = s.vecs[:last*s.dims]
	s.codes = s.codes[:(last+block-1)/block*s.words*block]
}

// recode makes every vector's code again against the set's current mean.
func (s *Set) recode() {
	clear(s.mean)
	n := len(s.ids)
	sum := make([]float64, s.dims)
	for i := range n {
		for j, x := range s.vecs[i*s.dims : (i+1)*s.dims] {
			sum[j] += float64(x)
		}
	}
	for j := range sum {
		s.mean[j] = float32(sum[j] / float64(n))
	}
	for i := range n {
		s.code(s.vecs[i*s.dims:(i+1)*s.dims], s.scratch)
		s.setCode(i, s.scratch)
	}
	s.recoded = n
}

func (s *Set) code(u []float32, out []uint64) {
	clear(out)
	for j, x := range u {
		if x > s.mean[j] {
			out[j/64] |= 1 << (j % 64)
		}
	}
}

// Hit is one vector found, with its cosine similarity to the query.
type Hit struct {
	ID  string
	Sim float32
}

// Nearest returns the k vectors most similar to q, most similar first (ties by id): the
// pool vectors nearest q by their bits, re-ranked by exact cosine similarity. A pool of
// at least the set's size ranks exactly. q of another length finds nothing.
func (s *Set) Nearest(q []float32, k, pool int) []Hit {
	u, ok := unit(q, s.dims)
	if !ok || k <= 0 {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := len(s.ids)
	pool = max(pool, k)
	var cands []int
	if pool >= n {
		cands = make([]int, n)
		for i := range cands {
			cands[i] = i
		}
	} else {
		cands = s.byBits(u, pool)
	}
	// The exact similarity of each candidate, on every CPU for a large pool.
	sims := make([]float32, len(cands))
	inParts(partsOf(len(cands)*s.dims*4, len(cands)), len(cands), func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			i := cands[j]
			sims[j] = dot(u, s.vecs[i*s.dims:(i+1)*s.dims:(i+1)*s.dims])
		}
	})
	// The k most similar of the candidates: a min-heap of the best so far.
	h := make(hits, 0, k+1)
	for j, i := range cands {
		sim := sims[j]
		if len(h) < k {
			heap.Push(&h, hit{i, sim, s.ids[i]})
		} else if better(hit{i, sim, s.ids[i]}, h[0]) {
			h[0] = hit{i, sim, s.ids[i]}
			heap.Fix(&h, 0)
		}
	}
	slices.SortFunc(h, func(a, b hit) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	out := make([]Hit, len(h))
	for i, x := range h {
		out[i] = Hit{ID: x.id, Sim: x.sim}
	}
	return out
}

// Similarities is the cosine similarity to q of each of ids' vectors, and false for an id
// the set has no vector of, or for all when q cannot be compared.
func (s *Set) Similarities(ids []string, q []float32) (sims []float32, ok []bool) {
	sims, ok = make([]float32, len(ids)), make([]bool, len(ids))
	u, valid := unit(q, s.dims)
	if !valid {
		return sims, ok
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for j, id := range ids {
		if i, found := s.pos[id]; found {
			sims[j], ok[j] = dot(u, s.vecs[i*s.dims:(i+1)*s.dims:(i+1)*s.dims]), true
		}
	}
	return sims, ok
}

// byBits returns the indexes of the pool vectors whose codes are nearest u's (of those at
// the pool-th smallest distance, the first found): a histogram of the distances, not a sort.
func (s *Set) byBits(u []float32, pool int) []int {
	qc := make([]uint64, s.words)
	s.code(u, qc)
	n := len(s.ids)
	blocks := (n + block - 1) / block
	dist := make([]uint16, blocks*block)
	// Each part of the set (whole blocks) counts its distances in its own histogram.
	parts := partsOf(n*s.words*8, blocks)
	hists := make([][]int, parts)
	inParts(parts, blocks, func(p, lo, hi int) {
		distances(s.codes[lo*s.words*block:hi*s.words*block], qc, dist[lo*block:hi*block])
		h := make([]int, s.dims+1)
		for _, d := range dist[lo*block : min(hi*block, n)] {
			h[d]++
		}
		hists[p] = h
	})
	hist := hists[0]
	if parts > 1 {
		hist = make([]int, s.dims+1)
		for _, h := range hists {
			for d, c := range h {
				hist[d] += c
			}
		}
	}
	limit, below := 0, 0 // below: how many are nearer than limit
	for limit = range hist {
		if below+hist[limit] >= pool {
			break
		}
		below += hist[limit]
	}
	// Of those at the limit, the first pool - below in index order: each part's share.
	quota := make([]int, parts)
	left := pool - below
	for p, h := range hists {
		quota[p] = min(left, h[limit])
		left -= quota[p]
	}
	found := make([][]int, parts)
	inParts(parts, blocks, func(p, lo, hi int) {
		lo, hi = lo*block, min(hi*block, n)
		out, q := make([]int, 0, quota[p]+(pool-quota[p])/parts), quota[p]
		for i, d := range dist[lo:hi] {
			switch {
			case int(d) < limit:
				out = append(out, lo+i)
			case int(d) == limit && q > 0:
				out = append(out, lo+i)
				q--
			}
		}
		found[p] = out
	})
	return slices.Concat(found...)
}

// distancesGo is distances without SIMD.
func distancesGo(codes, qc []uint64, dist []uint16) {
	words := len(qc)
	for b := 0; b < len(dist)/block; b++ {
		var acc [block]int
		blk := codes[b*words*block : (b+1)*words*block]
		for w, q := range qc {
			c := blk[w*block : w*block+block : w*block+block]
			for j := range block {
				acc[j] += bits.OnesCount64(c[j] ^ q)
			}
		}
		for j, a := range acc {
			dist[b*block+j] = uint16(a)
		}
	}
}

// parallelWork is how much work (bytes read) a part of a scan must have for the scan to be
// split across CPUs: below it a goroutine costs more than it saves. A variable for tests.
var parallelWork = 256 << 10

// partsOf is how many parts a scan of n items and about work bytes is split into: one per
// CPU when each part has enough to do, else one. A search is then as fast as the machine's
// cores make it, not one core: a search of 100k vectors takes one part per core.
func partsOf(work, n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), work/parallelWork, n))
}

// inParts calls f for each of parts parts of [0, n) (p is the part's number, in index
// order), at once when there are several, and returns when every part is done.
func inParts(parts, n int, f func(p, lo, hi int)) {
	if parts <= 1 {
		f(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { f(p, n*p/parts, n*(p+1)/parts) })
	}
	wg.Wait()
}

type hit struct {
	i   int
	sim float32
	id  string
}

// better orders by similarity, then by id (a stable order for equal vectors).
func better(a, b hit) bool {
	if a.sim != b.sim {
		return a.sim > b.sim
	}
	return cmp.Less(a.id, b.id)
}

// hits is a heap whose root is the worst hit kept.
type hits []hit

func (h hits) Len() int           { return len(h) }
func (h hits) Less(i, j int) bool { return better(h[j], h[i]) }
func (h hits) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hits) Push(x any)        { *h = append(*h, x.(hit)) }
func (h *hits) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// dotGo is dot without SIMD.
func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	for len(a) >= 8 {
		s0 += a[0] * b[0]
		s1 += a[1] * b[1]
		s2 += a[2] * b[2]
		s3 += a[3] * b[3]
		s4 += a[4] * b[4]
		s5 += a[5] * b[5]
		s6 += a[6] * b[6]
		s7 += a[7] * b[7]
		a, b = a[8:], b[8:len(a)]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3) + (s4 + s5) + (s6 + s7)
}

// unit is v scaled to length 1, in a new slice; false for another length than dims, a zero
// vector, or one with a component that is not a finite number.
func unit(v []float32, dims int) ([]float32, bool) {
	if len(v) != dims {
		return nil, false
	}
	var sum float64
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, false
		}
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return nil, false
	}
	norm := math.Sqrt(sum)
	u := make([]float32, dims)
	for j, x := range v {
		u[j] = float32(float64(x) / norm)
	}
	return u, true
}
