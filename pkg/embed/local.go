// Package embed holds TheFold's built-in embedders, which need no provider, no network and
// no file at run time, so memory search works on a stack with no provider configured:
// Local ("local@1") is deterministic feature hashing, good at what TheFold mostly compares
// (code, identifiers, short technical prose) but lexical, with mostly-zero vectors; Trained
// ("local@2") adds word vectors trained offline (make embed-model) and shipped inside the
// binary, so words that mean alike meet, and its vectors are dense. Both are weaker than a
// provider's embedding model.
package embed

import (
	"fmt"
	"math"
	"strings"
)

const (
	// DefaultDims is the size used when none is asked for.
	DefaultDims = 384
	// MinDims and MaxDims bound the sizes Local accepts: fewer buckets collide too much to
	// be useful, more only cost storage.
	MinDims = 16
	MaxDims = 4096
)

// Feature weights. Words (and identifier parts, which are words too) carry the meaning;
// whole identifiers reward the exact name; n-grams catch spelling variants and inflections
// ("retry", "retries", "retrying") and bigrams word order. A word's n-grams together have
// the L2 weight gramWeight however long the word is, so they neither drown the words nor let
// long words outweigh short ones.
const (
	wordWeight     = 1.0
	stopWordWeight = 0.25
	identWeight    = 1.0
	gramWeight     = 1.0
	bigramWeight   = 0.5
	minGram        = 3
	maxGram        = 5
)

// Feature kinds, hashed first so the same string as a word and as an n-gram are different
// features.
const (
	kindWord   = 'w'
	kindIdent  = 'i'
	kindGram   = 'g'
	kindBigram = 'b'
)

// Local is the "local" embedder. It is safe for concurrent use.
type Local struct{ dims int }

// New returns a Local making vectors of dims dimensions, DefaultDims when dims is 0, or an
// error when dims is outside MinDims..MaxDims.
func New(dims int) (*Local, error) {
	if dims == 0 {
		dims = DefaultDims
	}
	if dims < MinDims || dims > MaxDims {
		return nil, fmt.Errorf("dimensions must be between %d and %d, got %d", MinDims, MaxDims, dims)
	}
	return &Local{dims: dims}, nil
}

// NewLocal is New for sizes known to be valid (constants, validated config); it panics on
// an invalid one. Check a size that comes from a request with New.
func NewLocal(dims int) *Local {
	l, err := New(dims)
	if err != nil {
		panic("embed.NewLocal: " + err.Error())
	}
	return l
}

// Name is the model name reported for Local's vectors. Vectors are comparable only at the
// same size, so stores key them by name and Dimensions together ("local-384").
func (l *Local) Name() string { return "local" }

// Dimensions is the size of every vector Embed returns.
func (l *Local) Dimensions() int { return l.dims }

// Embed returns one L2-normalised vector per text, in order. The same text always gets the
// same vector, in any process and batch. A text with no letters or digits at all (empty,
// whitespace, punctuation) has no features and gets the zero vector, which is similar to
// nothing.
func (l *Local) Embed(texts []string) [][]float32 {
	out := make([][]float32, len(texts))
	var b bag
	sum := make([]float64, l.dims)
	for i, text := range texts {
		b.hashed(text, sum)
		out[i] = normalise(sum)
	}
	return out
}

// hashed sets sum to text's features hashed into len(sum) signed buckets.
func (b *bag) hashed(text string, sum []float64) {
	b.reset()
	b.collect(text)
	clear(sum)
	for _, f := range b.feats {
		h := mix(f.hash)
		// Sublinear tf of the feature's mean weight: the same n-gram may come from words
		// of different lengths.
		v := f.weight / float64(f.tf) * (1 + math.Log(float64(f.tf)))
		if h>>63 != 0 {
			v = -v
		}
		sum[h%uint64(len(sum))] += v
	}
}

func normalise(sum []float64) []float32 {
	var sq float64
	for _, x := range sum {
		sq += x * x
	}
	v := make([]float32, len(sum))
	if sq == 0 {
		return v
	}
	n := math.Sqrt(sq)
	for j, x := range sum {
		v[j] = float32(x / n)
	}
	return v
}

// feature is one distinct feature of a text, counted.
type feature struct {
	hash uint64
	// weight is the sum of the occurrences' weights.
	weight float64
	tf     int
}

// bag collects a text's features. It keeps them in first-seen order (the map only indexes
// them) so the floating-point sums run in the same order every time: iterating the map
// would make the last bits of a vector differ between runs.
type bag struct {
	index map[uint64]int
	feats []feature
	parts []string
	runes []rune
	prev  string // the last content word, for bigrams
	// weigh, when set, scales a word's features (a word's informativeness: local@2 knows
	// how common each word is); Local leaves it nil.
	weigh func(word string) float64
}

func (b *bag) reset() {
	if b.index == nil {
		b.index = make(map[uint64]int)
	}
	clear(b.index)
	b.feats = b.feats[:0]
	b.prev = ""
}

func (b *bag) add(h uint64, weight float64) {
	if i, ok := b.index[h]; ok {
		b.feats[i].tf++
		b.feats[i].weight += weight
		return
	}
	b.index[h] = len(b.feats)
	b.feats = append(b.feats, feature{hash: h, weight: weight, tf: 1})
}

func (b *bag) collect(text string) {
	tokens(text, func(tok string) {
		b.parts = splitIdentifier(tok, b.parts[:0])
		if len(b.parts) > 1 {
			b.add(newHash(kindIdent).str(strings.ToLower(tok)).sum(), identWeight)
		}
		for _, w := range b.parts {
			b.word(w)
		}
	})
}

// word adds a lower-cased word's features.
func (b *bag) word(w string) {
	if stopWords[w] {
		b.add(newHash(kindWord).str(w).sum(), stopWordWeight)
		return
	}
	scale := 1.0
	if b.weigh != nil {
		scale = b.weigh(w)
	}
	b.add(newHash(kindWord).str(w).sum(), scale*wordWeight)
	if b.prev != "" {
		b.add(newHash(kindBigram).str(b.prev).byte(0).str(w).sum(), scale*bigramWeight)
	}
	b.prev = w

	b.runes = append(append(append(b.runes[:0], '<'), []rune(w)...), '>')
	n := 0
	for size := minGram; size <= maxGram; size++ {
		n += max(len(b.runes)-size+1, 0)
	}
	gw := scale * gramWeight / math.Sqrt(float64(n))
	for size := minGram; size <= maxGram; size++ {
		for i := 0; i+size <= len(b.runes); i++ {
			h := newHash(kindGram)
			for _, r := range b.runes[i : i+size] {
				h = h.rune(r)
			}
			b.add(h.sum(), gw)
		}
	}
}
