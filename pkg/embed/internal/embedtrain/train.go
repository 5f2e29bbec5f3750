package main

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/thefold/thefold/pkg/embed/internal/modelfile"
)

// chunks is how many pieces parallel loops cut their rows into. It is fixed (not the
// number of CPUs) so that sums over pieces add up in the same order on every machine.
const chunks = 16

// parallel runs f over [0,n) in chunks pieces, four at a time.
func parallel(n int, f func(lo, hi int)) {
	parallelChunks(n, func(_, lo, hi int) { f(lo, hi) })
}

// parallelChunks is parallel telling f which piece it has.
func parallelChunks(n int, f func(chunk, lo, hi int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for c := range chunks {
		lo, hi := n*c/chunks, n*(c+1)/chunks
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(c, lo, hi)
		})
	}
	wg.Wait()
}

// csr is a sparse matrix in compressed rows.
type csr struct {
	n      int
	rowPtr []int
	col    []int32
	val    []float32
}

// mul returns m·x for x with l columns, row-major.
func (m *csr) mul(x []float64, l int) []float64 {
	y := make([]float64, m.n*l)
	parallel(m.n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			yi := y[i*l : (i+1)*l]
			for k := m.rowPtr[i]; k < m.rowPtr[i+1]; k++ {
				v, xj := float64(m.val[k]), x[int(m.col[k])*l:int(m.col[k]+1)*l]
				for c := range yi {
					yi[c] += v * xj[c]
				}
			}
		}
	})
	return y
}

func (m *csr) transpose() *csr {
	t := &csr{n: m.n, rowPtr: make([]int, m.n+1), col: make([]int32, len(m.col)), val: make([]float32, len(m.val))}
	for _, j := range m.col {
		t.rowPtr[j+1]++
	}
	for i := range m.n {
		t.rowPtr[i+1] += t.rowPtr[i]
	}
	next := append([]int(nil), t.rowPtr[:m.n]...)
	for i := range m.n {
		for k := m.rowPtr[i]; k < m.rowPtr[i+1]; k++ {
			j := m.col[k]
			t.col[next[j]], t.val[next[j]] = int32(i), m.val[k]
			next[j]++
		}
	}
	return t
}

// ppmi counts co-occurrences within the window (a pair at distance d weighs
// (window-d+1)/window, as word2vec's sampled window does on average) and returns the
// positive pointwise mutual information, with the context distribution raised to
// smoothing (Levy, Goldberg and Dagan 2015).
func ppmi(n int, seq []int32, pairs []int32, pairWeight float64, window int, smoothing float64) *csr {
	counts := make([]float32, n*n)
	for i := 0; i < len(pairs); i += 2 {
		a, b := int(pairs[i]), int(pairs[i+1])
		counts[a*n+b] += float32(pairWeight)
		counts[b*n+a] += float32(pairWeight)
	}
	for i, a := range seq {
		if a < 0 {
			continue
		}
		for d := 1; d <= window && i+d < len(seq); d++ {
			b := seq[i+d]
			if b == -1 {
				break
			}
			if b < 0 {
				continue
			}
			w := float32(window-d+1) / float32(window)
			counts[int(a)*n+int(b)] += w
			counts[int(b)*n+int(a)] += w
		}
	}
	row := make([]float64, n)
	parallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			var s float64
			for _, x := range counts[i*n : (i+1)*n] {
				s += float64(x)
			}
			row[i] = s
		}
	})
	var total, ctxTotal float64
	ctx := make([]float64, n)
	for i, r := range row {
		total += r
		ctx[i] = math.Pow(r, smoothing)
		ctxTotal += ctx[i]
	}
	// Rows are built in pieces, then joined in order.
	type piece struct {
		col []int32
		val []float32
		len []int
	}
	pieces := make([]piece, chunks)
	parallelChunks(n, func(chunk, lo, hi int) {
		var p piece
		for i := lo; i < hi; i++ {
			start := len(p.col)
			for j, x := range counts[i*n : (i+1)*n] {
				if x == 0 || row[i] == 0 {
					continue
				}
				pmi := math.Log(float64(x) * ctxTotal / (row[i] * ctx[j]))
				if pmi > 0 {
					p.col = append(p.col, int32(j))
					p.val = append(p.val, float32(pmi))
				}
			}
			p.len = append(p.len, len(p.col)-start)
		}
		pieces[chunk] = p
	})
	m := &csr{n: n, rowPtr: make([]int, 1, n+1)}
	for _, p := range pieces {
		m.col = append(m.col, p.col...)
		m.val = append(m.val, p.val...)
		for _, l := range p.len {
			m.rowPtr = append(m.rowPtr, m.rowPtr[len(m.rowPtr)-1]+l)
		}
	}
	_ = total
	return m
}

