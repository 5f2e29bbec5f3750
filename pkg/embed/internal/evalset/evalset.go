// Package evalset builds retrieval tasks from source trees, to measure and tune TheFold's
// local embedders: a query, and the one document among many that answers it. It holds
// no data; the tasks are cut from whatever tree it is pointed at (the module cache for
// the benchmarks, held-out training modules for tuning, GOROOT for the independent check).
package evalset

import (
	"cmp"
	"hash/fnv"
	"math"
	"slices"
)

// Pair is a query and the document it should find.
type Pair struct {
	Source string // where the pair comes from, for examples
	Query  string
	Doc    string
}

// Scores are a ranking's figures over a set of queries.
type Scores struct {
	Queries, Docs int
	R1, R10, MRR  float64
	NonZero       float64 // the share of non-zero components in the documents' vectors
}

// Sample keeps at most n pairs, a spread chosen by a hash of their source so that it does
// not depend on the order the tree was read in.
func Sample(pairs []Pair, n int) []Pair {
	if len(pairs) <= n {
		return pairs
	}
	type keyed struct {
		k uint64
		p Pair
	}
	ks := make([]keyed, len(pairs))
	for i, p := range pairs {
		h := fnv.New64a()
		h.Write([]byte(p.Source))
		h.Write([]byte{0})
		h.Write([]byte(p.Query))
		ks[i] = keyed{h.Sum64(), p}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return cmp.Compare(a.k, b.k) })
	out := make([]Pair, n)
	for i := range out {
		out[i] = ks[i].p
	}
	return out
}

// Evaluate embeds every document and up to maxQueries queries (a deterministic spread)
// with embed, ranks all documents for each query by cosine (vectors are L2-normalised,
// so by dot product), and reports recall@1, recall@10 and MRR@10 of each query's own
// document. A document tied with the right one ranks before it: ties are not wins.
func Evaluate(embed func([]string) [][]float32, pairs []Pair, maxQueries int) Scores {
	docs := make([]string, len(pairs))
	for i, p := range pairs {
		docs[i] = p.Doc
	}
	dv := embed(docs)
	step := max(1, len(pairs)/max(maxQueries, 1))
	var qi []int
	for i := 0; i < len(pairs) && len(qi) < maxQueries; i += step {
		qi = append(qi, i)
	}
	queries := make([]string, len(qi))
	for k, i := range qi {
		queries[k] = pairs[i].Query
	}
	qv := embed(queries)
	s := Scores{Queries: len(qi), Docs: len(docs)}
	for k, i := range qi {
		want := dot(qv[k], dv[i])
		rank := 0
		for j := range dv {
			if j != i && dot(qv[k], dv[j]) >= want {
				rank++
			}
		}
		if rank < 1 {
			s.R1++
		}
		if rank < 10 {
			s.R10++
			s.MRR += 1 / float64(rank+1)
		}
	}
	n := float64(len(qi))
	s.R1, s.R10, s.MRR = s.R1/n, s.R10/n, s.MRR/n
	s.NonZero = nonZero(dv)
	return s
}

// NonZero is the share of components that are not zero, over vectors.
func nonZero(vs [][]float32) float64 {
	var nz, all float64
	for _, v := range vs {
		for _, x := range v {
			if x != 0 {
				nz++
			}
		}
		all += float64(len(v))
	}
	if all == 0 {
		return math.NaN()
	}
	return nz / all
}

func dot(a, b []float32) float64 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return float64(s)
}
