package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/thefold/thefold/pkg/db"
)

// Re-embedding (migration 00006): each table's active pair in embedding_state is what its
// embedding column holds and searches use; the vectors of the target pair wait in the
// table's side table until every row has one, and Switch moves them in at once; then
// BuildIndexes builds the target's HNSW index concurrently (index.go). Migration 00006's
// comment describes the first version, whose switch built the index in its transaction.

// Pair is an embedding model (with its version) and a vector size: vectors are comparable
// only within one pair.
type Pair struct {
	Model string
	Dims  int
}

func (p Pair) String() string { return fmt.Sprintf("%s/%d", p.Model, p.Dims) }

// Known reports whether p names a pair (the zero Pair is "none yet").
func (p Pair) Known() bool { return p.Model != "" }

// Pair is the model and size of v.
func (v Vector) Pair() Pair { return Pair{Model: v.Model, Dims: len(v.Values)} }

// Tables are the tables with embeddings.
var Tables = []string{"memories", "code_patterns"}

// nextTable is each table's side table of target vectors.
var nextTable = map[string]string{"memories": "memory_next_embeddings", "code_patterns": "code_pattern_next_embeddings"}

// embedText is the text each table's rows are embedded from (what StoreMemory and
// StoreCodePattern embed), over alias m.
var embedText = map[string]string{
	"memories":      `m.summary || E'\n' || m.content`,
	"code_patterns": `m.problem || E'\n' || m.solution`,
}

func checkTable(table string) error {
	if _, ok := nextTable[table]; !ok {
		return fmt.Errorf("store: no embeddings in table %q", table)
	}
	return nil
}

// EmbeddingState is a table's active pair (zero when the table has no state yet: it is
// empty) and the target the re-embedding moves to (zero until one is recorded).
type EmbeddingState struct {
	Active, Target Pair
}

// otherPair is the condition "row of another pair than $m/$d" over alias m, as index
// ranges of the (model, size) index (<> is no index condition).
func otherPair(m, d string) string {
	return fmt.Sprintf(`(m.embedding_model < %[1]s OR m.embedding_model > %[1]s
		OR (m.embedding_model = %[1]s AND (m.embedding_dims < %[2]s OR m.embedding_dims > %[2]s)))`, m, d)
}

// State reads table's embedding state. A table with no state row takes the pair most of
// its rows have (recorded, so every replica agrees); an empty one has none.
func (s *Store) State(ctx context.Context, table string) (EmbeddingState, error) {
	if err := checkTable(table); err != nil {
		return EmbeddingState{}, err
	}
	var st EmbeddingState
	read := func() error {
		return s.pool.QueryRow(ctx, `SELECT model, dims, target_model, target_dims FROM embedding_state WHERE table_name = $1`, table).
			Scan(&st.Active.Model, &st.Active.Dims, &st.Target.Model, &st.Target.Dims)
	}
	err := read()
	if errors.Is(err, pgx.ErrNoRows) {
		_, err = s.pool.Exec(ctx, `INSERT INTO embedding_state (table_name, model, dims)
			SELECT $1, embedding_model, embedding_dims FROM `+table+`
			GROUP BY embedding_model, embedding_dims ORDER BY count(*) DESC, 2, 3 LIMIT 1
			ON CONFLICT (table_name) DO NOTHING`, table)
		if err == nil {
			if err = read(); errors.Is(err, pgx.ErrNoRows) {
				return EmbeddingState{}, nil // empty
			}
		}
	}
	if err != nil {
		return EmbeddingState{}, fmt.Errorf("store: embedding state of %s: %w", table, err)
	}
	return st, nil
}

