package stats_test

import (
	"slices"
	"testing"

	"example.com/samples/stats"
)

func TestHiddenMedian(t *testing.T) {
	cases := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{7, 1}, 4},
		{[]float64{1, 2, 3, 4}, 2.5},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{9, 2, 5}, 5},
		{[]float64{-3, 10, 0, 1, 2, -8}, 0.5},
	}
	for _, c := range cases {
		if got := stats.Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestHiddenMedianLeavesItsArgument(t *testing.T) {
	in := []float64{4, 1, 3, 2}
	stats.Median(in)
	if !slices.Equal(in, []float64{4, 1, 3, 2}) {
		t.Errorf("Median reordered its argument: %v", in)
	}
}
