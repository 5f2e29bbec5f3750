package relevance

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/thefold/thefold/pkg/tokens"
)

// Query asks which files matter for a task.
type Query struct {
	Task         string   // task description
	TokenBudget  int      // tokens of content to include (> 0)
	MaxFiles     int      // most files to return, included or not (> 0)
	IncludePaths []string // ranked first regardless of score (paths not in the index are ignored)
}

// Inclusion says how much of a file a Result carries.
type Inclusion int

const (
	InclusionNone    Inclusion = iota // listed only: nothing of it fits the budget
	InclusionWhole                    // the whole file
	InclusionOutline                  // declarations and signatures, no bodies
)

func (i Inclusion) String() string {
	switch i {
	case InclusionNone:
		return "none"
	case InclusionWhole:
		return "whole"
	case InclusionOutline:
		return "outline"
	}
	return fmt.Sprintf("Inclusion(%d)", int(i))
}

// Result is one ranked file.
type Result struct {
	Path          string
	Score         float64 // 0–1, the best result's score is 1
	Reason        string  // one line saying why the file is here
	Content       string  // the whole file or its outline; empty when Inclusion == InclusionNone
	Inclusion     Inclusion
	Tokens        int // tokens of the file's full content
	ContentTokens int // tokens of Content (0 when none)
}

// Ranking constants; the package comment explains them.
const (
	bm25K1 = 1.2
	bm25B  = 0.75

	weightBM25 = 0.40
	weightDefs = 0.35
	weightPath = 0.25

	// defBreadth weighs the query terms a file's definitions cover at all against the
	// single best-matching definition.
	defBreadth = 0.5
	// dirWeight is a directory term's weight relative to a file-name term.
	dirWeight = 0.5

	penaltyTest      = 0.7
	penaltyGenerated = 0.6
	penaltyVendored  = 0.6

	// A chosen file at position k (0-based) gives each neighbour in the import graph
	// proximityWeight × its score × proximityDecay^k, divided by sqrt(degree/proximityFan)
	// when it has more than proximityFan neighbours.
	proximityWeight = 0.4
	proximityDecay  = 0.8
	proximityFan    = 8.0

	// wholeShare: a file larger than this share of the total budget comes as an outline.
	wholeShare = 4
	// outlineShare: an outline may take at most this share of the total budget.
	outlineShare = 2
)

// qterm is a distinct term of the query.
type qterm struct {
	term    string
	word    string // the query word it came from, for reasons
	id      uint32
	known   bool    // the term occurs somewhere in the index
	idf     float64 // content IDF
	pathIDF float64
}

func (ix *Index) queryTerms(task string) []qterm {
	var sp splitter
	var out []qterm
	n := float64(len(ix.docs))
	sp.each(task, func(t []byte, orig string) {
		for _, q := range out {
			if q.term == string(t) {
				return
			}
		}
		q := qterm{term: string(t), word: strings.ToLower(orig)}
		q.id, q.known = ix.dict[q.term]
		if q.known {
			q.idf = idf(n, float64(len(ix.postings[q.id])))
			q.pathIDF = idf(n, float64(ix.pathDF[q.id]))
		}
		out = append(out, q)
	})
	return out
}

// idf is the BM25 inverse document frequency (the Lucene form, never negative).
func idf(n, df float64) float64 {
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}

// signals are one query's per-document scores.
type signals struct {
	bm25, defs, path, base []float64
}

