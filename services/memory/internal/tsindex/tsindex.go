// Package tsindex ranks documents by full text in the memory service's own process, as
// PostgreSQL's ts_rank(search, query, 1|32) ranks them against a query of lexemes ORed:
// the same float arithmetic (src/backend/utils/adt/tsrank.c, calc_rank_or and calc_rank),
// so a rank here equals PostgreSQL's to the last bit or nearly (TestRankIsPostgreSQLs in
// the store).
//
// Why in the process: on the memory benchmark's 100k memories the ranking in PostgreSQL
// (the GIN index's lookups, each row's tsvector read and ranked, re-planned for every
// query's terms) was the longer of a search's two rankings, and it could rank only an
// arbitrary subset of the rows matching a common word. Here each document's share of the
// rank is worked out once, when it is added (what ts_rank computes from its positions does
// not depend on the query), and a search only adds up those of the query's lexemes.
package tsindex

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Index is the full-text vectors of a set of documents, by id. It is safe for concurrent
// use: searches share it, a change waits for them.
type Index struct {
	mu    sync.RWMutex
	terms map[string]int32 // lexeme → term number
	// posts is, by term number, the documents holding the term (document numbers,
	// ascending); deleted documents stay in them until compact.
	posts [][]int32
	df    []int32 // by term number: the live documents holding it
	docs  []doc
	pos   map[string]int32 // id → document number, live documents only
	// fterms and fshares are each document's terms (ascending term numbers) and their
	// shares of the rank, at docs[d].off, docs[d].n of them.
	fterms  []int32
	fshares []float32
	dead    int // deleted documents not compacted away yet
}

// doc is one document of the index; a deleted one is not live.
type doc struct {
	id   string
	off  int
	n    int32
	live bool
	// norm is ts_rank's length normalisation (1): log2 of the document's positions + 1.
	norm float64
}

// New returns an empty index.
func New() *Index {
	return &Index{terms: map[string]int32{}, pos: map[string]int32{}}
}

// Len is how many documents the index holds.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.pos)
}

// Put adds the document id with the full-text vector tsv (a tsvector's text form, as
// PostgreSQL writes it), or replaces its earlier one. A vector that cannot be read is an
// error, and the index is left as it was.
func (x *Index) Put(id, tsv string) error {
	entries, length, err := Parse(tsv)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if d, ok := x.pos[id]; ok {
		x.remove(d)
	}
	d := int32(len(x.docs))
	type termShare struct {
		term  int32
		share float32
	}
	ts := make([]termShare, len(entries))
	for i, e := range entries {
		t, ok := x.terms[e.Lexeme]
		if !ok {
			t = int32(len(x.posts))
			x.terms[e.Lexeme] = t
			x.posts = append(x.posts, nil)
			x.df = append(x.df, 0)
		}
		x.posts[t] = append(x.posts[t], d)
		x.df[t]++
		ts[i] = termShare{t, e.share()}
	}
	slices.SortFunc(ts, func(a, b termShare) int { return int(a.term - b.term) })
	off := len(x.fterms)
	for _, e := range ts {
		x.fterms = append(x.fterms, e.term)
		x.fshares = append(x.fshares, e.share)
	}
	x.docs = append(x.docs, doc{id: id, off: off, n: int32(len(ts)), live: true,
		norm: math.Log(float64(length+1)) / math.Log(2.0)})
	x.pos[id] = d
	return nil
}

// Delete removes the document id, if the index has it.
func (x *Index) Delete(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if d, ok := x.pos[id]; ok {
		x.remove(d)
	}
}

// remove marks document d deleted; once deleted documents are half of those held, they
// are compacted away (the postings of a deleted document are skipped until then).
func (x *Index) remove(d int32) {
	dc := &x.docs[d]
	for _, t := range x.fterms[dc.off : dc.off+int(dc.n)] {
		x.df[t]--
	}
	dc.live = false
	delete(x.pos, dc.id)
	x.dead++
	if x.dead >= 64 && 2*x.dead >= len(x.docs) {
		x.compact()
	}
}

