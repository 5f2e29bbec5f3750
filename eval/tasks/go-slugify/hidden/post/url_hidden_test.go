package post_test

import (
	"testing"

	"example.com/blog/post"
)

func TestHiddenURLUsesTheSlug(t *testing.T) {
	cases := map[string]string{
		"Hello, World!":       "/posts/hello-world",
		"Why We Moved to Go?": "/posts/why-we-moved-to-go",
	}
	for title, want := range cases {
		if got := (post.Post{Title: title}).URL(); got != want {
			t.Errorf("URL of %q = %q, want %q", title, got, want)
		}
	}
}
