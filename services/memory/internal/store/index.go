package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// HNSW indexes are built CONCURRENTLY (writes to the table go on; searches of the pair are
// exact scans until the index is valid), never by a plain CREATE INDEX: that one holds off
// every write to the table for the build (minutes for a table of one pair at 100k rows) and,
// queued behind another concurrent build on the table, makes every write queue behind it.
//
// A concurrent build that fails or is interrupted (the server restarts, the build is
// cancelled) leaves the index in the catalog, invalid: no search uses it, and CREATE INDEX
// IF NOT EXISTS would keep it forever. BuildIndexes, run by the re-embedding job, drops and
// rebuilds such indexes; EnsureIndex, on the request path, does not count them as built.

// indexStatus is what the catalog says of one index.
type indexStatus struct {
	exists, valid bool
	// building: a CREATE INDEX (CONCURRENTLY) of it is running now, in some session.
	building bool
}

// indexState reads the status of the index named name in the current schema.
func (s *Store) indexState(ctx context.Context, name string) (indexStatus, error) {
	st := indexStatus{exists: true}
	err := s.pool.QueryRow(ctx, `SELECT i.indisvalid, EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_index i ON i.indexrelid = c.oid
		WHERE n.nspname = current_schema() AND c.relname = $1`, name).Scan(&st.valid, &st.building)
	if errors.Is(err, pgx.ErrNoRows) {
		return indexStatus{}, nil
	}
	if err != nil {
		return indexStatus{}, fmt.Errorf("store: index %s: %w", name, err)
	}
	return st, nil
}

// hnswParams are the HNSW graph's build parameters: more links per node (m) and a wider
// search while linking (ef_construction) than pgvector's defaults (16, 64). On the latency
// benchmark's 100k generated memories (local@2) they lift recall@10 of a walk with
// ef_search 40 from 0.78 to 0.86 (ef_search 100: 0.87 → 0.93) at the same walk time, for
// about 30% more build time (2026-11-28). Indexes built before keep their parameters.
const hnswParams = "WITH (m = 24, ef_construction = 128)"

// createIndexSQL builds the HNSW index of one pair without holding off writes.
func createIndexSQL(table string, p Pair) string {
	return fmt.Sprintf(`CREATE INDEX CONCURRENTLY IF NOT EXISTS %s ON %s USING hnsw (%s halfvec_cosine_ops) %s WHERE %s`,
		indexName(table, p.Model, p.Dims), table, halfvecExpr(p.Dims), hnswParams, vecPred(p.Model, p.Dims))
}