// gram returns yᵀy for y with l columns, row-major, summed in fixed pieces.
func gram(y []float64, l int) []float64 {
	n := len(y) / l
	parts := make([][]float64, chunks)
	parallelChunks(n, func(chunk, lo, hi int) {
		g := make([]float64, l*l)
		for i := lo; i < hi; i++ {
			yi := y[i*l : (i+1)*l]
			for a, va := range yi {
				if va == 0 {
					continue
				}
				ga := g[a*l : (a+1)*l]
				for b := a; b < l; b++ {
					ga[b] += va * yi[b]
				}
			}
		}
		parts[chunk] = g
	})
	g := make([]float64, l*l)
	for _, p := range parts {
		for k, x := range p {
			g[k] += x
		}
	}
	for a := range l {
		for b := 0; b < a; b++ {
			g[a*l+b] = g[b*l+a]
		}
	}
	return g
}

// orthonormalise replaces y's columns by an orthonormal basis of their span: Cholesky QR,
// twice, which is as accurate as Householder QR for well-conditioned y.
func orthonormalise(y []float64, l int) {
	for range 2 {
		g := gram(y, l)
		// Cholesky g = L·Lᵀ (in place, lower triangle), with a ridge against rank loss.
		for j := range l {
			g[j*l+j] += 1e-10 * (g[j*l+j] + 1e-30)
		}
		for j := range l {
			s := g[j*l+j]
			for k := range j {
				s -= g[j*l+k] * g[j*l+k]
			}
			d := math.Sqrt(max(s, 1e-300))
			g[j*l+j] = d
			for i := j + 1; i < l; i++ {
				s := g[i*l+j]
				for k := range j {
					s -= g[i*l+k] * g[j*l+k]
				}
				g[i*l+j] = s / d
			}
		}
		// Each row q solves L·qᵀ = yᵀ.
		n := len(y) / l
		parallel(n, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				row := y[r*l : (r+1)*l]
				for j := range l {
					s := row[j]
					for k := range j {
						s -= g[j*l+k] * row[k]
					}
					row[j] = s / g[j*l+j]
				}
			}
		})
	}
}

// jacobiEigen returns the eigenvalues (descending) and eigenvectors (columns of a
// row-major l×l matrix) of the symmetric matrix a, by cyclic Jacobi rotations.
func jacobiEigen(a []float64, l int) ([]float64, []float64) {
	a = append([]float64(nil), a...)
	v := make([]float64, l*l)
	for i := range l {
		v[i*l+i] = 1
	}
	for sweep := 0; sweep < 100; sweep++ {
		var off float64
		for p := range l {
			for q := p + 1; q < l; q++ {
				off += a[p*l+q] * a[p*l+q]
			}
		}
		if off < 1e-22 {
			break
		}
		for p := range l {
			for q := p + 1; q < l; q++ {
				apq := a[p*l+q]
				if math.Abs(apq) < 1e-300 {
					continue
				}
				theta := (a[q*l+q] - a[p*l+p]) / (2 * apq)
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := range l {
					akp, akq := a[k*l+p], a[k*l+q]
					a[k*l+p], a[k*l+q] = c*akp-s*akq, s*akp+c*akq
				}
				for k := range l {
					apk, aqk := a[p*l+k], a[q*l+k]
					a[p*l+k], a[q*l+k] = c*apk-s*aqk, s*apk+c*aqk
				}
				for k := range l {
					vkp, vkq := v[k*l+p], v[k*l+q]
					v[k*l+p], v[k*l+q] = c*vkp-s*vkq, s*vkp+c*vkq
				}
			}
		}
	}
	idx := make([]int, l)
	for i := range idx {
		idx[i] = i
	}
	// Selection by descending eigenvalue (stable, ties by index).
	for i := range l {
		best := i
		for j := i + 1; j < l; j++ {
			if a[idx[j]*l+idx[j]] > a[idx[best]*l+idx[best]] {
				best = j
			}
		}
		idx[i], idx[best] = idx[best], idx[i]
	}
	vals := make([]float64, l)
	vecs := make([]float64, l*l)
	for c, k := range idx {
		vals[c] = a[k*l+k]
		for r := range l {
			vecs[r*l+c] = v[r*l+k]
		}
	}
	return vals, vecs
}