// Adopt makes p the active pair of table when no row has another (an empty table, or one
// whose rows all have p), and reports whether it did.
func (s *Store) Adopt(ctx context.Context, table string, p Pair) (bool, error) {
	if err := checkTable(table); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO embedding_state AS s (table_name, model, dims, target_model, target_dims)
		SELECT $1, $2, $3, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM `+table+` m WHERE `+otherPair("$2", "$3")+`)
		ON CONFLICT (table_name) DO UPDATE SET model = $2, dims = $3, target_model = $2, target_dims = $3, update_time = now()
			WHERE (s.model, s.dims, s.target_model, s.target_dims) IS DISTINCT FROM ($2, $3, $2, $3)`, table, p.Model, p.Dims)
	if err != nil {
		return false, fmt.Errorf("store: adopt %s for %s: %w", p, table, err)
	}
	return tag.RowsAffected() > 0, nil
}

// SetTarget records the pair table's vectors are being moved to.
func (s *Store) SetTarget(ctx context.Context, table string, p Pair) error {
	if err := checkTable(table); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `UPDATE embedding_state SET target_model = $2, target_dims = $3, update_time = now()
		WHERE table_name = $1 AND (target_model, target_dims) IS DISTINCT FROM ($2, $3)`, table, p.Model, p.Dims); err != nil {
		return fmt.Errorf("store: target of %s: %w", table, err)
	}
	return nil
}

// Pending is a row without a vector of the target pair, and the text to embed.
type Pending struct {
	ID, Text string
}

// pendingCond is "no vector of $1/$2, in the row or its side row" over alias m.
func pendingCond(table string) string {
	return otherPair("$1", "$2") + ` AND NOT EXISTS (SELECT 1 FROM ` + nextTable[table] + ` n
		WHERE n.id = m.id AND n.model = $1 AND n.dims = $2)`
}

// Pending lists up to n rows of table, after the id after ("" from the start), that have
// no vector of target, in id order: the re-embedding's work list, kept in the database (a
// row it finished has a side row of target), so a restart continues where it stopped.
func (s *Store) Pending(ctx context.Context, table string, target Pair, after string, n int) ([]Pending, error) {
	if err := checkTable(table); err != nil {
		return nil, err
	}
	if after == "" {
		after = "00000000-0000-0000-0000-000000000000"
	}
	rows, err := s.pool.Query(ctx, `SELECT m.id::text, `+embedText[table]+` FROM `+table+` m
		WHERE m.id > $3::uuid AND `+pendingCond(table)+` ORDER BY m.id LIMIT $4`, target.Model, target.Dims, after, n)
	if err != nil {
		return nil, fmt.Errorf("store: pending re-embedding of %s: %w", table, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Pending, error) {
		var p Pending
		return p, r.Scan(&p.ID, &p.Text)
	})
	if err != nil {
		return nil, fmt.Errorf("store: pending re-embedding of %s: %w", table, err)
	}
	return out, nil
}

func params(ids []string, vecs []Vector) (Pair, []pgvector.Vector, error) {
	if len(ids) != len(vecs) || len(vecs) == 0 {
		return Pair{}, nil, fmt.Errorf("store: %d ids for %d vectors", len(ids), len(vecs))
	}
	p := vecs[0].Pair()
	out := make([]pgvector.Vector, len(vecs))
	for i, v := range vecs {
		if v.Pair() != p {
			return Pair{}, nil, fmt.Errorf("store: vectors of %s and %s in one batch", p, v.Pair())
		}
		out[i] = v.param()
	}
	return p, out, CheckModel(p.Model)
}

// SaveNext keeps the target vectors of rows of table (ids[i] is vecs[i]'s row) in its side
// table until Switch; rows deleted meanwhile are skipped.
func (s *Store) SaveNext(ctx context.Context, table string, ids []string, vecs []Vector) error {
	if err := checkTable(table); err != nil {
		return err
	}
	p, vs, err := params(ids, vecs)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO `+nextTable[table]+` (id, model, dims, embedding)
		SELECT u.id, $3, $4, u.e FROM unnest($1::uuid[], $2::vector[]) AS u(id, e) JOIN `+table+` m ON m.id = u.id
		ON CONFLICT (id) DO UPDATE SET model = excluded.model, dims = excluded.dims, embedding = excluded.embedding`,
		ids, vs, p.Model, p.Dims)
	if err != nil {
		return fmt.Errorf("store: save re-embedded vectors of %s: %w", table, err)
	}
	return nil
}

