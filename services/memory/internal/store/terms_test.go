package store

import "testing"

func TestMatchPicksRareLexemes(t *testing.T) {
	t.Parallel()
	// 100,000 rows; "common" in half of them, "usual" in a fifth, "pool" in 3%, unlisted
	// lexemes in at most 0.05% (half the least common listed one, 0.1%).
	st := &termStats{rows: 100_000, floor: 0.0005, freq: map[string]float64{
		"common": 0.5, "usual": 0.2, "pool": 0.03, "second": 0.03, "time": 0.3, "rare": 0.001,
	}}
	for _, c := range []struct {
		name    string
		lexemes []string
		budget  int
		want    string
	}{
		{"the rarest ORed while the estimate fits", []string{"common", "rare", "unlisted", "usual"}, 500, `'unlisted' | 'rare'`},
		{"a single rare lexeme", []string{"common", "rare"}, 500, `'rare'`},
		{"every lexeme when all fit", []string{"common", "rare"}, 100_000, `'rare' | 'common'`},
		{"common words ANDed, rarest first, until the estimate fits", []string{"time", "pool", "second"}, 500, `'pool' & 'second'`},
		{"more of them when two are not enough", []string{"time", "common", "usual"}, 500, `'usual' & 'time' & 'common'`},
		{"all of them when even that does not fit", []string{"common", "time"}, 10, `'time' & 'common'`},
		{"quotes and backslashes are escaped", []string{`it's`, `a\b`}, 500, `'it''s' | 'a\\b'`},
	} {
		if got := st.match(c.lexemes, c.budget); got != c.want {
			t.Errorf("%s: match(%q, %d) = %s, want %s", c.name, c.lexemes, c.budget, got, c.want)
		}
	}
	// Without statistics (a table never analyzed) nothing is known: every lexeme is ORed.
	none := &termStats{freq: map[string]float64{}}
	if got := none.match([]string{"a", "b"}, 1); got != `'a' | 'b'` {
		t.Errorf("without statistics: %s", got)
	}
}