func (ix *Index) score(qt []qterm) signals {
	n := len(ix.docs)
	s := signals{
		bm25: make([]float64, n),
		defs: make([]float64, n),
		path: make([]float64, n),
		base: make([]float64, n),
	}
	qpos := map[uint32]int{}
	for k, q := range qt {
		if q.known {
			qpos[q.id] = k
		}
	}

	// (1) BM25 over contents.
	for _, q := range qt {
		if !q.known {
			continue
		}
		for _, p := range ix.postings[q.id] {
			s.bm25[p.doc] += q.idf * ix.bm25TF(p)
		}
	}

	// (2) Definitions.
	var cands []uint32
	seen := map[uint32]bool{}
	for _, q := range qt {
		if !q.known {
			continue
		}
		for _, d := range ix.defDocs[q.id] {
			if !seen[d] {
				seen[d] = true
				cands = append(cands, d)
			}
		}
	}
	covered := make([]bool, len(qt))
	for _, d := range cands {
		clear(covered)
		best := 0.0
		for _, sym := range ix.docs[d].symbols {
			if v := symbolScore(sym, qt, qpos, covered); v > best {
				best = v
			}
		}
		breadth := 0.0
		for k, c := range covered {
			if c {
				breadth += qt[k].idf
			}
		}
		s.defs[d] = best + defBreadth*breadth
	}

	// (3) Path.
	for i := range ix.docs {
		d := &ix.docs[i]
		v := 0.0
		for _, id := range d.fileTerms {
			if k, ok := qpos[id]; ok {
				v += qt[k].pathIDF
			}
		}
		for _, id := range d.dirTerms {
			if k, ok := qpos[id]; ok && !slices.Contains(d.fileTerms, id) {
				v += dirWeight * qt[k].pathIDF
			}
		}
		s.path[i] = v
	}

	normalise(s.bm25)
	normalise(s.defs)
	normalise(s.path)
	for i := range ix.docs {
		v := weightBM25*s.bm25[i] + weightDefs*s.defs[i] + weightPath*s.path[i]
		s.base[i] = v * ix.docs[i].penalty()
	}
	normalise(s.base)
	return s
}

// bm25TF is the term-frequency part of BM25 for one posting.
func (ix *Index) bm25TF(p posting) float64 {
	tf := float64(p.tf)
	dl := float64(ix.docs[p.doc].length)
	return tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*dl/ix.avgLen))
}

// symbolScore is the IDF of the query terms a symbol's name contains, scaled by the square
// root of the share of the name they cover: "server" matches Server fully and NewServer
// half. It marks the covered query terms.
func symbolScore(sym symbol, qt []qterm, qpos map[uint32]int, covered []bool) float64 {
	if len(sym.terms) == 0 {
		return 0
	}
	sum, hits := 0.0, 0
	for _, id := range sym.terms {
		if k, ok := qpos[id]; ok {
			sum += qt[k].idf
			hits++
			covered[k] = true
		}
	}
	if hits == 0 {
		return 0
	}
	return sum * math.Sqrt(float64(hits)/float64(len(sym.terms)))
}

func normalise(v []float64) {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	if m == 0 {
		return
	}
	for i := range v {
		v[i] /= m
	}
}

func (d *doc) penalty() float64 {
	p := 1.0
	if d.test {
		p *= penaltyTest
	}
	if d.generated {
		p *= penaltyGenerated
	}
	if d.vendored {
		p *= penaltyVendored
	}
	return p
}

// relation is how a file reached by the import graph relates to the chosen file that
// boosted it.
type relation uint8

const (
	relImportedBy relation = iota + 1 // the chosen file imports this one
	relImports                        // this file imports the chosen one
)

type boost struct {
	sum     float64 // accumulated proximity
	ceiling float64 // score of the best chosen neighbour: a neighbour never outranks it
	from    int32   // the chosen file that gave the largest contribution
	best    float64
	rel     relation
}

type pick struct {
	doc       int32
	eff       float64
	requested bool
}

// Rank returns at most q.MaxFiles results, best first (requested paths first of all), and
// the tokens of included content: the sum of ContentTokens, never more than q.TokenBudget.
func (ix *Index) Rank(q Query) (results []Result, tokensUsed int) {
	if q.MaxFiles <= 0 || len(ix.docs) == 0 {
		return nil, 0
	}
	qt := ix.queryTerms(q.Task)
	s := ix.score(qt)
	picks, boosts := ix.choose(q, s)

	results = make([]Result, len(picks))
	maxEff := 0.0
	for _, p := range picks {
		maxEff = max(maxEff, p.eff)
	}
	for k, p := range picks {
		r := &results[k]
		r.Path = ix.docs[p.doc].path
		if maxEff > 0 {
			r.Score = p.eff / maxEff
		}
		r.Reason = ix.reason(p, qt, s, boosts[p.doc])
	}
	tokensUsed = ix.fill(results, picks, max(q.TokenBudget, 0))
	return results, tokensUsed
}

