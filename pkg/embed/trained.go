package embed

import (
	"bytes"
	_ "embed" // the local@2 word vectors
	"fmt"
	"math"
	"sync"
	"unicode/utf8"

	"github.com/thefold/thefold/pkg/embed/internal/modelfile"
)

// Embedder is what both built-in embedders offer.
type Embedder interface {
	// Name is the model name stored with the vectors ("local", "local@2"); vectors of
	// different names, or sizes, are not comparable.
	Name() string
	// Version names the embedder and its revision: "local@1" (feature hashing),
	// "local@2" (trained word vectors).
	Version() string
	Dimensions() int
	Embed(texts []string) [][]float32
}

var (
	_ Embedder = (*Local)(nil)
	_ Embedder = (*Trained)(nil)
)

// Version is "local@1": Local's vectors have not changed since it was the only local
// embedder.
func (l *Local) Version() string { return "local@1" }

// model is local2.model, written by make embed-model (internal/embedtrain) from the
// modules in training-manifest.txt.
//
//go:embed local2.model
var model []byte

// Run-time weights, tuned by TestTune on modules held out of training (see
// training-manifest.txt), never on the benchmarks' texts or GOROOT.
const (
	// sifA is the smooth inverse frequency constant (Arora, Liang and Ma 2017): a word of
	// corpus share p weighs sifA/(sifA+p), so "get" or "value" count far less than
	// "checksum".
	sifA = 1e-3
	// lexicalShare is the lexical part's share of the vector's squared norm; the word
	// vectors hold the rest. The lexical part keeps exact names and rare words matching.
	lexicalShare = 0.75
	// commonRemoved is how much of the corpus's common direction is taken out of the
	// averaged word vectors.
	commonRemoved = 1.0
	// lexicalSIF is the SIF constant of the lexical features' word weights.
	lexicalSIF = 3e-2
	// subwordWeight is the weight of a word outside the vocabulary, by its n-grams
	// (Markdown MRR 0.806 → 0.811, code 0.511 → 0.514 on the tuning modules).
	subwordWeight = 1.0
)

// wordVectors is a decoded model, ready to average.
type wordVectors struct {
	dims   int
	index  map[string]int32
	vec    []float32 // row i is word i's unit vector
	weight []float32 // row i's SIF weight
	prob   []float32 // row i's share of the corpus
	common []float32
	// grams is the mean vector of the vocabulary words having each character n-gram
	// bucket (fastText's subwords, derived instead of trained): a word outside the
	// vocabulary ("retryable", "kubeconfig") gets the mean of its n-grams' rows.
	grams []float32
}

// gramBuckets is how many n-gram buckets subword vectors have (12 MB of float32 at 192
// dimensions).
const gramBuckets = 1 << 14

// wordGrams calls yield with the bucket of each of w's character n-grams (minGram to
// maxGram runes of "<w>", the lexical features' n-grams).
func wordGrams(w string, runes []rune, yield func(bucket int)) []rune {
	runes = append(runes[:0], '<')
	for _, r := range w {
		runes = append(runes, r)
	}
	runes = append(runes, '>')
	for size := minGram; size <= maxGram; size++ {
		for i := 0; i+size <= len(runes); i++ {
			h := newHash(kindGram)
			for _, r := range runes[i : i+size] {
				h = h.rune(r)
			}
			yield(int(mix(h.sum()) % gramBuckets))
		}
	}
	return runes
}

// subword sets v to the unit mean of w's n-gram rows, and reports whether any of them had
// a vocabulary word.
func (wv *wordVectors) subword(w string, v []float64) bool {
	clear(v)
	d, any := wv.dims, false
	wordGrams(w, nil, func(b int) {
		row := wv.grams[b*d : (b+1)*d]
		for k, x := range row {
			v[k] += float64(x)
		}
		any = any || row[0] != 0 || row[1] != 0
	})
	if !any {
		return false
	}
	unit(v)
	return true
}

func (wv *wordVectors) lexWeight(i int32, a float64) float32 {
	return float32(a / (a + float64(wv.prob[i])))
}

