package wordfreq_test

import (
	"slices"
	"testing"

	"example.com/textstats/wordfreq"
)

func TestHiddenTop(t *testing.T) {
	text := "b a c b a b d, c! A"
	cases := []struct {
		n    int
		want []wordfreq.WordCount
	}{
		{0, nil},
		{-1, nil},
		{1, []wordfreq.WordCount{{Word: "a", Count: 3}}},
		{2, []wordfreq.WordCount{{Word: "a", Count: 3}, {Word: "b", Count: 3}}},
		{3, []wordfreq.WordCount{{Word: "a", Count: 3}, {Word: "b", Count: 3}, {Word: "c", Count: 2}}},
		{10, []wordfreq.WordCount{{Word: "a", Count: 3}, {Word: "b", Count: 3}, {Word: "c", Count: 2}, {Word: "d", Count: 1}}},
	}
	for _, c := range cases {
		got := wordfreq.Top(text, c.n)
		if len(got) == 0 && len(c.want) == 0 {
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Top(%q, %d) = %v, want %v", text, c.n, got, c.want)
		}
	}
	if got := wordfreq.Top("", 3); len(got) != 0 {
		t.Errorf("Top of no text = %v, want none", got)
	}
}
