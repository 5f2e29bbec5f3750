package slug_test

import (
	"testing"

	"example.com/blog/slug"
)

func TestHiddenMake(t *testing.T) {
	cases := map[string]string{
		"Hello, World!":              "hello-world",
		"  Go 1.22 -- Released  ":    "go-1-22-released",
		"already-a-slug":             "already-a-slug",
		"":                           "",
		"!!!":                        "",
		"Ten Tips_for_Better   Code": "ten-tips-for-better-code",
		"Café au lait":               "caf-au-lait",
		"ABC123def":                  "abc123def",
	}
	for in, want := range cases {
		if got := slug.Make(in); got != want {
			t.Errorf("Make(%q) = %q, want %q", in, got, want)
		}
	}
}