func newWordVectors(m *modelfile.Model, a float64) *wordVectors {
	wv := &wordVectors{dims: m.Dims, index: make(map[string]int32, len(m.Words)), vec: make([]float32, len(m.Vec)),
		weight: make([]float32, len(m.Words)), prob: make([]float32, len(m.Words)), common: m.Common}
	for i, w := range m.Words {
		wv.index[w] = int32(i)
		p := math.Exp(float64(m.LogProb[i]))
		wv.weight[i] = float32(a / (a + p))
		wv.prob[i] = float32(p)
		for k := range m.Dims {
			wv.vec[i*m.Dims+k] = float32(m.Vec[i*m.Dims+k]) * m.Scale[i]
		}
	}
	// Bucket sums in vocabulary order, then means: deterministic.
	d := m.Dims
	wv.grams = make([]float32, gramBuckets*d)
	counts := make([]int32, gramBuckets)
	var runes []rune
	for i, w := range m.Words {
		row := wv.vec[i*d : (i+1)*d]
		runes = wordGrams(w, runes, func(b int) {
			counts[b]++
			g := wv.grams[b*d : (b+1)*d]
			for k, x := range row {
				g[k] += x
			}
		})
	}
	for b, c := range counts {
		if c > 1 {
			g := wv.grams[b*d : (b+1)*d]
			for k := range g {
				g[k] /= float32(c)
			}
		}
	}
	return wv
}

var builtin struct {
	once sync.Once
	wv   *wordVectors
	err  error
}

// builtinVectors decodes the embedded model once per process.
func builtinVectors() (*wordVectors, error) {
	builtin.once.Do(func() {
		m, err := decodeBuiltin()
		if err != nil {
			builtin.err = err
			return
		}
		builtin.wv = newWordVectors(m, sifA)
	})
	return builtin.wv, builtin.err
}

func decodeBuiltin() (*modelfile.Model, error) {
	return decodeModel(model)
}

func decodeModel(b []byte) (*modelfile.Model, error) {
	m, err := modelfile.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("embed: the built-in local@2 model: %w", err)
	}
	if m.Version != "local@2" {
		return nil, fmt.Errorf("embed: the built-in model is %q, want local@2", m.Version)
	}
	return m, nil
}

// Trained is the "local@2" embedder: the SIF-weighted average of word vectors trained
// offline (PPMI and SVD over Go modules' docs and code, shipped inside the binary), added to
// Local's lexical features weighted by how informative each word is (the model knows how
// common every word is). Its vectors have no zero components, which an approximate (HNSW)
// index finds its way through better than Local's mostly-zero ones (BenchmarkHNSWRecall),
// and its words know their neighbours ("remove" is near "delete"). It needs no network and no file at run time, is
// deterministic and safe for concurrent use.
type Trained struct {
	wv   *wordVectors
	dims int
	p    trainedParams
}

// trainedParams are the run-time weights (TestTune's grid).
type trainedParams struct {
	lexShare float64 // the lexical part's share of the squared norm
	lexA     float64 // SIF constant of the lexical word weights; 0: unweighted
	removed  float64 // how much of the common direction is removed
	concat   bool    // lexical and dense parts side by side, not superposed
	sublin   bool    // a word's dense weight grows with 1+log(tf), not tf
	oov      float64 // weight of a word outside the vocabulary (by its n-grams); 0: left out
}

// defaultParams are TestTune's choice. A word repeated in a text counts 1+log(tf) times in
// the average: a long document's vector then keeps its rarer topics instead of leaning to
// its most repeated words (Markdown MRR 0.793 → 0.806 on the tuning modules, code
// 0.514 → 0.511).
var defaultParams = trainedParams{lexShare: lexicalShare, lexA: lexicalSIF, removed: commonRemoved, sublin: true, oov: subwordWeight}

// NewTrained returns a Trained making vectors of dims dimensions (DefaultDims when 0),
// between the word vectors' size and MaxDims. It fails when the size cannot be honoured or
// the built-in model does not decode.
func NewTrained(dims int) (*Trained, error) {
	wv, err := builtinVectors()
	if err != nil {
		return nil, err
	}
	return newTrained(wv, dims, defaultParams)
}

func newTrained(wv *wordVectors, dims int, p trainedParams) (*Trained, error) {
	if dims == 0 {
		dims = DefaultDims
	}
	lo := wv.dims
	if p.concat {
		lo += MinDims
	}
	if dims < lo || dims > MaxDims {
		return nil, fmt.Errorf("local@2 dimensions must be between %d and %d, got %d", lo, MaxDims, dims)
	}
	return &Trained{wv: wv, dims: dims, p: p}, nil
}

// Name is the model name stored with Trained's vectors.
func (t *Trained) Name() string { return "local@2" }