// SetVectors replaces the vectors of rows of table in place (the active pair's vectors of
// rows stored with another: after a switch, by a replica that had not seen it yet).
func (s *Store) SetVectors(ctx context.Context, table string, ids []string, vecs []Vector) error {
	if err := checkTable(table); err != nil {
		return err
	}
	p, vs, err := params(ids, vecs)
	if err != nil {
		return err
	}
	if err := s.EnsureIndex(ctx, table, p.Model, p.Dims); err != nil {
		return err
	}
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if table == "memories" {
			// The owners' version rows first, as every other change of memories takes them
			// (lockOwner): the update's trigger would take them after the rows.
			if _, err := tx.Exec(ctx, `SELECT 1 FROM memory_owner_versions WHERE owner_id IN
				(SELECT owner_id FROM memories WHERE id = ANY($1::uuid[])) ORDER BY owner_id FOR NO KEY UPDATE`, ids); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `UPDATE `+table+` m SET embedding = u.e, embedding_model = $3, embedding_dims = $4
			FROM unnest($1::uuid[], $2::vector[]) AS u(id, e) WHERE m.id = u.id`, ids, vs, p.Model, p.Dims)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: re-embed %s in place: %w", table, err)
	}
	return nil
}

// memoryPattern is what a maintenance_work_mem setting may look like.
var memoryPattern = regexp.MustCompile(`^[1-9][0-9]{0,6}(kB|MB|GB)$`)

// CheckIndexMemory reports whether m is a usable maintenance_work_mem ("512MB").
func CheckIndexMemory(m string) error {
	if !memoryPattern.MatchString(m) {
		return fmt.Errorf("%q: want a size such as 256MB or 1GB", m)
	}
	return nil
}

// Switch makes target the active pair of table if every row has a vector of it, and
// reports whether it did (false: some row has none yet, e.g. one stored just now).
//
// In one transaction, holding off writes to the table (searches go on, on the old
// vectors): the side table's vectors move into the embedding column and the state names
// the target. Searchers see all old vectors or all new ones, and the state that goes with
// them. The transaction does not build the target's HNSW index: built in bulk inside it,
// the index made every write to the table wait for the build (2.5 minutes at 100k rows).
// The caller builds it right after the commit with BuildIndexes, concurrently: writes go
// on, and searches of the target are exact scans until it is valid. The old pair's index
// is dropped afterwards (DropOtherIndexes); the old vectors are gone with the update.
func (s *Store) Switch(ctx context.Context, table string, target Pair) (bool, error) {
	if err := checkTable(table); err != nil {
		return false, err
	}
	if err := CheckModel(target.Model); err != nil {
		return false, err
	}
	// The pending check below, under the lock, joins the side table, which the job has just
	// filled: with the statistics of an empty side table (autovacuum had not come by yet)
	// the planner joined it by a nested loop over every pair of rows — 11 s at 10k rows,
	// all of it holding off writes. Fresh statistics make it a hash join (milliseconds).
	if _, err := s.pool.Exec(ctx, `ANALYZE `+nextTable[table]); err != nil {
		return false, fmt.Errorf("store: switch %s to %s: %w", table, target, err)
	}
	done := false
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if table == "memories" {
			// Every owner's version row before the table: a change of a memory takes its
			// owner's row first (lockOwner) and then waits for the table lock below, while
			// the update below, holding the table, would wait for that row — a deadlock
			// (TestSwitchBesideAChangeDoesNotDeadlock).
			if _, err := tx.Exec(ctx, `SELECT 1 FROM memory_owner_versions ORDER BY owner_id FOR NO KEY UPDATE`); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE `+table+` IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		var pending bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` m WHERE `+pendingCond(table)+`)`,
			target.Model, target.Dims).Scan(&pending); err != nil || pending {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE `+table+` m SET embedding = n.embedding, embedding_model = n.model, embedding_dims = n.dims
			FROM `+nextTable[table]+` n WHERE n.id = m.id AND n.model = $1 AND n.dims = $2 AND `+otherPair("$1", "$2"),
			target.Model, target.Dims); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO embedding_state (table_name, model, dims, target_model, target_dims) VALUES ($1, $2, $3, $2, $3)
			ON CONFLICT (table_name) DO UPDATE SET model = $2, dims = $3, target_model = $2, target_dims = $3, update_time = now()`,
			table, target.Model, target.Dims); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `TRUNCATE `+nextTable[table]); err != nil {
			return err
		}
		done = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: switch %s to %s: %w", table, target, err)
	}
	return done, nil
}

