package tsindex

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestParseReadsPostgreSQLsTextForm(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in     string
		want   []Entry
		length int
	}{
		{``, nil, 0},
		{`'fix':2 'pool':1,5`, []Entry{{"fix", []uint8{0}}, {"pool", []uint8{0, 0}}}, 3},
		{`'a':1A,2B,3C,4 'b':7D`, []Entry{{"a", []uint8{3, 2, 1, 0}}, {"b", []uint8{0}}}, 5},
		{`'it''s':3 'a\\b':1 'c\'d':2`, []Entry{{"it's", []uint8{0}}, {`a\b`, []uint8{0}}, {"c'd", []uint8{0}}}, 3},
		// Without positions (a stripped vector): each counts one in the length.
		{`'bare' 'other'`, []Entry{{"bare", nil}, {"other", nil}}, 2},
		{`bare unquoted:1`, []Entry{{"bare", nil}, {"unquoted", []uint8{0}}}, 2},
		{`'ünïcödé':1 'x y':2`, []Entry{{"ünïcödé", []uint8{0}}, {"x y", []uint8{0}}}, 2},
	} {
		got, length, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%s): %v", c.in, err)
			continue
		}
		if length != c.length || !slices.EqualFunc(got, c.want, func(a, b Entry) bool {
			return a.Lexeme == b.Lexeme && slices.Equal(a.Weights, b.Weights)
		}) {
			t.Errorf("Parse(%s) = %v, length %d; want %v, %d", c.in, got, length, c.want, c.length)
		}
	}
	for _, bad := range []string{`'open`, `'a':`, `'a':x`, `'a':1,`, `'a':1Z`, `'a'b`} {
		if _, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%s): no error", bad)
		}
	}
}

// The share of a lexeme is calc_rank_or's term for it: weights divided by the squares of
// their (1-based) places, the largest whole.
func TestShareIsCalcRankOrs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		weights []uint8
		want    float64
	}{
		{nil, 0.1},                    // no position: one of weight D
		{[]uint8{0}, 0.1},             // D
		{[]uint8{3}, 1},               // A
		{[]uint8{0, 0}, 0.1 + 0.1/4},  // D at 1 whole, D at 2 over 4
		{[]uint8{0, 3}, 1 + 0.1},      // A at 2 counted whole instead of over 4
		{[]uint8{3, 3}, 1 + 1.0/4},    // the first A is the maximum
		{[]uint8{1, 2, 0}, 0.4 + 0.2}, // B at 2 whole, C at 1, D at 3 over 9
	} {
		got := Entry{Weights: c.weights}.share()
		want := c.want
		if len(c.weights) == 3 {
			want += 0.1 / 9
		}
		if d := float64(got) - want; d > 1e-6 || d < -1e-6 {
			t.Errorf("share(%v) = %v, want %v", c.weights, got, want)
		}
	}
}

// docText is a tsvector text of the given lexemes, each at one more position.
func docText(lexemes ...string) string {
	var parts []string
	for i, l := range lexemes {
		parts = append(parts, fmt.Sprintf("'%s':%d", l, i+1))
	}
	return strings.Join(parts, " ")
}