// choose orders the files: requested paths, then greedily the file with the best effective
// score, where a chosen file lifts its import-graph neighbours.
func (ix *Index) choose(q Query, s signals) ([]pick, map[int32]*boost) {
	var cands []int32
	for i, v := range s.base {
		if v > 0 {
			cands = append(cands, int32(i))
		}
	}
	slices.SortFunc(cands, func(a, b int32) int {
		if c := cmp.Compare(s.base[b], s.base[a]); c != 0 {
			return c
		}
		return strings.Compare(ix.docs[a].path, ix.docs[b].path)
	})

	chosen := make([]bool, len(ix.docs))
	boosts := map[int32]*boost{}
	var picks []pick
	eff := func(d int32) float64 {
		b := s.base[d]
		if bs := boosts[d]; bs != nil {
			return max(b, min(b+bs.sum, bs.ceiling))
		}
		return b
	}
	take := func(d int32, e float64, requested bool) {
		chosen[d] = true
		picks = append(picks, pick{doc: d, eff: e, requested: requested})
		src := e
		if requested {
			src = 1 // the caller said it matters: its neighbours matter too
		}
		nb := len(ix.imports[d]) + len(ix.importedBy[d])
		c := proximityWeight * src * math.Pow(proximityDecay, float64(len(picks)-1))
		if float64(nb) > proximityFan {
			c /= math.Sqrt(float64(nb) / proximityFan)
		}
		lift := func(n int32, rel relation) {
			if chosen[n] {
				return
			}
			bs := boosts[n]
			if bs == nil {
				bs = &boost{}
				boosts[n] = bs
			}
			bs.sum += c
			bs.ceiling = max(bs.ceiling, src)
			if c > bs.best {
				bs.best, bs.from, bs.rel = c, d, rel
			}
		}
		for _, n := range ix.imports[d] {
			lift(n, relImportedBy)
		}
		for _, n := range ix.importedBy[d] {
			lift(n, relImports)
		}
	}

	for _, p := range q.IncludePaths {
		if len(picks) >= q.MaxFiles {
			break
		}
		if d, ok := ix.byPath[p]; ok && !chosen[d] {
			take(d, eff(d), true)
		}
	}
	next := 0
	for len(picks) < q.MaxFiles {
		for next < len(cands) && chosen[cands[next]] {
			next++
		}
		best, bestEff := int32(-1), 0.0
		if next < len(cands) {
			best, bestEff = cands[next], eff(cands[next])
		}
		for d := range boosts {
			if chosen[d] {
				continue
			}
			e := eff(d)
			if e > bestEff || (e == bestEff && e > 0 && (best < 0 || ix.docs[d].path < ix.docs[best].path)) {
				best, bestEff = d, e
			}
		}
		if best < 0 || bestEff <= 0 {
			break
		}
		take(best, bestEff, false)
	}
	// A file's lift can grow after files ranked above it were chosen; the reported score
	// never exceeds that of the file before it, so scores read in rank order.
	for k := 1; k < len(picks); k++ {
		if !picks[k-1].requested {
			picks[k].eff = min(picks[k].eff, picks[k-1].eff)
		}
	}
	return picks, boosts
}

// fill decides, in rank order, how much of each file the budget allows.
func (ix *Index) fill(results []Result, picks []pick, budget int) int {
	ix.prefetch(picks, budget)
	used := 0
	for k, p := range picks {
		r := &results[k]
		full := ix.tokenCount(p.doc)
		r.Tokens = full
		remaining := budget - used
		if full <= remaining && full*wholeShare <= budget {
			r.Content, r.Inclusion, r.ContentTokens = ix.docs[p.doc].content, InclusionWhole, full
			used += full
			continue
		}
		limit := min(remaining, budget/outlineShare)
		if text, n, ok := ix.outlineWithin(p.doc, limit); ok {
			r.Content, r.Inclusion, r.ContentTokens = text, InclusionOutline, n
			used += n
		}
	}
	return used
}

// prefetch does the slow part of a first Rank on a fresh index in parallel: it counts the
// tokens of the picked files (BPE is the slow part), then builds the outlines of those too
// large to come whole under any remaining budget.
func (ix *Index) prefetch(picks []pick, budget int) {
	parallel(len(picks), func(k int) { ix.tokenCount(picks[k].doc) })
	var big []int32
	for _, p := range picks {
		if ix.tokenCount(p.doc)*wholeShare > budget {
			big = append(big, p.doc)
		}
	}
	parallel(len(big), func(k int) { ix.outlineOf(big[k]) })
}

