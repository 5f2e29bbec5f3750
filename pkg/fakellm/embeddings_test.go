package fakellm

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

func floats(t *testing.T, v any) []float64 {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("not an array: %v", v)
	}
	out := make([]float64, len(a))
	for i, x := range a {
		out[i] = x.(float64)
	}
	return out
}

func cosine(a, b []float64) float64 {
	var dot, na, nb float64
	for i := range a {
		dot, na, nb = dot+a[i]*b[i], na+a[i]*a[i], nb+b[i]*b[i]
	}
	return dot / math.Sqrt(na*nb)
}

func sameVector(t *testing.T, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("length %d, want %d", len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-6 {
			t.Fatalf("[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestEmbed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		a, b    string
		atLeast float64
		atMost  float64
	}{
		{"identical", "retry the build", "retry the build", 0.999999, 1.000001},
		{"shared words", "add rate limiting to the API", "rate limiting for the API gateway", 0.4, 0.95},
		{"same words reordered still differ", "alpha beta gamma", "gamma beta alpha", 0.8, 0.99},
		{"unrelated", "parse the yaml config", "zebra quantum orchestra", -0.3, 0.3},
		{"no words at all", "!!!", "???", -0.3, 0.3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			va, vb := Embed(c.a, 256), Embed(c.b, 256)
			if len(va) != 256 {
				t.Fatalf("length %d", len(va))
			}
			if n := cosine(va, va); math.Abs(n-1) > 1e-9 || math.Abs(math.Sqrt(dot(va, va))-1) > 1e-9 {
				t.Errorf("not L2-normalised")
			}
			if got := cosine(va, vb); got < c.atLeast || got > c.atMost {
				t.Errorf("cosine(%q, %q) = %.3f, want in [%.2f, %.2f]", c.a, c.b, got, c.atLeast, c.atMost)
			}
		})
	}
	if len(Embed("x", 0)) != defaultDimensions {
		t.Error("dimensions 0 should mean the default")
	}
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func TestOpenAIEmbeddings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script Script
		body   string
		texts  []string
		dims   int
		base64 bool
	}{
		{"one string, default size", Script{}, `{"model":"text-embedding-3-small","input":"hello world"}`, []string{"hello world"}, 1536, false},
		{"list with dimensions", Script{}, `{"model":"e","input":["a b","c d"],"dimensions":8}`, []string{"a b", "c d"}, 8, false},
		{"script default size", Script{EmbeddingDimensions: 64}, `{"model":"e","input":["a b"]}`, []string{"a b"}, 64, false},
		{"base64 float32", Script{}, `{"model":"e","input":"hello","dimensions":16,"encoding_format":"base64"}`, []string{"hello"}, 16, true},
		{"an entry with only latency answers normally", Script{Embeddings: []Response{{Latency: Duration(1)}}}, `{"model":"e","input":"x"}`, []string{"x"}, 1536, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, url := Start(t, &c.script)
			a := post(t, url, "/v1/embeddings", c.body)
			if a.status != 200 {
				t.Fatalf("%d %s", a.status, a.raw)
			}
			if str(t, a.body, "object") != "list" || num(t, a.body, "usage", "prompt_tokens") != inputTokens(c.texts) {
				t.Errorf("answer = %.200s", a.raw)
			}
			for i, text := range c.texts {
				if num(t, a.body, "data", i, "index") != i || str(t, a.body, "data", i, "object") != "embedding" {
					t.Errorf("data[%d] = %v", i, get(t, a.body, "data", i))
				}
				var got []float64
				if c.base64 {
					b, err := base64.StdEncoding.DecodeString(str(t, a.body, "data", i, "embedding"))
					if err != nil {
						t.Fatal(err)
					}
					for j := 0; j < len(b); j += 4 {
						got = append(got, float64(math.Float32frombits(binary.LittleEndian.Uint32(b[j:]))))
					}
				} else {
					got = floats(t, get(t, a.body, "data", i, "embedding"))
				}
				sameVector(t, got, Embed(text, c.dims))
			}
			if recs := srv.Requests(); len(recs) != 1 || recs[0].Endpoint != EndpointOpenAIEmbeddings || recs[0].InputTokens != inputTokens(c.texts) {
				t.Errorf("record = %+v", recs)
			}
		})
	}

	bad := []struct{ name, body, want string }{
		{"empty string", `{"model":"e","input":""}`, "input"},
		{"empty list", `{"model":"e","input":[]}`, "input"},
		{"token arrays", `{"model":"e","input":[[1,2]]}`, "token arrays"},
		{"empty item", `{"model":"e","input":["a",""]}`, "input.1"},
		{"no model", `{"input":"a"}`, "model"},
		{"dimensions too large", `{"model":"e","input":"a","dimensions":100000}`, "dimensions"},
		{"encoding", `{"model":"e","input":"a","encoding_format":"int8"}`, "encoding_format"},
	}
	for _, b := range bad {
		t.Run("bad request: "+b.name, func(t *testing.T) {
			t.Parallel()
			_, url := Start(t, &Script{})
			a := post(t, url, "/v1/embeddings", b.body)
			if a.status != 400 || !strings.Contains(str(t, a.body, "error", "message"), b.want) {
				t.Errorf("%d %s, want 400 mentioning %q", a.status, a.raw, b.want)
			}
		})
	}
}

