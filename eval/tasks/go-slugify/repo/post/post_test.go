package post

import (
	"testing"
	"time"
)

func TestYear(t *testing.T) {
	p := Post{Title: "x", Published: time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)}
	if p.Year() != 2024 {
		t.Errorf("Year = %d", p.Year())
	}
}