// DropOtherIndexes drops table's HNSW indexes of pairs other than keep (concurrently:
// searches running on them finish first) and returns their names.
func (s *Store) DropOtherIndexes(ctx context.Context, table string, keep Pair) ([]string, error) {
	if err := checkTable(table); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1
		AND indexname LIKE $1 || '\_hnsw\_%' AND indexname <> $2`, table, indexName(table, keep.Model, keep.Dims))
	if err != nil {
		return nil, fmt.Errorf("store: indexes of %s: %w", table, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: indexes of %s: %w", table, err)
	}
	for _, name := range names {
		s.forget(name)
		if _, err := s.pool.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+pgx.Identifier{name}.Sanitize()); err != nil {
			return nil, fmt.Errorf("store: drop index %s: %w", name, err)
		}
	}
	return names, nil
}

// Vacuum vacuums and analyzes table: after a switch it holds a dead version of every row
// (searches walk past them until autovacuum comes) and the statistics of a model no row has.
// It does not hold off reads or writes.
func (s *Store) Vacuum(ctx context.Context, table string) error {
	if err := checkTable(table); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) `+table); err != nil {
		return fmt.Errorf("store: vacuum %s: %w", table, err)
	}
	return nil
}

// Progress counts the rows in scope (owner's, every owner's when owner is "", of repo when
// repoSet) of table that have a
// vector of target, in the row or its side row, and all of them. Expired memories are out
// of scope, as in Stats.
func (s *Store) Progress(ctx context.Context, table string, target Pair, owner, repo string, repoSet bool) (done, total int64, err error) {
	if err := checkTable(table); err != nil {
		return 0, 0, err
	}
	scope := "($3 = '' OR m.owner_id = $3) AND ($4::bool = false OR m.repo = $5)"
	if table == "memories" {
		scope += " AND (m.expire_time IS NULL OR m.expire_time > now())"
	}
	err = s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE (m.embedding_model = $1 AND m.embedding_dims = $2)
			OR EXISTS (SELECT 1 FROM `+nextTable[table]+` n WHERE n.id = m.id AND n.model = $1 AND n.dims = $2)), count(*)
		FROM `+table+` m WHERE `+scope, target.Model, target.Dims, owner, repoSet, repo).Scan(&done, &total)
	if err != nil {
		return 0, 0, fmt.Errorf("store: re-embedding progress of %s: %w", table, err)
	}
	return done, total, nil
}

// TryLock takes the session advisory lock named key on a connection of its own, unless
// another session holds it (ok false): one runner of a job across replicas. unlock
// releases it.
func (s *Store) TryLock(ctx context.Context, key string) (unlock func(), ok bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("store: lock %s: %w", key, err)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, key).Scan(&ok); err != nil || !ok {
		conn.Release()
		if err != nil {
			return nil, false, fmt.Errorf("store: lock %s: %w", key, err)
		}
		return nil, false, nil
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key); err != nil {
			// The lock ends with the session: close it rather than return it to the pool held.
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}, true, nil
}
