package embed

import (
	"hash/fnv"
	"slices"
	"testing"
)

func TestSplitIdentifier(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want []string
	}{
		{"parseHTTPRequest", []string{"parse", "http", "request"}},
		{"max_retry_count", []string{"max", "retry", "count"}},
		{"ParseConfig", []string{"parse", "config"}},
		{"HTTPServer", []string{"http", "server"}},
		{"getURL", []string{"get", "url"}},
		{"utf8Decode", []string{"utf", "8", "decode"}},
		{"sha256sum", []string{"sha", "256", "sum"}},
		{"v2Beta", []string{"v", "2", "beta"}},
		{"well-known", []string{"well", "known"}},
		{"pkg/textedit.Apply", []string{"pkg", "textedit", "apply"}},
		{"__init__", []string{"init"}},
		{"a..b//c", []string{"a", "b", "c"}},
		{"ID", []string{"id"}},
		{"word", []string{"word"}},
		{"ÄrgerNis", []string{"ärger", "nis"}},
		{"größeBerechnen", []string{"größe", "berechnen"}},
		{"日本語Text", []string{"日本語", "text"}},
		{"cafe\u0301Menu", []string{"cafe\u0301", "menu"}}, // a combining accent stays with its letter
		{"", nil},
		{"_-./", nil},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got := splitIdentifier(tc.in, nil)
			if !slices.Equal(got, tc.want) {
				t.Errorf("splitIdentifier(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want []string
	}{
		{"Retry the request.", []string{"Retry", "the", "request"}},
		{"call pkg.Func(x, y_z) now", []string{"call", "pkg.Func", "x", "y_z", "now"}},
		{"see ./internal/embed/ and https://example.com/a", []string{"see", "internal/embed", "and", "https", "example.com/a"}},
		{"  \t\n", nil},
		{"... --- ///", nil},
		{"naïve 東京 🚀 x", []string{"naïve", "東京", "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			var got []string
			tokens(tc.in, func(tok string) { got = append(got, tok) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("tokens(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// The inline FNV-1a must be hash/fnv's, or buckets would not be what the comment promises.
func TestHashIsFNV1a(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "a", "retry", "größe", "日本語", "\x00\xff"} {
		ref := fnv.New64a()
		ref.Write([]byte{kindGram})
		ref.Write([]byte(s))
		byString := newHash(kindGram).str(s).sum()
		byRune := newHash(kindGram)
		for _, r := range s {
			byRune = byRune.rune(r)
		}
		if byString != ref.Sum64() {
			t.Errorf("str(%q) = %x, hash/fnv %x", s, byString, ref.Sum64())
		}
		if s != "\x00\xff" && byRune.sum() != ref.Sum64() { // invalid UTF-8 decodes to U+FFFD
			t.Errorf("rune by rune %q = %x, hash/fnv %x", s, byRune.sum(), ref.Sum64())
		}
	}
}