// compact drops the deleted documents and their postings, numbering the live documents
// afresh (in their order). Terms keep their numbers: a term no document holds any more
// costs an empty posting list.
func (x *Index) compact() {
	renum := make([]int32, len(x.docs))
	docs := make([]doc, 0, len(x.pos))
	var fterms []int32
	var fshares []float32
	for d, dc := range x.docs {
		if !dc.live {
			renum[d] = -1
			continue
		}
		renum[d] = int32(len(docs))
		off := len(fterms)
		fterms = append(fterms, x.fterms[dc.off:dc.off+int(dc.n)]...)
		fshares = append(fshares, x.fshares[dc.off:dc.off+int(dc.n)]...)
		dc.off = off
		docs = append(docs, dc)
		x.pos[dc.id] = renum[d]
	}
	for t, p := range x.posts {
		kept := p[:0]
		for _, d := range p {
			if renum[d] >= 0 {
				kept = append(kept, renum[d])
			}
		}
		x.posts[t] = slices.Clip(kept)
	}
	x.docs, x.fterms, x.fshares, x.dead = docs, fterms, fshares, 0
}

// Hit is a document found, with its rank.
type Hit struct {
	ID   string
	Rank float32
}

// query is a search's lexemes as the index knows them.
type query struct {
	// terms are the query's lexemes the index has a term for, in the order ts_rank adds
	// them up (byte order of the lexemes: SortAndUniqItems).
	terms []int32
	// size is how many distinct lexemes the query has, held by any document or not: ts_rank
	// divides by it.
	size int
}

func (x *Index) query(lexemes []string) query {
	lex := slices.Clone(lexemes)
	slices.Sort(lex)
	lex = slices.Compact(lex)
	q := query{size: len(lex)}
	for _, l := range lex {
		if t, ok := x.terms[l]; ok {
			q.terms = append(q.terms, t)
		}
	}
	return q
}

