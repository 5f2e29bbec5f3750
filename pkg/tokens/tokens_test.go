package tokens_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/thefold/thefold/pkg/tokens"
)

// TestCount checks counts published for cl100k_base (OpenAI cookbook, "How to count tokens
// with tiktoken"), so a wrong rank file or split pattern fails here.
func TestCount(t *testing.T) {
	t.Parallel()
	if !tokens.Exact() {
		t.Fatalf("encoder did not build: %v", tokens.Err())
	}
	if got := tokens.Name(); got != "cl100k_base" {
		t.Errorf("Name() = %q, want cl100k_base", got)
	}
	cases := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"hello world", 2},
		{"tiktoken is great!", 6},
		{"antidisestablishmentarianism", 6},
		{"2 + 2 = 4", 7},
		{"お誕生日おめでとう", 9},
		{"Hello, world!", 4},
	}
	for _, c := range cases {
		if got := tokens.Count(c.in); got != c.want {
			t.Errorf("Count(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestSpecialTokensAreText checks that special-token text counts as ordinary text (and
// does not panic, as tiktoken's Encode with disallowed specials would).
func TestSpecialTokensAreText(t *testing.T) {
	t.Parallel()
	if got := tokens.Count("<|endoftext|>"); got <= 1 {
		t.Errorf("Count(<|endoftext|>) = %d, want it counted as text (> 1)", got)
	}
}

func TestEstimate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want int
	}{{"", 0}, {"a", 1}, {"abcd", 1}, {"abcde", 2}}
	for _, c := range cases {
		if got := tokens.Estimate(c.in); got != c.want {
			t.Errorf("Estimate(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestConcurrent counts from many goroutines at once (run with -race) and checks that every
// goroutine gets the count a lone caller gets.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	texts := make([]string, 16)
	for i := range texts {
		texts[i] = strings.Repeat(fmt.Sprintf("func f%d(x int) int { return x * %d }\n", i, i), i+1)
	}
	const goroutines = 32
	got := make([][]int, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[g] = make([]int, len(texts))
			for k := range texts {
				i := (g + k) % len(texts)
				got[g][i] = tokens.Count(texts[i])
			}
		}()
	}
	wg.Wait()
	for i, s := range texts {
		want := tokens.Count(s)
		if want == 0 {
			t.Fatalf("Count(texts[%d]) = 0", i)
		}
		for g := range goroutines {
			if got[g][i] != want {
				t.Errorf("goroutine %d: Count(texts[%d]) = %d, want %d", g, i, got[g][i], want)
			}
		}
	}
}

// goSource returns about n bytes of real Go source from GOROOT.
func goSource(b *testing.B, n int) string {
	b.Helper()
	dir := filepath.Join(runtime.GOROOT(), "src", "net", "http")
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Skipf("no Go source at %s: %v", dir, err)
	}
	var sb strings.Builder
	for _, e := range entries {
		if sb.Len() >= n {
			break
		}
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		sb.Write(data)
	}
	s := sb.String()
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// BenchmarkCount counts ~100 KB of Go source and reports tokens per second.
func BenchmarkCount(b *testing.B) {
	src := goSource(b, 100<<10)
	tokens.Count("warm up") // build the encoder outside the timing
	b.SetBytes(int64(len(src)))
	n := 0
	for b.Loop() {
		n = tokens.Count(src)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	b.ReportMetric(float64(n), "tokens/op")
}
