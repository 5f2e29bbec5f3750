package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/thefold/thefold/pkg/db"

	"github.com/thefold/thefold/services/memory/internal/tsindex"
	"github.com/thefold/thefold/services/memory/internal/vscan"
)

// DefaultTextPool is how many memories the full-text ranking in PostgreSQL scores at most in
// one search when SearchQuery.TextPool is 0 (the ranking in this process picks half as many
// by its rarest words, see tsindex.Index.Search).
const DefaultTextPool = 1000

// SearchQuery asks for the candidates of a hybrid search.
type SearchQuery struct {
	Owner  string
	Filter Filter
	// Version, when not nil, is the owner's version read when the search began
	// (CheckVersion), while its query was embedded; nil reads it now.
	Version *VersionCheck
	// Vector is the query's embedding; memories of another model or size are not vector
	// candidates (their vector score is 0).
	Vector Vector
	// Words is the query's words, space-separated (identifiers already split), made into
	// lexemes by PostgreSQL's english configuration; empty: no full-text ranking.
	Words string
	// K is how many candidates each ranking contributes.
	K int
	// TextPool bounds how many memories the full-text ranking scores (see textQuery);
	// 0 is DefaultTextPool.
	TextPool int
	// Exact ranks by exact distance (a sequential scan) instead of the HNSW index, for
	// measuring the index's recall.
	Exact bool
	// EfSearch is the HNSW walk's candidate list (hnsw.ef_search); 0 is DefaultEfSearch
	// or K, whichever is larger.
	EfSearch int
	// Walk ranks by the HNSW walk even when the in-process scan is on (EnableScan), for
	// measuring one against the other; the full-text ranking is then PostgreSQL's too.
	Walk bool
	// TextInDB ranks by full text in PostgreSQL even when the in-process scan is on (which
	// holds the owner's full-text vectors too, textscan.go), for measuring one against the
	// other; the vector ranking still scans, and PostgreSQL applies the filters to its
	// nearest and reads their scores' columns (the comparison the held columns are tested
	// against, held_test.go).
	TextInDB bool
}

// DefaultEfSearch is the HNSW walk's candidate list when SearchQuery.EfSearch is 0: the
// memory service's default (THEFOLD_MEMORY_EF_SEARCH).
const DefaultEfSearch = 160

// Candidate is a memory found by either ranking, with both scores.
type Candidate struct {
	*Row
	// Vector is the cosine similarity (0–1), Text the full-text rank (0–1).
	Vector, Text float64
	// VectorRank and TextRank are 1-based positions in each ranking, 0 when absent.
	VectorRank, TextRank int
}

// Search returns the union of the K nearest memories by embedding and the K best by
// full-text rank, each with both scores and ranks. A candidate's Memory has only what it
// is scored by (scoreColumns): SearchRows reads the chosen ones whole.
func (s *Store) Search(ctx context.Context, q SearchQuery) ([]*Candidate, error) {
	r := q.ranking()
	r.columns = scoreColumns
	hits, err := hybrid(ctx, s, r, func(rows pgx.Rows, v, t *float64) (*Row, string, error) {
		r, err := scanScored(rows, v, t)
		if err != nil {
			return nil, "", err
		}
		return r, r.GetId(), nil
	}, (*heldRow).row)
	if err != nil {
		return nil, err
	}
	out := make([]*Candidate, len(hits))
	for i, h := range hits {
		out[i] = &Candidate{Row: h.row, Vector: h.vector, Text: h.text, VectorRank: h.vectorRank, TextRank: h.textRank}
	}
	return out, nil
}

func (q SearchQuery) ranking() ranking {
	var c db.Conds
	c.Add("m.owner_id = $%d", q.Owner)
	q.Filter.conds(&c)
	r := ranking{table: "memories", columns: memoryColumns, where: c.And(), args: c.Args, filter: q.Filter,
		vec: q.Vector, words: q.Words, k: q.K, pool: q.TextPool, exact: q.Exact, ef: q.EfSearch}
	if !q.Walk && !q.Exact {
		r.scanOwner = q.Owner
		r.version = q.Version
		r.textInDB = q.TextInDB
	}
	return r
}