// Search picks the documents the SQL ranking's rule picks, with exact frequencies, and
// returns the best of them by rank; a deleted or replaced document is gone, and
// compaction changes nothing found.
func TestSearchPicksByExactFrequencies(t *testing.T) {
	t.Parallel()
	x := New()
	rng := rand.New(rand.NewPCG(1, 2))
	// "common" in every document, "usual" in every 4th, "rare" in every 50th, "unique" in
	// one; the rest of each document random filler.
	docs := map[string][]string{}
	for i := range 400 {
		lex := []string{"common"}
		if i%4 == 0 {
			lex = append(lex, "usual")
		}
		if i%50 == 0 {
			lex = append(lex, "rare")
		}
		if i == 123 {
			lex = append(lex, "unique")
		}
		for range rng.IntN(6) {
			lex = append(lex, fmt.Sprintf("w%d", rng.IntN(40)))
		}
		id := fmt.Sprintf("%08d-0000-0000-0000-000000000000", i)
		slices.Sort(lex)
		lex = slices.Compact(lex)
		docs[id] = lex
		if err := x.Put(id, docText(lex...)); err != nil {
			t.Fatal(err)
		}
	}
	holds := func(id string, lex ...string) bool {
		for _, l := range lex {
			if !slices.Contains(docs[id], l) {
				return false
			}
		}
		return true
	}
	count := func(pick func(id string) bool) int {
		n := 0
		for id := range docs {
			if pick(id) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		name    string
		lexemes []string
		budget  int
		pick    func(id string) bool
	}{
		{"the rarest ORed within the budget", []string{"common", "rare", "unique", "usual"}, 20,
			func(id string) bool { return holds(id, "rare") || holds(id, "unique") }},
		{"more ORed with a larger budget", []string{"common", "rare", "unique", "usual"}, 200,
			func(id string) bool { return holds(id, "rare") || holds(id, "unique") || holds(id, "usual") }},
		{"the rarest alone when the next does not fit", []string{"usual", "common"}, 150,
			func(id string) bool { return holds(id, "usual") }},
		{"common words ANDed until they fit", []string{"common", "usual", "w3"}, 5,
			func(id string) bool { return holds(id, "w3", "usual") }},
		{"all of them when even that does not fit", []string{"common", "usual"}, 5,
			func(id string) bool { return holds(id, "usual", "common") }},
		{"a lexeme no document has is the rarest", []string{"absent", "rare"}, 10,
			func(id string) bool { return holds(id, "rare") }},
	} {
		hits, matched := x.Search(c.lexemes, c.budget, 10)
		if want := count(c.pick); matched != want {
			t.Errorf("%s: ranked %d documents, want %d", c.name, matched, want)
		}
		// The best 10 of the picked documents, by brute force.
		var want []Hit
		q := x.query(c.lexemes)
		for id := range docs {
			if c.pick(id) {
				want = append(want, Hit{id, x.rank(x.pos[id], q)})
			}
		}
		slices.SortFunc(want, func(a, b Hit) int {
			if better(ranked1{rank: a.Rank, id: a.ID}, ranked1{rank: b.Rank, id: b.ID}) {
				return -1
			}
			return 1
		})
		want = want[:min(10, len(want))]
		if !slices.Equal(hits, want) {
			t.Errorf("%s: found %v, want %v", c.name, hits, want)
		}
	}

	// A document holding two of the query's lexemes ranks above those holding one.
	hits, _ := x.Search([]string{"rare", "unique", "usual"}, 1000, 1)
	if len(hits) != 1 || !holds(hits[0].ID, "rare", "usual") {
		t.Fatalf("best hit %v", hits)
	}

	// Deleted and replaced documents are gone; enough deletes compact the index, which
	// finds the same.
	before, _ := x.Search([]string{"rare", "usual"}, 1000, 500)
	x.Delete("00000000-0000-0000-0000-000000000000")
	if err := x.Put("00000050-0000-0000-0000-000000000000", docText("other")); err != nil {
		t.Fatal(err)
	}
	after, matched := x.Search([]string{"rare", "usual"}, 1000, 500)
	var want []Hit
	for _, h := range before {
		if h.ID != "00000000-0000-0000-0000-000000000000" && h.ID != "00000050-0000-0000-0000-000000000000" {
			want = append(want, h)
		}
	}
	if !slices.Equal(after, want) || matched != len(want) {
		t.Fatalf("after a delete and a replacement: %d found, want %d", len(after), len(want))
	}
	for i := 1; i < 400; i += 2 {
		id := fmt.Sprintf("%08d-0000-0000-0000-000000000000", i)
		x.Delete(id)
		want = slices.DeleteFunc(want, func(h Hit) bool { return h.ID == id })
	}
	if len(x.docs) >= 400 || len(x.docs)-x.dead != x.Len() {
		t.Fatalf("not compacted: %d documents held, %d of them deleted, %d live", len(x.docs), x.dead, x.Len())
	}
	compacted, _ := x.Search([]string{"rare", "usual"}, 1000, 500)
	if !slices.Equal(compacted, want) {
		t.Fatalf("after compaction: %v, want %v", compacted, want)
	}
	if got := x.Ranks([]string{"00000001-0000-0000-0000-000000000000", want[0].ID}, []string{"rare", "usual"}); got[0] != 0 || got[1] != want[0].Rank {
		t.Fatalf("Ranks = %v, want [0 %v]", got, want[0].Rank)
	}
}