// Search ranks documents against lexemes (the query's, distinct) ORed and returns the n
// of best rank (ties by id), best first, and how many documents it ranked. Which ones it
// ranks is picked as the SQL ranking picks them (store.termStats.match) but by exact
// document frequencies: the rarest lexemes ORed, as many as hold at most budget documents
// together; when even the rarest is in more, the rarest ANDed, as few as leave at most
// budget documents (all of them when none do). Every document holding all the lexemes is
// among those (it holds the rarest). Each is ranked against every lexeme of the query.
func (x *Index) Search(lexemes []string, budget, n int) ([]Hit, int) {
	if len(lexemes) == 0 || n <= 0 {
		return nil, 0
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	type freq struct {
		term int32 // -1: no document has it
		df   int
	}
	fs := make([]freq, 0, len(lexemes))
	for i, l := range lexemes {
		if slices.Contains(lexemes[:i], l) {
			continue
		}
		f := freq{term: -1}
		if t, ok := x.terms[l]; ok {
			f = freq{t, int(x.df[t])}
		}
		fs = append(fs, f)
	}
	slices.SortStableFunc(fs, func(a, b freq) int { return a.df - b.df })
	var picked []int32
	if fs[0].df <= budget {
		sum := 0
		for i, f := range fs {
			if i > 0 && sum+f.df > budget {
				break
			}
			sum += f.df
			if f.term >= 0 {
				picked = append(picked, x.live(f.term)...)
			}
		}
		slices.Sort(picked)
		picked = slices.Compact(picked)
	} else {
		// Intersected as posting lists (sorted), not by looking each document up: the
		// rarest lexeme of a query of common words is in thousands of documents.
		picked = x.live(fs[0].term)
		for _, f := range fs[1:] {
			if len(picked) <= budget {
				break
			}
			picked = intersect(picked, x.posts[f.term])
		}
	}
	q := x.query(lexemes)
	// The n best so far: a heap whose root is the worst of them.
	h := make(ranked, 0, n+1)
	for _, d := range picked {
		r := ranked1{x.rank(d, q), x.docs[d].id}
		if len(h) < n {
			heap.Push(&h, r)
		} else if better(r, h[0]) {
			h[0] = r
			heap.Fix(&h, 0)
		}
	}
	slices.SortFunc(h, func(a, b ranked1) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	out := make([]Hit, len(h))
	for i, r := range h {
		out[i] = Hit{ID: r.id, Rank: r.rank}
	}
	return out, len(picked)
}

// Ranks is the rank of each document of ids against lexemes ORed; 0 for one the index
// does not have.
func (x *Index) Ranks(ids []string, lexemes []string) []float32 {
	out := make([]float32, len(ids))
	if len(lexemes) == 0 {
		return out
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	q := x.query(lexemes)
	for i, id := range ids {
		if d, ok := x.pos[id]; ok {
			out[i] = x.rank(d, q)
		}
	}
	return out
}

// live is the live documents holding term t, ascending: its posting list when no document
// is deleted (not to be changed), else a new slice.
func (x *Index) live(t int32) []int32 {
	if x.dead == 0 {
		return x.posts[t]
	}
	out := make([]int32, 0, x.df[t])
	for _, d := range x.posts[t] {
		if x.docs[d].live {
			out = append(out, d)
		}
	}
	return out
}

// intersect is the documents in both a and b (ascending, as they are), in a new slice: by
// a merge, or by binary searches of the longer when one is much the shorter.
func intersect(a, b []int32) []int32 {
	if len(a) > len(b) {
		a, b = b, a
	}
	out := make([]int32, 0, len(a))
	if len(a)*16 < len(b) {
		lo := 0
		for _, d := range a {
			i, found := slices.BinarySearch(b[lo:], d)
			lo += i
			if found {
				out = append(out, d)
			}
		}
		return out
	}
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// share is document d's share of the rank for term t, and whether d holds t.
func (x *Index) share(d, t int32) (float32, bool) {
	dc := &x.docs[d]
	terms := x.fterms[dc.off : dc.off+int(dc.n)]
	lo, hi := 0, len(terms)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if terms[m] < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(terms) && terms[lo] == t {
		return x.fshares[dc.off+lo], true
	}
	return 0, false
}

// rank is ts_rank(document d, q, 1|32): calc_rank_or's sum of the shares of the query's
// lexemes the document holds (each added in double precision and kept in single, as the C
// code does), divided by the query's size, by log2 of the document's length + 1
// (normalization 1) and by itself + 1 (normalization 32).
func (x *Index) rank(d int32, q query) float32 {
	if q.size == 0 || x.docs[d].n == 0 {
		return 0
	}
	var res float32
	for _, t := range q.terms {
		if s, ok := x.share(d, t); ok {
			res = float32(float64(res) + float64(s)/1.64493406685)
		}
	}
	res = res / float32(q.size)
	if res < 0 {
		res = 1e-20
	}
	res = float32(float64(res) / x.docs[d].norm)
	return res / (res + 1)
}

// ranked1 is a document ranked.
type ranked1 struct {
	rank float32
	id   string
}

// better orders by rank, highest first, then by id (as PostgreSQL orders uuids: their
// text form sorts as their bytes do).
func better(a, b ranked1) bool {
	if a.rank != b.rank {
		return a.rank > b.rank
	}
	return a.id < b.id
}

type ranked []ranked1

func (h ranked) Len() int           { return len(h) }
func (h ranked) Less(i, j int) bool { return better(h[j], h[i]) }
func (h ranked) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ranked) Push(v any)        { *h = append(*h, v.(ranked1)) }
func (h *ranked) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

// Weights of positions in ts_rank without a weights argument, by weight letter: D (no
// letter), C, B, A.
var weights = [4]float32{0.1, 0.2, 0.4, 1.0}

// Entry is one lexeme of a tsvector with the weights of its positions (0 for D up to 3
// for A), in order; none when the lexeme has no positions.
type Entry struct {
	Lexeme  string
	Weights []uint8
}

// share is the entry's part of calc_rank_or's sum, before the division by π²/6: the
// positions' weights, the j-th (from 1) divided by j², with the largest weight counted
// whole instead. A lexeme without positions counts as one position of weight D.
func (e Entry) share() float32 {
	ws := e.Weights
	if len(ws) == 0 {
		ws = []uint8{0}
	}
	var resj float32
	wjm := float32(-1)
	jm := 0
	for j, w := range ws {
		resj = resj + weights[w]/float32((j+1)*(j+1))
		if weights[w] > wjm {
			wjm = weights[w]
			jm = j
		}
	}
	return wjm + resj - wjm/float32((jm+1)*(jm+1))
}

// Parse reads a tsvector's text form, as in
//
//	'lexeme':1,5B 'it''s':3 'bare'
//
// each lexeme quoted (a quote in it doubled, and a backslash escaping the next character)
// or not, followed by its positions, each with an optional weight letter (A, B or C; D has
// none). It returns the entries and the document's length as ts_rank counts it: every
// position, and one for a lexeme without any.
func Parse(tsv string) ([]Entry, int, error) {
	var out []Entry
	length := 0
	i := 0
	for {
		for i < len(tsv) && isSpace(tsv[i]) {
			i++
		}
		if i == len(tsv) {
			return out, length, nil
		}
		var lex strings.Builder
		if tsv[i] == '\'' {
			i++
			for {
				if i == len(tsv) {
					return nil, 0, fmt.Errorf("tsindex: unterminated lexeme in %q", clip(tsv))
				}
				c := tsv[i]
				switch {
				case c == '\\' && i+1 < len(tsv):
					lex.WriteByte(tsv[i+1])
					i += 2
					continue
				case c == '\'' && i+1 < len(tsv) && tsv[i+1] == '\'':
					lex.WriteByte('\'')
					i += 2
					continue
				case c == '\'':
					i++
				default:
					lex.WriteByte(c)
					i++
					continue
				}
				break
			}
		} else {
			for i < len(tsv) && !isSpace(tsv[i]) && tsv[i] != ':' {
				if tsv[i] == '\\' && i+1 < len(tsv) {
					i++
				}
				lex.WriteByte(tsv[i])
				i++
			}
		}
		e := Entry{Lexeme: lex.String()}
		if i < len(tsv) && tsv[i] == ':' {
			i++
			for {
				j := i
				for j < len(tsv) && tsv[j] >= '0' && tsv[j] <= '9' {
					j++
				}
				if j == i {
					return nil, 0, fmt.Errorf("tsindex: a position expected at %d of %q", i, clip(tsv))
				}
				if _, err := strconv.Atoi(tsv[i:j]); err != nil {
					return nil, 0, fmt.Errorf("tsindex: position %q: %w", tsv[i:j], err)
				}
				w := uint8(0)
				if j < len(tsv) {
					switch tsv[j] {
					case 'A', 'a':
						w, j = 3, j+1
					case 'B', 'b':
						w, j = 2, j+1
					case 'C', 'c':
						w, j = 1, j+1
					case 'D', 'd':
						j++
					}
				}
				e.Weights = append(e.Weights, w)
				i = j
				if i < len(tsv) && tsv[i] == ',' {
					i++
					continue
				}
				break
			}
		}
		if i < len(tsv) && !isSpace(tsv[i]) {
			return nil, 0, fmt.Errorf("tsindex: unexpected %q at %d of %q", tsv[i], i, clip(tsv))
		}
		length += max(len(e.Weights), 1)
		out = append(out, e)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// clip shortens a tsvector for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