// train learns the word vectors: randomized truncated SVD (Halko, Martinsson and Tropp
// 2011) of the PPMI matrix, with two power iterations, vectors U·Σ^p normalised to unit
// length and int8-quantised per row.
func train(v vocabulary, seq []int32, c config) *modelfile.Model {
	t0 := time.Now()
	n, d := len(v.words), c.dims
	m := ppmi(n, seq, v.pairs, c.pairWeight, c.window, c.smoothing)
	c.logger().Info("ppmi", "words", n, "nonzero", len(m.val), "took", time.Since(t0).Round(time.Millisecond))
	mt := m.transpose()

	l := d + 16
	rng := rand.New(rand.NewPCG(1, 2))
	omega := make([]float64, n*l)
	for i := range omega {
		omega[i] = rng.NormFloat64()
	}
	q := m.mul(omega, l)
	orthonormalise(q, l)
	for range 2 {
		z := mt.mul(q, l)
		orthonormalise(z, l)
		q = m.mul(z, l)
		orthonormalise(q, l)
	}
	bt := mt.mul(q, l) // (Qᵀ·M)ᵀ
	vals, vecs := jacobiEigen(gram(bt, l), l)
	c.logger().Info("svd", "rank", d, "sigma_1", math.Sqrt(vals[0]), "sigma_d", math.Sqrt(max(vals[d-1], 0)), "took", time.Since(t0).Round(time.Millisecond))

	w := make([]float64, n*d)
	parallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			qi := q[i*l : (i+1)*l]
			wi := w[i*d : (i+1)*d]
			for c2 := range d {
				var s float64
				for k := range l {
					s += qi[k] * vecs[k*l+c2]
				}
				wi[c2] = s * math.Pow(math.Sqrt(max(vals[c2], 0)), c.eigenPow)
			}
			var sq float64
			for _, x := range wi {
				sq += x * x
			}
			if sq > 0 {
				nrm := math.Sqrt(sq)
				for k := range wi {
					wi[k] /= nrm
				}
			}
		}
	})

	mod := &modelfile.Model{
		Header: modelfile.Header{Version: "local@2", Words: n, Dims: d, Tokens: v.total, Window: c.window, Smoothing: c.smoothing, EigenPow: c.eigenPow, PairWeight: c.pairWeight},
		Words:  v.words, LogProb: make([]float32, n), Scale: make([]float32, n), Vec: make([]int8, n*d),
	}
	for i := range n {
		mod.LogProb[i] = float32(math.Log(float64(v.counts[i]) / float64(v.total)))
		wi := w[i*d : (i+1)*d]
		var mx float64
		for _, x := range wi {
			mx = max(mx, math.Abs(x))
		}
		scale := mx / 127
		if scale == 0 {
			scale = 1
		}
		mod.Scale[i] = float32(scale)
		for k, x := range wi {
			mod.Vec[i*d+k] = int8(math.Round(x / scale))
		}
	}
	mod.Common = commonDirection(mod)
	return mod
}

// commonDirection is the top eigenvector of Σ p(w)·w·wᵀ over the quantised vectors (what
// the run time sees), by power iteration: the direction every frequency-weighted average
// of word vectors shares, which says nothing about a particular text.
func commonDirection(m *modelfile.Model) []float32 {
	d := m.Dims
	cov := make([]float64, d*d)
	row := make([]float64, d)
	for i := range m.Words {
		p := math.Exp(float64(m.LogProb[i]))
		for k := range d {
			row[k] = float64(m.Vec[i*d+k]) * float64(m.Scale[i])
		}
		for a := range d {
			for b := range d {
				cov[a*d+b] += p * row[a] * row[b]
			}
		}
	}
	x := make([]float64, d)
	for k := range x {
		x[k] = 1
	}
	for range 200 {
		y := make([]float64, d)
		for a := range d {
			for b := range d {
				y[a] += cov[a*d+b] * x[b]
			}
		}
		var sq float64
		for _, e := range y {
			sq += e * e
		}
		nrm := math.Sqrt(sq)
		for k := range y {
			x[k] = y[k] / nrm
		}
	}
	out := make([]float32, d)
	for k, e := range x {
		out[k] = float32(e)
	}
	return out
}