// Version is "local@2".
func (t *Trained) Version() string { return "local@2" }

// Dimensions is the size of every vector Embed returns.
func (t *Trained) Dimensions() int { return t.dims }

// weigh is a word's lexical weight: common words count less.
func (t *Trained) weigh(w string) float64 {
	i, ok := t.wv.index[w]
	if !ok {
		return 1
	}
	return float64(t.wv.lexWeight(i, t.p.lexA))
}

// Embed returns one L2-normalised vector per text, in order: the same text always gets
// the same vector, in any process and batch. A text without letters or digits gets the
// zero vector.
func (t *Trained) Embed(texts []string) [][]float32 {
	d := t.wv.dims
	lexDims := t.dims
	if t.p.concat {
		lexDims -= d
	}
	var b bag
	if t.p.lexA > 0 {
		b.weigh = t.weigh
	}
	lex := make([]float64, lexDims)
	dense := make([]float64, d)
	lexW, denseW := math.Sqrt(t.p.lexShare), math.Sqrt(1-t.p.lexShare)
	out := make([][]float32, len(texts))
	for i, text := range texts {
		b.hashed(text, lex)
		unit(lex)
		t.dense(text, dense)
		sum := make([]float64, t.dims)
		if t.p.concat {
			for k, x := range dense {
				sum[k] = denseW * x
			}
			for k, x := range lex {
				sum[d+k] = lexW * x
			}
		} else {
			// The dense part is spread over every dimension, repeated as often as it fits:
			// the lexical buckets are random with respect to it, so the two add up without
			// interfering more than two random vectors do.
			for k, x := range lex {
				sum[k] = lexW * x
			}
			reps := t.dims / d
			w := denseW / math.Sqrt(float64(reps))
			for r := range reps {
				for k, x := range dense {
					sum[r*d+k] += w * x
				}
			}
		}
		out[i] = normalise(sum)
	}
	return out
}

// Learnable reports whether w is a word the trainer learns a vector for (and run time
// gives one from its letter sequences when it is outside the vocabulary): not a number or
// a single character, nor a run too long to be a word (hashes, base64). The trainer and
// run time must agree, hence one function.
func Learnable(w string) bool {
	if utf8.RuneCountInString(w) < 2 || len(w) > 32 {
		return false
	}
	for _, r := range w {
		if r < '0' || r > '9' {
			return true
		}
	}
	return false
}

func unit(v []float64) {
	var sq float64
	for _, x := range v {
		sq += x * x
	}
	if sq == 0 {
		return
	}
	n := math.Sqrt(sq)
	for k := range v {
		v[k] /= n
	}
}

// dense sets sum to the unit SIF-weighted average of text's known words, less the common
// direction, or to zeros when text has no known word.
func (t *Trained) dense(text string, sum []float64) {
	clear(sum)
	d := t.wv.dims
	// Known words by index, others (-1 - their position in unknown) by their n-grams.
	var order []int32
	var unknown []string
	tf := map[int32]int{}
	seen := map[string]int32{}
	Words(text, func(w string) {
		i, ok := t.wv.index[w]
		if !ok {
			if t.p.oov == 0 || !Learnable(w) {
				return
			}
			if i, ok = seen[w]; !ok {
				i = int32(-1 - len(unknown))
				seen[w] = i
				unknown = append(unknown, w)
			}
		}
		if tf[i] == 0 {
			order = append(order, i)
		}
		tf[i]++
	})
	any := false
	var sub []float64
	for _, i := range order {
		var row []float32
		var rowF []float64
		wt := 1.0
		if i >= 0 {
			row, wt = t.wv.vec[int(i)*d:int(i+1)*d], float64(t.wv.weight[i])
		} else {
			if sub == nil {
				sub = make([]float64, d)
			}
			if !t.wv.subword(unknown[-1-i], sub) {
				continue
			}
			rowF, wt = sub, t.p.oov
		}
		if t.p.sublin {
			wt *= 1 + math.Log(float64(tf[i]))
		} else {
			wt *= float64(tf[i])
		}
		any = true
		for k, x := range row {
			sum[k] += wt * float64(x)
		}
		for k, x := range rowF {
			sum[k] += wt * x
		}
	}
	if !any {
		return
	}
	var proj float64
	for k, c := range t.wv.common {
		proj += sum[k] * float64(c)
	}
	for k, c := range t.wv.common {
		sum[k] -= t.p.removed * proj * float64(c)
	}
	unit(sum)
}