func TestGeminiEmbeddings(t *testing.T) {
	t.Parallel()
	_, url := Start(t, &Script{EmbeddingDimensions: 32})
	a := post(t, url, "/v1beta/models/text-embedding-004:batchEmbedContents", `{"requests":[
		{"model":"models/text-embedding-004","content":{"parts":[{"text":"first"}]},"outputDimensionality":8,"taskType":"RETRIEVAL_DOCUMENT"},
		{"model":"models/text-embedding-004","content":{"parts":[{"text":"second"}]}}]}`)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.raw)
	}
	sameVector(t, floats(t, get(t, a.body, "embeddings", 0, "values")), Embed("first", 8))
	sameVector(t, floats(t, get(t, a.body, "embeddings", 1, "values")), Embed("second", 32))

	a = post(t, url, "/v1beta/models/text-embedding-004:embedContent", `{"content":{"parts":[{"text":"one"}]}}`)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.raw)
	}
	sameVector(t, floats(t, get(t, a.body, "embedding", "values")), Embed("one", 32))

	for _, body := range []string{`{"requests":[]}`, `{"requests":[{"content":{"parts":[]}}]}`, `{"requests":[{"content":{"parts":[{"text":"a"}]},"outputDimensionality":-1}]}`, `{`} {
		if a := post(t, url, "/v1beta/models/e:batchEmbedContents", body); a.status != 400 || str(t, a.body, "error", "status") != "INVALID_ARGUMENT" {
			t.Errorf("%s: %d %s, want 400", body, a.status, a.raw)
		}
	}
}

func TestEmbeddingsScriptedErrors(t *testing.T) {
	t.Parallel()
	script := &Script{Embeddings: []Response{{Error: &Error{Status: 429, RetryAfter: 1}, Times: 2}, {}}}
	cases := []struct {
		name, path, body, errStatus string
	}{
		{"openai", "/v1/embeddings", `{"model":"e","input":"x"}`, ""},
		{"gemini", "/v1beta/models/e:batchEmbedContents", `{"requests":[{"content":{"parts":[{"text":"x"}]}}]}`, "RESOURCE_EXHAUSTED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, url := Start(t, script)
			for i, want := range []int{429, 429, 200, 500} {
				a := post(t, url, c.path, c.body)
				if a.status != want {
					t.Fatalf("request %d: %d %s, want %d", i, a.status, a.raw, want)
				}
				if want == 429 && c.errStatus != "" && str(t, a.body, "error", "status") != c.errStatus {
					t.Errorf("request %d: %s", i, a.raw)
				}
				if want == 500 && !strings.Contains(a.raw, "fakellm: script exhausted for") {
					t.Errorf("request %d: %s", i, a.raw)
				}
			}
		})
	}
}
