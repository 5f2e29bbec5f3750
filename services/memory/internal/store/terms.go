package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// statsTTL is how long the lexeme frequencies of a table are reused before they are read
// again (PostgreSQL's own statistics change only when the table is analyzed).
const statsTTL = time.Minute

// termStats estimates how many rows of a table contain a lexeme, from the statistics
// ANALYZE keeps of its search column (pg_stats.most_common_elems: the share of rows holding
// each of the commonest lexemes, up to a thousand of them).
type termStats struct {
	// rows is the table's estimated row count; ≤ 0 when it was never analyzed (nothing is
	// then known, and every lexeme counts as rare).
	rows float64
	// freq is the share of rows holding each common lexeme.
	freq map[string]float64
	// floor is the share assumed of a lexeme not among them: half the least common listed
	// one, as PostgreSQL's own selectivity estimate does.
	floor float64
	read  time.Time
}

// termStats returns table's lexeme statistics, read at most once a statsTTL.
func (s *Store) termStats(ctx context.Context, table string) (*termStats, error) {
	s.mu.Lock()
	st := s.stats[table]
	s.mu.Unlock()
	if st != nil && time.Since(st.read) < statsTTL {
		return st, nil
	}
	st = &termStats{freq: map[string]float64{}, read: time.Now()}
	var elems []string
	var freqs []float32
	err := s.pool.QueryRow(ctx, `SELECT c.reltuples, coalesce(s.most_common_elems::text::text[], '{}'),
			coalesce(s.most_common_elem_freqs, '{}')
		FROM pg_class c LEFT JOIN pg_stats s ON s.schemaname = current_schema() AND s.tablename = c.relname AND s.attname = 'search'
		WHERE c.oid = to_regclass($1)`, table).Scan(&st.rows, &elems, &freqs)
	if err != nil {
		return nil, fmt.Errorf("store: %s lexeme statistics: %w", table, err)
	}
	// The frequencies list one per element, then the least and greatest of them (and, for
	// some types, the share of NULLs).
	if len(freqs) >= len(elems)+2 {
		for i, e := range elems {
			st.freq[e] = float64(freqs[i])
		}
		st.floor = float64(freqs[len(elems)]) / 2
	}
	s.mu.Lock()
	s.stats[table] = st
	s.mu.Unlock()
	return st, nil
}

// estimate is how many rows are expected to hold lexeme.
func (t *termStats) estimate(lexeme string) float64 {
	if t.rows <= 0 {
		return 0
	}
	f, ok := t.freq[lexeme]
	if !ok {
		f = t.floor
	}
	return f * t.rows
}

// match is the tsquery (text form) that picks which rows the full-text ranking scores, so
// that a query of common words does not rank half the table: the rarest lexemes ORed, as
// many as keep the expected matches within budget (rows holding only common words rank low
// anyway: ts_rank rewards the words a row holds, and the rare ones are what set rows apart);
// when even the rarest lexeme alone is expected in more rows than that, the rarest lexemes
// ANDed, as few as bring the estimate (assuming independence) within budget. Without
// statistics every lexeme is ORed. The ranking itself scores every lexeme of the query.
func (t *termStats) match(lexemes []string, budget int) string {
	lex := slices.Clone(lexemes)
	slices.SortStableFunc(lex, func(a, b string) int { return cmp.Compare(t.estimate(a), t.estimate(b)) })
	b := float64(budget)
	if len(lex) == 0 || t.estimate(lex[0]) <= b {
		var sum float64
		n := 0
		for n < len(lex) && (n == 0 || sum+t.estimate(lex[n]) <= b) {
			sum += t.estimate(lex[n])
			n++
		}
		return tsJoin(lex[:n], " | ")
	}
	est := t.rows
	n := 0
	for n < len(lex) && (n == 0 || est > b) {
		est *= t.estimate(lex[n]) / t.rows
		n++
	}
	return tsJoin(lex[:n], " & ")
}

// tsJoin quotes lexemes as tsquery operands and joins them with op.
func tsJoin(lexemes []string, op string) string {
	q := make([]string, len(lexemes))
	for i, l := range lexemes {
		q[i] = "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(l) + "'"
	}
	return strings.Join(q, op)
}
