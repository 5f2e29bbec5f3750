package embed

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/thefold/thefold/pkg/testenv"
)

func newTestTrained(t *testing.T) *Trained {
	t.Helper()
	tr, err := NewTrained(0)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestNewTrained(t *testing.T) {
	t.Parallel()
	wv, err := builtinVectors()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		dims, want int
		ok         bool
	}{
		{0, DefaultDims, true},
		{384, 384, true},
		{wv.dims, wv.dims, true},
		{1536, 1536, true},
		{wv.dims - 1, 0, false},
		{MinDims, 0, false},
		{MaxDims + 1, 0, false},
		{-384, 0, false},
	}
	for _, tc := range cases {
		tr, err := NewTrained(tc.dims)
		if tc.ok != (err == nil) {
			t.Errorf("NewTrained(%d) error = %v, want ok %v", tc.dims, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if tr.Dimensions() != tc.want || tr.Name() != "local@2" || tr.Version() != "local@2" {
			t.Errorf("NewTrained(%d) = %s/%s/%d, want local@2/local@2/%d", tc.dims, tr.Name(), tr.Version(), tr.Dimensions(), tc.want)
		}
		for _, v := range tr.Embed([]string{"some text", ""}) {
			if len(v) != tc.want {
				t.Errorf("NewTrained(%d): vector of %d dimensions, want %d", tc.dims, len(v), tc.want)
			}
		}
	}
	if v := NewLocal(0).Version(); v != "local@1" {
		t.Errorf("Local.Version() = %q, want local@1", v)
	}
}

// The embedded model must be the one training-manifest.txt trains: a manifest changed
// without make embed-model would otherwise go unnoticed.
func TestBuiltinModelMatchesManifest(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("training-manifest.txt")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	m, err := decodeBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	if m.Manifest != hex.EncodeToString(sum[:]) {
		t.Errorf("local2.model was trained from manifest %s, training-manifest.txt is %x: run make embed-model", m.Manifest, sum)
	}
	if m.Version != "local@2" {
		t.Errorf("model version %q, want local@2", m.Version)
	}
}

func TestTrainedIsDeterministic(t *testing.T) {
	t.Parallel()
	batch := newTestTrained(t).Embed(sample)
	reversed := slices.Clone(sample)
	slices.Reverse(reversed)
	rev := newTestTrained(t).Embed(reversed)
	for i, text := range sample {
		one := newTestTrained(t).Embed([]string{text})[0]
		if !slices.Equal(one, batch[i]) || !slices.Equal(rev[len(sample)-1-i], batch[i]) {
			t.Errorf("%q: vector depends on the batch", text)
		}
	}
}

// Run with -race: the model is decoded once, shared, and only read.
func TestTrainedConcurrentUse(t *testing.T) {
	t.Parallel()
	tr := newTestTrained(t)
	want := tr.Embed(sample)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			other := newTestTrained(t) // instances share the decoded model
			for i := range sample {
				e := tr
				if g%2 == 1 {
					e = other
				}
				if got := e.Embed(sample[i : i+1])[0]; !slices.Equal(got, want[i]) {
					t.Errorf("goroutine %d: %q differs", g, sample[i])
				}
			}
		})
	}
	wg.Wait()
}

func TestTrainedEmptyTextIsZero(t *testing.T) {
	t.Parallel()
	tr := newTestTrained(t)
	for _, text := range []string{"", "   \n\t", "... --- ///", "🚀"} {
		v := tr.Embed([]string{text})[0]
		if len(v) != DefaultDims || norm(v) != 0 {
			t.Errorf("%q: %d dimensions, norm %v; want %d, 0", text, len(v), norm(v), DefaultDims)
		}
	}
	for _, v := range tr.Embed(sample) {
		if n := norm(v); n < 0.999 || n > 1.001 {
			t.Errorf("norm %v, want 1", n)
		}
	}
}

