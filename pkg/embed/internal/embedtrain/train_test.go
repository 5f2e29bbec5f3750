package main

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/embed/internal/modelfile"
)

func TestJacobiEigen(t *testing.T) {
	t.Parallel()
	// A = V·diag(5, 2, 0.5)·Vᵀ for a rotation V.
	c, s := math.Cos(0.3), math.Sin(0.3)
	v := []float64{c, -s, 0, s, c, 0, 0, 0, 1}
	d := []float64{5, 2, 0.5}
	a := make([]float64, 9)
	for i := range 3 {
		for j := range 3 {
			for k := range 3 {
				a[i*3+j] += v[i*3+k] * d[k] * v[j*3+k]
			}
		}
	}
	vals, vecs := jacobiEigen(a, 3)
	for k, want := range d {
		if math.Abs(vals[k]-want) > 1e-9 {
			t.Errorf("eigenvalue %d = %v, want %v", k, vals[k], want)
		}
		// A·x = λ·x for the returned column.
		for i := range 3 {
			var ax float64
			for j := range 3 {
				ax += a[i*3+j] * vecs[j*3+k]
			}
			if math.Abs(ax-vals[k]*vecs[i*3+k]) > 1e-9 {
				t.Errorf("column %d is not an eigenvector", k)
			}
		}
	}
}

func TestOrthonormalise(t *testing.T) {
	t.Parallel()
	const n, l = 500, 12
	rng := rand.New(rand.NewPCG(3, 4))
	y := make([]float64, n*l)
	for i := range y {
		y[i] = rng.NormFloat64() + 3 // far from orthogonal
	}
	orthonormalise(y, l)
	g := gram(y, l)
	for a := range l {
		for b := range l {
			want := 0.0
			if a == b {
				want = 1
			}
			if math.Abs(g[a*l+b]-want) > 1e-9 {
				t.Fatalf("QᵀQ[%d][%d] = %v, want %v", a, b, g[a*l+b], want)
			}
		}
	}
}

func TestParseManifest(t *testing.T) {
	t.Parallel()
	good := "# comment\nexample.com/a@v1.0.0 train\n\nexample.com/b@v2.0.0 tune # held out\n"
	mods, err := parseManifest([]byte(good))
	if err != nil || len(mods) != 2 || mods[1] != (module{"example.com/b@v2.0.0", "tune"}) {
		t.Errorf("parseManifest = %v, %v", mods, err)
	}
	for _, bad := range []string{"", "# only a comment\n", "example.com/a train\n", "example.com/a@v1 test\n", "example.com/a@v1\n"} {
		if _, err := parseManifest([]byte(bad)); err == nil {
			t.Errorf("parseManifest(%q) accepted", bad)
		}
	}
}

// A small corpus of two topics (30 made-up words each, mixed at random within a
// paragraph): words of one topic must end up near each other and far from the other's, and training twice must give the same bytes.
func TestTrainIsDeterministicAndLearns(t *testing.T) {
	t.Parallel()
	var text strings.Builder
	topics := make([][]string, 2)
	for i, prefix := range []string{"mu", "gz"} {
		for _, a := range "abcdef" {
			for _, b := range "ghijk" {
				topics[i] = append(topics[i], prefix+string(a)+string(b))
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		words := topics[rng.IntN(2)]
		for range 12 {
			text.WriteString(words[rng.IntN(len(words))] + " ")
		}
		text.WriteString("\n\n")
	}
	build := func() []byte {
		var c corpus
		c.addText([]byte(text.String()))
		v, seq := c.vocabulary(100, 1)
		m := train(v, seq, config{dims: 2, window: 3, smoothing: 0.75, eigenPow: -0.5})
		var buf bytes.Buffer
		if err := modelfile.Encode(&buf, m); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	b1, b2 := build(), build()
	if !bytes.Equal(b1, b2) {
		t.Fatal("the same corpus trained twice gives different models")
	}
	m, err := modelfile.Decode(bytes.NewReader(b1))
	if err != nil {
		t.Fatal(err)
	}
	vec := func(w string) []float64 {
		for i, x := range m.Words {
			if x == w {
				out := make([]float64, m.Dims)
				for k := range out {
					out[k] = float64(m.Vec[i*m.Dims+k]) * float64(m.Scale[i])
				}
				return out
			}
		}
		t.Fatalf("%q not in the vocabulary %v", w, m.Words)
		return nil
	}
	cos := func(a, b []float64) float64 {
		var d, na, nb float64
		for k := range a {
			d, na, nb = d+a[k]*b[k], na+a[k]*a[k], nb+b[k]*b[k]
		}
		return d / math.Sqrt(na*nb)
	}
	same, other := cos(vec("muag"), vec("mufk")), cos(vec("muag"), vec("gzag"))
	if same < 0.9 || other > 0.1 {
		t.Errorf("cos(muag, mufk) = %.3f (same topic), cos(muag, gzag) = %.3f (other topic)", same, other)
	}
}