// BuildIndexes makes every pair that table has rows of have a valid HNSW index, and returns
// the names of those it built. Invalid indexes of the table (a concurrent build failed or
// was interrupted) are dropped first, unless a build of them is running now, and built
// again if their pair has rows. Builds run one after another on one connection with
// indexMemory of maintenance_work_mem (a bulk build far faster than the default's), reset
// before the connection goes back to the pool.
//
// The re-embedding job runs it right after a switch (the target's index: all rows have
// the target now) and on every pass (so a crash between a switch and its build, or a build
// that failed, heals on the next). With nothing to do it costs a few catalog queries and
// index probes.
func (s *Store) BuildIndexes(ctx context.Context, table, indexMemory string) ([]string, error) {
	if err := checkTable(table); err != nil {
		return nil, err
	}
	if err := CheckIndexMemory(indexMemory); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND i.indrelid = to_regclass($1) AND c.relname LIKE $1 || '\_hnsw\_%'
			AND NOT i.indisvalid AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = c.oid)`, table)
	if err != nil {
		return nil, fmt.Errorf("store: invalid indexes of %s: %w", table, err)
	}
	invalid, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: invalid indexes of %s: %w", table, err)
	}
	for _, name := range invalid {
		s.forget(name)
		if _, err := s.pool.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+pgx.Identifier{name}.Sanitize()); err != nil {
			return nil, fmt.Errorf("store: drop invalid index %s: %w", name, err)
		}
	}
	// The table's pairs, one probe of the (model, size) index each (a skip scan).
	rows, err = s.pool.Query(ctx, `WITH RECURSIVE p(m, d) AS (
			(SELECT embedding_model, embedding_dims FROM `+table+` ORDER BY 1, 2 LIMIT 1)
			UNION ALL
			SELECT q.* FROM p, LATERAL (SELECT embedding_model, embedding_dims FROM `+table+`
				WHERE (embedding_model, embedding_dims) > (p.m, p.d) ORDER BY 1, 2 LIMIT 1) q)
		SELECT m, d FROM p`)
	if err != nil {
		return nil, fmt.Errorf("store: pairs of %s: %w", table, err)
	}
	pairs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Pair])
	if err != nil {
		return nil, fmt.Errorf("store: pairs of %s: %w", table, err)
	}
	var (
		built []string
		conn  *pgxpool.Conn
	)
	defer func() {
		if conn != nil {
			s.releaseIndexConn(ctx, conn)
		}
	}()
	for _, p := range pairs {
		if err := CheckModel(p.Model); err != nil {
			return built, err
		}
		name := indexName(table, p.Model, p.Dims)
		st, err := s.indexState(ctx, name)
		if err != nil {
			return built, err
		}
		if st.valid {
			s.remember(name)
			if err := s.dropLegacyIndex(ctx, table, p); err != nil {
				return built, err
			}
			continue
		}
		if st.exists { // being built by another session (an EnsureIndex): a later pass looks again
			continue
		}
		if conn == nil {
			if conn, err = s.pool.Acquire(ctx); err != nil {
				return built, fmt.Errorf("store: index for %s: %w", p, err)
			}
			if _, err := conn.Exec(ctx, `SELECT set_config('maintenance_work_mem', $1, false)`, indexMemory); err != nil {
				return built, fmt.Errorf("store: index for %s: %w", p, err)
			}
		}
		if _, err := conn.Exec(ctx, createIndexSQL(table, p)); err != nil {
			return built, fmt.Errorf("store: index for %s: %w", p, err)
		}
		// Another session may have started the same build in between (this one then waited
		// for it, and IF NOT EXISTS did nothing): is the index valid?
		if st, err := s.indexState(ctx, name); err != nil || !st.valid {
			continue
		}
		s.remember(name)
		built = append(built, name)
		if err := s.dropLegacyIndex(ctx, table, p); err != nil {
			return built, err
		}
	}
	return built, nil
}

// dropLegacyIndex drops the full-precision HNSW index of pair p, if there is one, once its
// half-precision index is valid (concurrently: searches walking it finish first, and new ones
// walk the new index, see Store.walkHalf).
func (s *Store) dropLegacyIndex(ctx context.Context, table string, p Pair) error {
	legacy := legacyIndexName(table, p.Model, p.Dims)
	st, err := s.indexState(ctx, legacy)
	if err != nil || !st.exists {
		return err
	}
	s.forget(legacy)
	if _, err := s.pool.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+pgx.Identifier{legacy}.Sanitize()); err != nil {
		return fmt.Errorf("store: drop %s: %w", legacy, err)
	}
	return nil
}

// legacyRecheck is how long a search keeps walking a pair's full-precision index before it
// looks again whether the pair's half-precision index has been built.
const legacyRecheck = 10 * time.Second

// walkHalf reports whether searches of pair p walk its half-precision HNSW index (the one
// indexName names) rather than the full-precision index it had before (legacyIndexName):
// yes once that index is valid, or when the pair has no valid full-precision index either
// (a new pair, or one whose index is being built: the search is then an exact scan either
// way). Until then the full-precision index serves, so an upgrade's searches stay fast
// while BuildIndexes builds the new one; the answer is kept legacyRecheck.
func (s *Store) walkHalf(ctx context.Context, table string, p Pair) (bool, error) {
	name := indexName(table, p.Model, p.Dims)
	s.mu.Lock()
	half := s.indexed[name]
	until, waiting := s.legacyUntil[name]
	s.mu.Unlock()
	if half || (waiting && time.Now().Before(until)) {
		return half, nil
	}
	st, err := s.indexState(ctx, name)
	if err != nil {
		return false, err
	}
	if st.valid {
		s.remember(name)
		s.mu.Lock()
		delete(s.legacyUntil, name)
		s.mu.Unlock()
		return true, nil
	}
	legacy, err := s.indexState(ctx, legacyIndexName(table, p.Model, p.Dims))
	if err != nil || !legacy.valid {
		return true, err
	}
	s.mu.Lock()
	s.legacyUntil[name] = time.Now().Add(legacyRecheck)
	s.mu.Unlock()
	return false, nil
}

// releaseIndexConn puts back a connection BuildIndexes set maintenance_work_mem on, reset,
// or closes it when the reset fails (ctx cancelled in the middle of a build breaks it).
func (s *Store) releaseIndexConn(ctx context.Context, conn *pgxpool.Conn) {
	ctx = context.WithoutCancel(ctx)
	if _, err := conn.Exec(ctx, `RESET maintenance_work_mem`); err != nil {
		_ = conn.Conn().Close(ctx)
	}
	conn.Release()
}

func (s *Store) remember(name string) {
	s.mu.Lock()
	s.indexed[name] = true
	s.mu.Unlock()
}

func (s *Store) isIndexed(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.indexed[name]
}

func (s *Store) forget(name string) {
	s.mu.Lock()
	delete(s.indexed, name)
	s.mu.Unlock()
}