func TestTrainedSimilarity(t *testing.T) {
	t.Parallel()
	tr := newTestTrained(t)
	cases := []struct{ text, near, far string }{
		// Different words, same meaning: only the word vectors can see it.
		{"remove the file", "delete a document", "parse the configuration"},
		{"retry the request after a delay", "backoff between attempts", "render the HTML template"},
		{"guard the map with a mutex", "lock before concurrent writes", "compress the response with gzip"},
		{"the TLS certificate expired", "renew the x509 cert", "the goroutine leaked"},
		// Exact names still count.
		{"func parseHTTPRequest(r io.Reader)", "parseHTTPRequest fails on a short body", "func writeCSVRow(w io.Writer)"},
	}
	for _, tc := range cases {
		v := tr.Embed([]string{tc.text, tc.near, tc.far})
		near, far := cosine(v[0], v[1]), cosine(v[0], v[2])
		if near <= far {
			t.Errorf("%q: %q at %.3f is not nearer than %q at %.3f", tc.text, tc.near, near, tc.far, far)
		}
	}
}

// Dense vectors are what an HNSW graph needs; Local's are mostly zero.
func TestTrainedVectorsAreDense(t *testing.T) {
	t.Parallel()
	v := newTestTrained(t).Embed([]string{"retry the HTTP request with backoff"})[0]
	zero := 0
	for _, x := range v {
		if x == 0 {
			zero++
		}
	}
	if zero > len(v)/10 {
		t.Errorf("%d of %d components are zero", zero, len(v))
	}
}

// A damaged built-in model must stop NewTrained with a clear error, not give vectors.
func TestCorruptBuiltinModelFails(t *testing.T) {
	t.Parallel()
	for name, b := range map[string][]byte{
		"truncated": model[:len(model)/3],
		"empty":     nil,
		"flipped":   func() []byte { c := slices.Clone(model); c[len(c)/2] ^= 0xff; return c }(),
	} {
		if _, err := decodeModel(b); err == nil || !strings.Contains(err.Error(), "local@2 model") {
			t.Errorf("%s: decodeModel error = %v, want one naming the local@2 model", name, err)
		}
	}
}

func BenchmarkTrainedEmbed(b *testing.B) {
	const para = "The builder retries a failing HTTP request with exponential backoff (see retryHTTPRequest in " +
		"internal/client/retry.go) until max_retry_count is reached, then reports the error to the agent. "
	text := strings.Repeat(para, 1024/len(para)+1)[:1024]
	tr, err := NewTrained(0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tr.Embed([]string{text})
	}
}

// What the first NewTrained in a process costs: decoding the embedded model.
func BenchmarkDecodeModel(b *testing.B) {
	for b.Loop() {
		m, err := decodeBuiltin()
		if err != nil {
			b.Fatal(err)
		}
		newWordVectors(m, sifA)
	}
}

func FuzzTrainedEmbed(f *testing.F) {
	for _, s := range sample {
		f.Add(s)
	}
	tr, err := NewTrained(0)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v := tr.Embed([]string{text})[0]
		if len(v) != DefaultDims {
			t.Fatalf("%d dimensions", len(v))
		}
		if n := norm(v); n != 0 && (n < 1-1e-5 || n > 1+1e-5) {
			t.Fatalf("norm %f", n)
		}
		if again := tr.Embed([]string{"x", text})[1]; !slices.Equal(v, again) {
			t.Fatal("vector depends on the batch")
		}
	})
}

// A word outside the vocabulary still lands near the words it is made of.
func TestTrainedSubwords(t *testing.T) {
	t.Parallel()
	// One goroutine's computation: the race detector multiplies its time by ten and finds
	// nothing in it (make test-unit runs it without -race).
	testenv.CPUBound(t)
	tr := newTestTrained(t)
	for _, w := range []string{"retrier", "kubeconfigs"} {
		if _, ok := tr.wv.index[w]; ok {
			t.Fatalf("%q is in the vocabulary; pick a word that is not", w)
		}
	}
	dense := func(text string) []float64 {
		v := make([]float64, tr.wv.dims)
		tr.dense(text, v)
		return v
	}
	dot := func(a, b []float64) (s float64) {
		for k := range a {
			s += a[k] * b[k]
		}
		return s
	}
	if near, far := dot(dense("retrier"), dense("retry")), dot(dense("retrier"), dense("certificate")); near <= far {
		t.Errorf("retrier: retry at %.3f, certificate at %.3f", near, far)
	}
	if v := dense("zqxjvk"); dot(v, v) != 0 && dot(v, v) < 0.99 {
		t.Errorf("an unknown word's vector has norm² %v, want 0 or 1", dot(v, v))
	}
}
