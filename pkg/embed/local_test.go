package embed

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func cosine(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func norm(v []float32) float64 { return math.Sqrt(cosine(v, v)) }

func TestNew(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dims, want int
		ok         bool
	}{
		{0, DefaultDims, true},
		{MinDims, MinDims, true},
		{384, 384, true},
		{1536, 1536, true},
		{MaxDims, MaxDims, true},
		{MinDims - 1, 0, false},
		{MaxDims + 1, 0, false},
		{-384, 0, false},
	}
	for _, tc := range cases {
		l, err := New(tc.dims)
		if tc.ok != (err == nil) {
			t.Errorf("New(%d) error = %v, want ok %v", tc.dims, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if l.Dimensions() != tc.want || l.Name() != "local" {
			t.Errorf("New(%d) = %s/%d, want local/%d", tc.dims, l.Name(), l.Dimensions(), tc.want)
		}
		for _, v := range l.Embed([]string{"some text", ""}) {
			if len(v) != tc.want {
				t.Errorf("New(%d): vector of %d dimensions, want %d", tc.dims, len(v), tc.want)
			}
		}
	}
}

func TestNewLocalPanicsOnInvalidSize(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("NewLocal(8) did not panic")
		}
	}()
	NewLocal(8)
}

var sample = []string{
	"retry the HTTP request with backoff",
	"func (c *Client) Do(ctx context.Context, req *http.Request) (*http.Response, error) {",
	"max_retry_count",
	"x",
	"Größenänderung des Fensters 日本語のテキスト 🚀 café",
	"\xff\xfe invalid UTF-8 \x00 and a NUL",
	strings.Repeat("word ", 500),
}

// The same text must give the same vector bit for bit, from a fresh instance and whatever
// else is in the batch: memory compares vectors stored by other processes.
func TestEmbedIsDeterministic(t *testing.T) {
	t.Parallel()
	batch := NewLocal(0).Embed(sample)
	reversed := slices.Clone(sample)
	slices.Reverse(reversed)
	rev := NewLocal(0).Embed(reversed)
	for i, text := range sample {
		alone := NewLocal(0).Embed([]string{text})[0]
		if !slices.Equal(alone, batch[i]) {
			t.Errorf("%q: alone and in a batch differ", text)
		}
		if !slices.Equal(rev[len(rev)-1-i], batch[i]) {
			t.Errorf("%q: differs with the batch reversed", text)
		}
	}
}

// TestEmbedGolden pins a few components of one vector. If it fails, the algorithm changed
// and every stored "local" vector is now incomparable with new ones: that needs a new model
// name, not a new golden value. (A tolerance, because Go may fuse multiply-adds on some
// architectures.)
func TestEmbedGolden(t *testing.T) {
	t.Parallel()
	v := NewLocal(0).Embed([]string{"retryHTTPRequest: retry the request with exponential backoff"})[0]
	golden := []struct {
		i int
		v float64
	}{
		{158, -0.379966},
		{181, 0.270279},
		{43, 0.239168},
		{68, -0.224414},
		{240, 0.224414},
		{171, 0.224414},
	}
	for _, g := range golden {
		if math.Abs(float64(v[g.i])-g.v) > 1e-5 {
			t.Errorf("component %d = %f, want %f", g.i, v[g.i], g.v)
		}
	}
}

func TestEmbedNorm(t *testing.T) {
	t.Parallel()
	for _, dims := range []int{MinDims, DefaultDims, MaxDims} {
		for i, v := range NewLocal(dims).Embed(sample) {
			if len(v) != dims {
				t.Errorf("dims %d, %q: %d dimensions", dims, sample[i], len(v))
			}
			if n := norm(v); math.Abs(n-1) > 1e-5 {
				t.Errorf("dims %d, %q: norm %f, want 1", dims, sample[i], n)
			}
		}
	}
}

// A text with nothing to hash gets the zero vector, not NaNs from dividing by a zero norm.
func TestEmbedNoFeaturesIsZero(t *testing.T) {
	t.Parallel()
	texts := []string{"", " \t\r\n", "... !!! --- ///", "🚀🚀"}
	for i, v := range NewLocal(0).Embed(texts) {
		if len(v) != DefaultDims {
			t.Fatalf("%q: %d dimensions", texts[i], len(v))
		}
		if n := norm(v); n != 0 {
			t.Errorf("%q: norm %f, want the zero vector", texts[i], n)
		}
	}
}

func TestEmbedSimilarity(t *testing.T) {
	t.Parallel()
	cases := []struct{ anchor, related, unrelated string }{
		{"retry the HTTP request with backoff", "retryHttpRequest backoff", "render the sidebar component in dark mode"},
		{"max_retry_count", "maxRetryCount", "minTimeoutSeconds"},
		{"parse the JSON config file", "func parseConfigJSON(path string) (*Config, error)", "the user clicked the logout button"},
		{"database connection pool exhausted", "pgxpool: too many connections to the database", "CSS grid layout for the landing page"},
		{"fix the failing test in auth", "auth_test.go: TestLogin fails with an expired token", "add dark mode to the settings page"},
		{"rate limiting for the API", "RateLimiter middleware limits API requests per second", "migrate the users table to add an email column"},
		{"retries", "retrying", "render"},
		{"Größe des Fensters ändern", "Fenstergröße ändern", "Datenbank sichern"},
		{"日本語のテキストを翻訳する", "日本語のテキスト", "データベース接続"},
	}
	for _, tc := range cases {
		t.Run(tc.anchor, func(t *testing.T) {
			t.Parallel()
			v := NewLocal(0).Embed([]string{tc.anchor, tc.related, tc.unrelated})
			related, unrelated := cosine(v[0], v[1]), cosine(v[0], v[2])
			if related <= unrelated {
				t.Errorf("cos(anchor, related) %.3f <= cos(anchor, unrelated) %.3f", related, unrelated)
			}
		})
	}
}

// Identifier parts and the words of prose are the same features, so a question in words
// finds the code that names it.
func TestEmbedIdentifierMatchesWords(t *testing.T) {
	t.Parallel()
	v := NewLocal(0).Embed([]string{"parse http request", "parseHTTPRequest", "parse_http_request", "p a r s e"})
	for _, i := range []int{1, 2} {
		if c := cosine(v[0], v[i]); c < 0.5 {
			t.Errorf("cos(words, identifier %d) = %.3f, want >= 0.5", i, c)
		}
	}
	if cosine(v[1], v[2]) <= cosine(v[1], v[3]) {
		t.Error("camelCase and snake_case of one name are not closer than scattered letters")
	}
}

func FuzzEmbed(f *testing.F) {
	for _, s := range sample {
		f.Add(s)
	}
	l := NewLocal(MinDims)
	f.Fuzz(func(t *testing.T, text string) {
		v := l.Embed([]string{text})[0]
		if len(v) != MinDims {
			t.Fatalf("%d dimensions", len(v))
		}
		if n := norm(v); n != 0 && math.Abs(n-1) > 1e-5 {
			t.Fatalf("norm %f", n)
		}
	})
}

func BenchmarkLocalEmbed(b *testing.B) {
	const para = "The builder retries a failing HTTP request with exponential backoff (see retryHTTPRequest in " +
		"internal/client/retry.go) until max_retry_count is reached, then reports the error to the agent. "
	text := strings.Repeat(para, 1024/len(para)+1)[:1024]
	l := NewLocal(0)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		l.Embed([]string{text})
	}
}