// ranking is one hybrid search of a table (aliased m) with a search tsvector and an
// untyped embedding column.
type ranking struct {
	table, columns string
	// where selects the rows that may be found (db.Conds.And); its arguments are args
	// ($1…), which the ranking queries continue.
	where string
	args  []any
	// filter is the same condition beyond the owner's, for the in-process rankings (held.go).
	filter Filter
	vec    Vector
	words  string
	k      int
	pool   int
	exact  bool
	ef     int
	// scanOwner is the owner whose in-process vectors may rank (scanned), "" for the walk.
	scanOwner string
	version   *VersionCheck
	// textInDB keeps the full-text ranking in PostgreSQL when the vectors scan.
	textInDB bool
}

// hit is a row found by either ranking.
type hit[T any] struct {
	row                  T
	vector, text         float64
	vectorRank, textRank int
}

// hybrid runs the vector ranking and the full-text ranking of r at once (each on its own
// connection; a search costs the slower of the two, not their sum) and returns the union of
// what they found, in vector order and then text order, each row with both scores and its
// rank in each. scan reads a row of r.columns followed by the vector and text scores.
// fromHeld, when not nil, makes the row from what the in-process rankings hold (held.go):
// they then apply r's filters in the process and ask PostgreSQL nothing per search but the
// owner's version.
func hybrid[T any](ctx context.Context, s *Store, r ranking, scan func(rows pgx.Rows, vector, text *float64) (T, string, error), fromHeld func(h *heldRow, id string) T) ([]hit[T], error) {
	if err := CheckModel(r.vec.Model); err != nil {
		return nil, err
	}
	type found struct {
		row          T
		id           string
		vector, text float64
	}
	collect := func(rows pgx.Rows) ([]found, error) {
		defer rows.Close()
		var out []found
		for rows.Next() {
			var f found
			var err error
			if f.row, f.id, err = scan(rows, &f.vector, &f.text); err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return out, rows.Err()
	}
	var byVector, byText []found
	// pick is the first r.k of n hits, best first, that r's filters let through, by what
	// view v holds: scanQuery's and textScanQuery's answer without PostgreSQL. hit gives
	// the i-th hit's id and scores.
	pick := func(v *scanView, n int, hit func(i int) (id string, vector, text float64)) []found {
		now := time.Now()
		var out []found
		for i := range n {
			id, vector, text := hit(i)
			h := v.rows.get(id)
			if h == nil || !r.filter.lets(h, now) {
				continue
			}
			out = append(out, found{row: fromHeld(h, id), id: id, vector: vector, text: text})
			if len(out) == r.k {
				break
			}
		}
		return out
	}
	heldFilters := fromHeld != nil && !r.textInDB
	// The owner's in-process vectors, when they rank (scan.go): they also give the text
	// hits their vector similarity, so the text query reads no embedding; and the owner's
	// full-text vectors, held with them, which rank by full text (textscan.go) and give the
	// vector hits their text rank. Both rankings begin on what this process holds while
	// PostgreSQL is asked for the owner's version: when what is held is of that version
	// (nearly always), the version check has cost no time of its own; when it is older,
	// they rank again once the changes are applied. view is what they rank then, nil for
	// the rankings in PostgreSQL.
	var held *scanView
	view := func() (*scanView, error) { return nil, nil }
	if r.scanOwner != "" && s.scan != nil {
		held = s.held(r.scanOwner, r.vec.Pair())
		type checked struct {
			view *scanView
			err  error
		}
		c := make(chan checked, 1)
		go func() {
			v, err := s.scanned(ctx, r.scanOwner, r.vec.Pair(), r.version)
			c <- checked{v, err}
		}()
		view = sync.OnceValues(func() (*scanView, error) {
			v := <-c
			switch {
			case v.err != nil:
				return nil, fmt.Errorf("store: %s vector ranking: %w", r.table, v.err)
			case v.view != nil && held != nil && held.version >= v.view.version:
				return held, nil
			}
			return v.view, nil
		})
	}
	// The query's lexemes (for the full-text ranking in this process, and its rank of the
	// vector hits).
	var lexemes []string
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var hits []vscan.Hit
		if held != nil {
			hits = held.set.Nearest(r.vec.Values, 2*r.k, s.scan.pool)
		}
		v, err := view()
		if err != nil {
			return err
		}
		if v != nil {
			if v != held {
				hits = v.set.Nearest(r.vec.Values, 2*r.k, s.scan.pool)
			}
			if heldFilters {
				// Fewer than k let through of a full 2k: the walk ranks instead (below).
				byVector = pick(v, len(hits), func(i int) (string, float64, float64) { return hits[i].ID, max(0, float64(hits[i].Sim)), 0 })
				if len(byVector) >= r.k || len(hits) < 2*r.k {
					return nil
				}
				byVector = nil
			}
			// Twice k of the scan's nearest, for the filters beyond the owner to choose
			// from: PostgreSQL reads the first 1.5 k (the service's own filter, of
			// strategies below the trust threshold, leaves out a few), and the rest only
			// when its filters left fewer than k of those; when they leave fewer than k
			// of a set that had more, the walk (which continues until k pass) ranks
			// instead.
			for _, n := range []int{min(r.k*3/2, len(hits)), len(hits)} {
				if n == 0 {
					return nil
				}
				// A plain query: its plan (primary-key lookups of the ids) does not depend
				// on the arguments, so the prepared statement's generic plan serves and
				// the 0.4 ms of planning each time (customPlans) is saved.
				q, args := scanQuery(r, hits[:n], r.textInDB)
				rows, err := s.pool.Query(gctx, q, args...)
				if err == nil {
					byVector, err = collect(rows)
				}
				if err != nil {
					return fmt.Errorf("store: %s vector ranking: %w", r.table, err)
				}
				if len(byVector) >= r.k || n == len(hits) && len(hits) < 2*r.k {
					return nil
				}
			}
			byVector = nil
		}
		settings, ef := searchSettings(r.k, r.ef, r.exact)
		half, err := s.walkHalf(gctx, r.table, r.vec.Pair())
		if err != nil {
			return fmt.Errorf("store: %s vector ranking: %w", r.table, err)
		}
		q, args := vectorQuery(r, half)
		err = s.query(gctx, settings, []any{ef}, q, args, func(rows pgx.Rows) (err error) {
			byVector, err = collect(rows)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: %s vector ranking: %w", r.table, err)
		}
		return nil
	})
	g.Go(func() error {
		var err error
		if lexemes, err = s.lexemes(gctx, r.words); err != nil {
			return fmt.Errorf("store: %s text ranking: %w", r.table, err)
		}
		inProcess := !r.textInDB
		var hits []tsindex.Hit
		var matched int
		if held != nil && inProcess {
			hits, matched = rankText(r, held.text, lexemes)
		}
		v, err := view()
		if err != nil {
			return err
		}
		if v != nil && inProcess {
			if v != held {
				hits, matched = rankText(r, v.text, lexemes)
			}
			if heldFilters {
				// Fewer than k let through of hits that are not all the matches: PostgreSQL
				// ranks instead (below).
				byText = pick(v, len(hits), func(i int) (string, float64, float64) { return hits[i].ID, 0, float64(hits[i].Rank) })
				if len(byText) >= r.k || matched <= len(hits) {
					return nil
				}
				byText = nil
			}
			// The best 2k, to which PostgreSQL applies the filters beyond the owner as to
			// the scan's nearest (the first 1.5k, and the rest only when its filters left
			// fewer than k of those); when they leave fewer than k of a ranking that had
			// more, PostgreSQL ranks instead (below).
			for _, n := range []int{min(r.k*3/2, len(hits)), len(hits)} {
				if n == 0 {
					return nil
				}
				q, args := textScanQuery(r, hits[:n])
				rows, err := s.pool.Query(gctx, q, args...)
				if err == nil {
					byText, err = collect(rows)
				}
				if err != nil {
					return fmt.Errorf("store: %s text ranking: %w", r.table, err)
				}
				if len(byText) >= r.k || n == len(hits) && matched <= len(hits) {
					return nil
				}
			}
			byText = nil
		}
		sel, err := s.textSelect(gctx, r)
		if err != nil || sel.match == "" {
			return err
		}
		q, args := textQuery(r, sel, v == nil)
		err = s.query(gctx, customPlans, nil, q, args, func(rows pgx.Rows) (err error) {
			byText, err = collect(rows)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: %s text ranking: %w", r.table, err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if v, _ := view(); v != nil {
		ids := make([]string, len(byText))
		for i, f := range byText {
			ids[i] = f.id
		}
		sims, ok := v.set.Similarities(ids, r.vec.Values)
		for i := range byText {
			if ok[i] {
				byText[i].vector = max(0, float64(sims[i]))
			}
		}
		if !r.textInDB && len(byVector) > 0 {
			// The vector hits' text rank, which their query left out (scanQuery).
			ids := make([]string, len(byVector))
			for i, f := range byVector {
				ids[i] = f.id
			}
			for i, rank := range v.text.Ranks(ids, lexemes) {
				byVector[i].text = float64(rank)
			}
		}
	}
	out := make([]hit[T], 0, len(byVector)+len(byText))
	index := map[string]int{}
	for i, f := range byVector {
		index[f.id] = len(out)
		out = append(out, hit[T]{row: f.row, vector: f.vector, text: f.text, vectorRank: i + 1})
	}
	for i, f := range byText {
		if j, ok := index[f.id]; ok {
			out[j].textRank = i + 1
			continue
		}
		out = append(out, hit[T]{row: f.row, vector: f.vector, text: f.text, textRank: i + 1})
	}
	return out, nil
}

// customPlans makes the statements of a transaction planned for their arguments: a
// generic plan knows neither the tsquery nor the limit, and the planner then guesses (a
// sequential scan stopping at the LIMIT, three times slower than the bitmap scan of the
// GIN index, for a tsquery matching 3% of the rows).
// (JIT compilation is off for every connection: db.Open.)
const customPlans = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true)"

// query runs the settings statement (customPlans, and more set_config(…, true) calls)
// and then sql, in one round trip: a batch is one implicit transaction, and the settings
// last until its end. read reads the rows of sql.
func (s *Store) query(ctx context.Context, settings string, settingsArgs []any, sql string, args []any, read func(pgx.Rows) error) error {
	b := &pgx.Batch{}
	b.Queue(settings, settingsArgs...)
	b.Queue(sql, args...)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	if err := read(rows); err != nil {
		return err
	}
	return br.Close()
}

// The scores every row found comes with, whichever ranking found it: the cosine
// similarity of its embedding to the query's (0 for another model or size) and the
// full-text rank of its search vector against all of the query's lexemes ORed (ts_rank
// divided by 1 + the log of the document's length, scaled to 0–1). $V is the query vector,
// $W the query's words.
func scores(r ranking, v, w string) string {
	dims := len(r.vec.Values)
	return fmt.Sprintf(`CASE WHEN %s THEN greatest(0, 1 - ((m.embedding::vector(%d)) <=> (SELECT %s::vector(%d)))) ELSE 0 END,
		ts_rank(m.search, %s, 1|32)`, vecPred(r.vec.Model, dims), dims, v, dims, orQuery(w))
}

// orQuery is the tsquery of every lexeme of the words in parameter w ORed: the stripped
// tsvector's text form ('a' 'b') with the separators made into ORs; a subquery, so it is
// computed once per query rather than once per row.
func orQuery(w string) string {
	return fmt.Sprintf(`(SELECT replace(strip(to_tsvector('english', %s::text))::text, ''' ''', ''' | ''')::tsquery)`, w)
}

// vectorQuery is the k rows nearest the query vector, walking the (model, size)'s HNSW
// index, and its arguments: r.args, then the vector, words and k. The columns and scores are computed
// for the k rows only (a small table is sorted rather than walked, and a sort would compute
// them for every row). With half, the walk is of the half-precision index (halfvecExpr) and
// the k rows it finds are ordered by their distance at full precision, the one their score
// is of; without (exact search, or the pair's full-precision index before an upgrade's
// rebuild, see Store.walkHalf), at full precision throughout.
func vectorQuery(r ranking, half bool) (string, []any) {
	c := db.Conds{Args: slices.Clone(r.args)}
	v, w, k := c.Arg(r.vec.param()), c.Arg(r.words), c.Arg(r.k)
	dims := len(r.vec.Values)
	walk := fmt.Sprintf("(m.embedding::vector(%d)) <=> %s::vector(%d)", dims, v, dims)
	if half && !r.exact {
		walk = fmt.Sprintf("(m.embedding::halfvec(%d)) <=> %s::vector(%d)::halfvec(%d)", dims, v, dims, dims)
	}
	return fmt.Sprintf(`SELECT %s, %s FROM (
			SELECT m.id FROM %s m WHERE %s AND %s ORDER BY %s LIMIT %s) t
		JOIN %s m ON m.id = t.id ORDER BY (m.embedding::vector(%d)) <=> %s::vector(%d), m.id`,
		r.columns, scores(r, v, w), r.table, r.where, vecPred(r.vec.Model, dims), walk, k, r.table, dims, v, dims), c.Args
}

// textSelect picks the rows the text ranking scores: those matching match (see
// termStats.match), and those matching all of the query's lexemes (all), which ts_rank
// puts first and an estimate that took two words for independent can leave out of the
// LIMIT of a common pair ("outbox relay"); all is "" when it is match.
type textSelect struct{ match, all string }

// textQuery is the k rows of best full-text rank among at most pool rows picked by sel
// (half of them at most by each tsquery when there are two), and its arguments: r.args,
// then the vector, words, k, match, pool (and all). The rank is computed for the pool only
// and the columns for the k rows only.
func textQuery(r ranking, sel textSelect, vectorScore bool) (string, []any) {
	c := db.Conds{Args: slices.Clone(r.args)}
	w, k, match, pool := c.Arg(r.words), c.Arg(r.k), c.Arg(sel.match), c.Arg(r.textPool())
	// The rows' scores; without vectorScore (the scan gives the text hits theirs) the
	// vector score is 0 and no row's embedding is read.
	rowScores := fmt.Sprintf("0::float8, ts_rank(m.search, %s, 1|32)", orQuery(w))
	if vectorScore {
		rowScores = scores(r, c.Arg(r.vec.param()), w)
	}
	picked := fmt.Sprintf(`SELECT m.id, m.search FROM %s m WHERE %s AND m.search @@ %s::tsquery LIMIT %s`, r.table, r.where, match, pool)
	if sel.all != "" {
		all := c.Arg(sel.all)
		// Each half of the pool; a row picked twice is ranked once.
		picked = fmt.Sprintf(`SELECT DISTINCT ON (u.id) u.id, u.search FROM (
				(SELECT m.id, m.search FROM %[1]s m WHERE %[2]s AND m.search @@ %[3]s::tsquery LIMIT %[4]s / 2)
				UNION ALL
				(SELECT m.id, m.search FROM %[1]s m WHERE %[2]s AND m.search @@ %[5]s::tsquery LIMIT %[4]s / 2)) u
			ORDER BY u.id`, r.table, r.where, match, pool, all)
	}
	return fmt.Sprintf(`SELECT %s, %s FROM (
			SELECT p.id, ts_rank(p.search, %s, 1|32) AS rank FROM (%s) p
			ORDER BY rank DESC, p.id LIMIT %s) t
		JOIN %s m ON m.id = t.id ORDER BY t.rank DESC, m.id`,
		r.columns, rowScores, orQuery(w), picked, k, r.table), c.Args
}

// textSelect is what the text ranking of r scores; its match is "" when the words have no
// lexeme (stop words only).
func (s *Store) textSelect(ctx context.Context, r ranking) (textSelect, error) {
	if strings.TrimSpace(r.words) == "" {
		return textSelect{}, nil
	}
	lexemes, err := s.lexemes(ctx, r.words)
	if err != nil || len(lexemes) == 0 {
		return textSelect{}, err
	}
	stats, err := s.termStats(ctx, r.table)
	if err != nil {
		return textSelect{}, err
	}
	sel := textSelect{match: stats.match(lexemes, r.textPool()/2)}
	if all := tsJoin(lexemes, " & "); all != sel.match {
		sel.all = all
	}
	return sel, nil
}

// lexemes are the distinct lexemes of words (space-separated) under the english
// configuration. Each word's lexemes are asked of PostgreSQL once and kept: queries repeat
// words, and most searches then save the round trip.
func (s *Store) lexemes(ctx context.Context, words string) ([]string, error) {
	fields := strings.Fields(words)
	known := make(map[string][]string, len(fields))
	var missing []string
	s.mu.Lock()
	for _, w := range fields {
		if l, ok := s.lexCache[w]; ok {
			known[w] = l
		} else if !slices.Contains(missing, w) {
			missing = append(missing, w)
		}
	}
	s.mu.Unlock()
	if len(missing) > 0 {
		rows, err := s.pool.Query(ctx, `SELECT w, tsvector_to_array(to_tsvector('english', w)) FROM unnest($1::text[]) w`, missing)
		if err != nil {
			return nil, fmt.Errorf("store: lexemes: %w", err)
		}
		var w string
		var lex []string
		if _, err := pgx.ForEachRow(rows, []any{&w, &lex}, func() error {
			known[w] = slices.Clone(lex)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("store: lexemes: %w", err)
		}
		s.mu.Lock()
		if len(s.lexCache)+len(missing) > maxLexCache {
			clear(s.lexCache)
		}
		for _, w := range missing {
			s.lexCache[w] = known[w]
		}
		s.mu.Unlock()
	}
	var out []string
	for _, w := range fields {
		for _, l := range known[w] {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// maxLexCache bounds the words whose lexemes are kept (the cache starts over when full).
const maxLexCache = 50_000

func (r ranking) textPool() int {
	if r.pool <= 0 {
		return DefaultTextPool
	}
	return r.pool
}

// searchSettings is the statement tuning the vector ranking of one transaction (with
// customPlans, and its argument): the HNSW
// index is walked even where the planner would rather sort a small table (the sort reads
// every row's embedding, out of line in TOAST: 6.5 ms against 2 ms for the walk at 2,400
// rows, the walk's advantage growing with the table), and with filters (owner, type,
// repository) the walk continues until k rows pass them instead of returning fewer
// (pgvector 0.8); exact turns the index off instead.
func searchSettings(k, ef int, exact bool) (string, string) {
	q := customPlans + ", set_config('hnsw.ef_search', $1, true), set_config('hnsw.iterative_scan', 'relaxed_order', true), "
	if exact {
		q += "set_config('enable_indexscan', 'off', true), set_config('enable_bitmapscan', 'off', true)"
	} else {
		q += "set_config('enable_seqscan', 'off', true), set_config('enable_sort', 'off', true)"
	}
	if ef <= 0 {
		ef = DefaultEfSearch
	}
	return q, fmt.Sprint(max(ef, k))
}

// Explain runs the two ranking queries of a Search under EXPLAIN (ANALYZE, BUFFERS) and
// returns their plans, the vector ranking's first, with the tsqueries that picked the rows
// the text ranking scored: for benchmarks and for looking into a slow search.
func (s *Store) Explain(ctx context.Context, q SearchQuery) (vector, text []string, match string, err error) {
	r := q.ranking()
	r.columns = scoreColumns
	sel, err := s.textSelect(ctx, r)
	if err != nil {
		return nil, nil, "", err
	}
	match = sel.match
	if sel.all != "" {
		match += ", and " + sel.all
	}
	plan := func(q pgx.Tx, sql string, args []any) ([]string, error) {
		rows, err := q.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
	settings, ef := searchSettings(r.k, r.ef, r.exact)
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, settings, ef); err != nil {
			return fmt.Errorf("store: search settings: %w", err)
		}
		half, err := s.walkHalf(ctx, r.table, r.vec.Pair())
		if err != nil {
			return err
		}
		q, args := vectorQuery(r, half)
		if vector, err = plan(tx, q, args); err != nil {
			return fmt.Errorf("store: explain vector ranking: %w", err)
		}
		return nil
	})
	if err != nil || sel.match == "" {
		return vector, nil, match, err
	}
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		q, args := textQuery(r, sel, true)
		if text, err = plan(tx, q, args); err != nil {
			return fmt.Errorf("store: explain text ranking: %w", err)
		}
		return nil
	})
	return vector, text, match, err
}