// parallel calls fn(0) … fn(n-1) on up to GOMAXPROCS goroutines.
func parallel(n int, fn func(k int)) {
	if n == 1 {
		fn(0)
	}
	if n <= 1 {
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				fn(k)
			}
		}()
	}
	wg.Wait()
}

// tokenCount returns the tokens of a file's content, counted once per index.
func (ix *Index) tokenCount(i int32) int {
	d := &ix.docs[i]
	d.tokensOnce.Do(func() { d.tokens = tokens.Count(d.content) })
	return d.tokens
}

// reason says in one line why a file was picked.
func (ix *Index) reason(p pick, qt []qterm, s signals, bs *boost) string {
	d := &ix.docs[p.doc]
	var parts []string
	if p.requested {
		parts = append(parts, "requested")
	}
	if s.defs[p.doc] > 0 {
		parts = append(parts, ix.defReason(d, qt))
	}
	if s.bm25[p.doc] > 0 {
		parts = append(parts, ix.bm25Reason(p.doc, qt))
	}
	if s.path[p.doc] > 0 {
		var words []string
		for _, q := range qt {
			if q.known && (slices.Contains(d.fileTerms, q.id) || slices.Contains(d.dirTerms, q.id)) {
				words = append(words, q.word)
			}
		}
		parts = append(parts, "path matches '"+strings.Join(words, ", ")+"'")
	}
	if bs != nil && bs.sum > 0 && !p.requested {
		other := ix.docs[bs.from].path
		if bs.rel == relImportedBy {
			parts = append(parts, "imported by "+other)
		} else {
			parts = append(parts, "imports "+other)
		}
	}
	var pen []string
	if d.test {
		pen = append(pen, "test file")
	}
	if d.generated {
		pen = append(pen, "generated")
	}
	if d.vendored {
		pen = append(pen, "vendored or fixture path")
	}
	if len(pen) > 0 {
		parts = append(parts, "penalised: "+strings.Join(pen, ", "))
	}
	if len(parts) == 0 {
		return "no match"
	}
	return strings.Join(parts, "; ")
}

// defReason names up to three best-matching definitions and the query words they match.
func (ix *Index) defReason(d *doc, qt []qterm) string {
	qpos := map[uint32]int{}
	for k, q := range qt {
		if q.known {
			qpos[q.id] = k
		}
	}
	type scored struct {
		name string
		v    float64
	}
	var syms []scored
	covered := make([]bool, len(qt))
	scratch := make([]bool, len(qt))
	for _, sym := range d.symbols {
		if v := symbolScore(sym, qt, qpos, scratch); v > 0 {
			syms = append(syms, scored{sym.name, v})
		}
	}
	slices.SortStableFunc(syms, func(a, b scored) int { return cmp.Compare(b.v, a.v) })
	var names []string
	for _, sym := range syms {
		if len(names) == 3 {
			break
		}
		if !slices.Contains(names, sym.name) {
			names = append(names, sym.name)
		}
	}
	for _, sym := range d.symbols {
		if slices.Contains(names, sym.name) {
			symbolScore(sym, qt, qpos, covered)
		}
	}
	var words []string
	for k, c := range covered {
		if c {
			words = append(words, qt[k].word)
		}
	}
	more := ""
	if n := len(syms) - len(names); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return "defines " + strings.Join(names, ", ") + more + " (matches '" + strings.Join(words, "', '") + "')"
}

// bm25Reason lists the query words that contribute most to a file's BM25 score.
func (ix *Index) bm25Reason(d int32, qt []qterm) string {
	type contrib struct {
		word string
		v    float64
	}
	var cs []contrib
	for _, q := range qt {
		if !q.known {
			continue
		}
		ps := ix.postings[q.id]
		k, ok := slices.BinarySearchFunc(ps, uint32(d), func(p posting, t uint32) int { return cmp.Compare(p.doc, t) })
		if ok {
			cs = append(cs, contrib{q.word, q.idf * ix.bm25TF(ps[k])})
		}
	}
	slices.SortStableFunc(cs, func(a, b contrib) int { return cmp.Compare(b.v, a.v) })
	var words []string
	for _, c := range cs[:min(len(cs), 5)] {
		words = append(words, c.word)
	}
	more := ""
	if len(cs) > 5 {
		more = fmt.Sprintf(" +%d", len(cs)-5)
	}
	return "BM25 on '" + strings.Join(words, ", ") + "'" + more
}
