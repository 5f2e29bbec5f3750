package wordfreq

import (
	"maps"
	"testing"
)

func TestCount(t *testing.T) {
	got := Count("The cat and the hat. THE END")
	want := map[string]int{"the": 3, "cat": 1, "and": 1, "hat": 1, "end": 1}
	if !maps.Equal(got, want) {
		t.Errorf("Count = %v, want %v", got, want)
	}
}
