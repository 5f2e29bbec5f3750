package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// SearchQuery asks for the candidates of a hybrid search.
type SearchQuery struct {
	Owner  string
	Filter Filter
	// Vector is the query's embedding; memories of another model or size are not vector
	// candidates (their vector score is 0).
	Vector Vector
	// TSQuery is a to_tsquery('english', …) expression ("word | other"); empty: no
	// full-text ranking.
	TSQuery string
	// K is how many candidates each ranking contributes.
	K int
	// Exact ranks by exact distance (a sequential scan) instead of the HNSW index, for
	// measuring the index's recall.
	Exact bool
}

// Candidate is a memory found by either ranking, with both scores.
type Candidate struct {
	*Row
	// Vector is the cosine similarity (0–1), Text the full-text rank (0–1).
	Vector, Text float64
	// VectorRank and TextRank are 1-based positions in each ranking, 0 when absent.
	VectorRank, TextRank int
}

// Search returns the union of the K nearest memories by embedding and the K best by
// full-text rank, each with both scores and ranks.
func (s *Store) Search(ctx context.Context, q SearchQuery) ([]*Candidate, error) {
	if err := CheckModel(q.Vector.Model); err != nil {
		return nil, err
	}
	var out []*Candidate
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := searchSettings(ctx, tx, q.K, q.Exact); err != nil {
			return err
		}
		where, args := q.Filter.where([]any{q.Owner})
		byVector, byText, err := rankIDs(ctx, tx, "memories", "m.owner_id = $1 AND "+where, args, q.Vector, q.TSQuery, q.K)
		if err != nil {
			return err
		}
		rows, err := scored(ctx, tx, "memories", memoryColumns, q.Owner, q.Vector, q.TSQuery, byVector, byText)
		if err != nil || rows == nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			c := &Candidate{}
			r, err := scanMemory(rows, &c.Vector, &c.Text)
			if err != nil {
				return fmt.Errorf("store: candidates: %w", err)
			}
			c.Row = r
			c.VectorRank = slices.Index(byVector, r.Id) + 1
			c.TextRank = slices.Index(byText, r.Id) + 1
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// rankIDs returns the ids of the k rows of table (aliased m) matching where (whose
// arguments are args) nearest to v, and the k best by full-text rank of tsq (none when tsq
// is empty).
func rankIDs(ctx context.Context, tx pgx.Tx, table, where string, args []any, v Vector, tsq string, k int) ([]string, []string, error) {
	dims := len(v.Values)
	n := len(args)
	vrows, err := tx.Query(ctx, fmt.Sprintf(`SELECT m.id::text FROM %s m WHERE %s AND %s
		ORDER BY (m.embedding::vector(%d)) <=> $%d::text::vector(%d) LIMIT $%d`,
		table, where, vecPred(v.Model, dims), dims, n+1, dims, n+2), append(args, v.literal(), k)...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: vector candidates: %w", err)
	}
	byVector, err := pgx.CollectRows(vrows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, fmt.Errorf("store: vector candidates: %w", err)
	}
	if tsq == "" {
		return byVector, nil, nil
	}
	trows, err := tx.Query(ctx, fmt.Sprintf(`SELECT m.id::text FROM %s m, to_tsquery('english', $%d) tq
		WHERE %s AND m.search @@ tq ORDER BY ts_rank(m.search, tq, 1|32) DESC, m.id LIMIT $%d`,
		table, n+1, where, n+2), append(args, tsq, k)...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: text candidates: %w", err)
	}
	byText, err := pgx.CollectRows(trows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, fmt.Errorf("store: text candidates: %w", err)
	}
	return byVector, byText, nil
}

// searchSettings tunes the HNSW walk of one transaction: with filters (owner, type,
// repository) it continues until k rows pass them instead of returning fewer (pgvector
// 0.8); exact turns the index off.
func searchSettings(ctx context.Context, tx pgx.Tx, k int, exact bool) error {
	settings := []string{
		fmt.Sprintf("SET LOCAL hnsw.ef_search = %d", max(40, 2*k)),
		"SET LOCAL hnsw.iterative_scan = relaxed_order",
	}
	if exact {
		settings = append(settings, "SET LOCAL enable_indexscan = off", "SET LOCAL enable_bitmapscan = off")
	}
	for _, st := range settings {
		if _, err := tx.Exec(ctx, st); err != nil {
			return fmt.Errorf("store: search settings: %w", err)
		}
	}
	return nil
}

// scored reads the rows of table (aliased m) found by either ranking, with columns and then
// their vector score (cosine, 0 for another model or size) and full-text score (0 for an
// empty tsquery: to_tsquery(”) is the empty query). It returns nil rows when neither
// ranking found anything.
func scored(ctx context.Context, tx pgx.Tx, table, columns, owner string, v Vector, tsq string, byVector, byText []string) (pgx.Rows, error) {
	ids := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(byVector), byText...))))
	if len(ids) == 0 {
		return nil, nil
	}
	dims := len(v.Values)
	rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT %s,
			CASE WHEN %s THEN greatest(0, 1 - ((m.embedding::vector(%d)) <=> $2::text::vector(%d))) ELSE 0 END,
			coalesce(ts_rank(m.search, to_tsquery('english', $3), 1|32), 0)
		FROM %s m WHERE m.owner_id = $1 AND m.id = ANY($4::uuid[])`,
		columns, vecPred(v.Model, dims), dims, dims, table), owner, v.literal(), tsq, ids)
	if err != nil {
		return nil, fmt.Errorf("store: %s candidates: %w", table, err)
	}
	return rows, nil
}
