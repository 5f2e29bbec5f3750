package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/services/memory/internal/tsindex"
	"github.com/thefold/thefold/services/memory/internal/vscan"
)

// The in-process vector ranking of memories (EnableScan): each owner's vectors, per model
// and size, held in this process (package vscan) and ranked there instead of by pgvector's
// HNSW walk, which on a two-core machine needs 5 ms at 100k memories for the recall the
// scan reaches in under 2 ms (docs/benchmarks.md). PostgreSQL stays the source of truth:
// before each search the owner's version (migration 00007) is read, and what changed since
// the version this process holds is applied — so a search sees every change committed
// before it began, by any replica. An owner's vectors are loaded on first use in the
// background; until they are, and whenever this process is far behind, searches walk the
// HNSW index as they do without the scan. Filters beyond the owner are applied in this
// process too, by the columns held with the vectors (held.go), to the scan's nearest rows;
// when they leave fewer than asked for, the search walks the index instead.
//
// The owner's full-text vectors are held beside the vectors (package tsindex), read in the
// same snapshot, so the full-text ranking runs in this process too (textscan.go).

// scanState is the store's in-process vectors, by owner.
type scanState struct {
	pool int // candidates the bits pick for the exact re-rank (vscan.Set.Nearest)

	mu     sync.Mutex
	owners map[string]*ownerVectors
	swept  time.Time // when owners idle for scanIdle were last dropped
}

// scanIdle is how long an owner's vectors are kept without a search.
const scanIdle = 30 * time.Minute

// ownerVectors is one owner's memory vectors and full-text vectors, as of version.
type ownerVectors struct {
	used time.Time // the last search, under scanState.mu

	mu      sync.Mutex // held while changes are read and applied
	loading bool       // a background load (load) is running
	loaded  bool
	version int64
	sets    map[Pair]*vscan.Set
	text    *tsindex.Index
	rows    *heldRows // what the filters and scores read (held.go)
}

func newOwnerVectors() *ownerVectors {
	return &ownerVectors{sets: map[Pair]*vscan.Set{}, text: tsindex.New(), rows: newHeldRows(), version: -1}
}

// catchUpInline is how many versions behind a search applies the changes itself; further
// behind, it walks the index while the owner's vectors are read again in the background.
const catchUpInline = 2000

// EnableScan turns the in-process vector ranking of memories on; pool is how many of an
// owner's memories the bit scan passes to the exact re-rank (1,000 gives recall@10 0.965
// at 100k memories). Call it before the store is used.
func (s *Store) EnableScan(pool int) {
	s.scan = &scanState{pool: max(pool, 1), owners: map[string]*ownerVectors{}}
}

// scanView is what the in-process rankings of a search rank: the owner's set of the
// query's pair and full-text index, holding at least what PostgreSQL held at version.
type scanView struct {
	set     *vscan.Set
	text    *tsindex.Index
	rows    *heldRows
	version int64
}

// held is what this process holds of the owner for p, without asking PostgreSQL whether it
// is current (version is the owner's version it is current as of); nil when the scan is
// off or the owner's vectors are not loaded.
func (s *Store) held(owner string, p Pair) *scanView {
	sc := s.scan
	if sc == nil {
		return nil
	}
	sc.mu.Lock()
	ov := sc.owners[owner]
	sc.mu.Unlock()
	if ov == nil {
		return nil
	}
	ov.mu.Lock()
	defer ov.mu.Unlock()
	if !ov.loaded {
		return nil
	}
	return &scanView{set: ov.set(p), text: ov.text, rows: ov.rows, version: ov.version}
}

// set is ov's set for p; an empty one when ov has no vector of p (nothing to find, not a
// reason to walk). Called with ov.mu held.
func (ov *ownerVectors) set(p Pair) *vscan.Set {
	if set := ov.sets[p]; set != nil {
		return set
	}
	return vscan.New(max(p.Dims, 1))
}

// scanned returns the owner's set for p and full-text index, current as of the search's
// start, with the owner's version then; or nil when the search must walk the HNSW index
// (and rank by full text in PostgreSQL) instead: the scan is off, or the owner's vectors
// are not loaded yet or are far behind (a load is started then).
func (s *Store) scanned(ctx context.Context, owner string, p Pair, read *VersionCheck) (*scanView, error) {
	sc := s.scan
	if sc == nil {
		return nil, nil
	}
	ov := sc.owner(owner)
	sc.mu.Lock()
	now := time.Now()
	if now.Sub(sc.swept) > time.Minute {
		sc.swept = now
		for o, x := range sc.owners {
			if now.Sub(x.used) > scanIdle {
				delete(sc.owners, o) // its next search loads it again
			}
		}
	}
	sc.mu.Unlock()

	version, err := read.wait(ctx, s, owner)
	if err != nil {
		return nil, fmt.Errorf("store: memory vectors version: %w", err)
	}
	ov.mu.Lock()
	defer ov.mu.Unlock()
	if ov.loaded && ov.version < version && version-ov.version <= catchUpInline {
		if err := s.readChanges(ctx, owner, ov); err != nil {
			return nil, err
		}
	}
	if ov.loaded && ov.version >= version {
		return &scanView{set: ov.set(p), text: ov.text, rows: ov.rows, version: version}, nil
	}
	if !ov.loading {
		ov.loading = true
		go s.load(owner, ov)
	}
	return nil, nil
}

// owner is owner's entry, made (empty, not loaded) when there is none, marked used now.
func (sc *scanState) owner(owner string) *ownerVectors {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	ov := sc.owners[owner]
	if ov == nil {
		ov = newOwnerVectors()
		sc.owners[owner] = ov
	}
	ov.used = time.Now()
	return ov
}

// VersionCheck is an owner's version, read in the background from when its search began
// (CheckVersion): a search's first step, the query's embedding, takes about as long as the
// read, which then costs the search no time of its own.
type VersionCheck struct {
	owner   string
	done    chan struct{}
	version int64
	err     error
}

// CheckVersion starts reading owner's version for a search about to begin, to be passed in
// its SearchQuery; nil when the scan is off (there is nothing to check). ctx bounds the
// read, and should be the search's.
func (s *Store) CheckVersion(ctx context.Context, owner string) *VersionCheck {
	if s.scan == nil {
		return nil
	}
	c := &VersionCheck{owner: owner, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = s.pool.QueryRow(ctx, ownerVersion, owner).Scan(&c.version)
	}()
	return c
}

// wait is the version c read, or, when c is nil or of another owner, owner's version read
// now.
func (c *VersionCheck) wait(ctx context.Context, s *Store, owner string) (int64, error) {
	if c == nil || c.owner != owner {
		var version int64
		err := s.pool.QueryRow(ctx, ownerVersion, owner).Scan(&version)
		return version, err
	}
	select {
	case <-c.done:
		return c.version, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// ownerVersion reads an owner's version (0 before its first memory).
const ownerVersion = `SELECT coalesce((SELECT version FROM memory_owner_versions WHERE owner_id = $1), 0)`

// load reads all of the owner's vectors and full-text vectors into new sets and a new
// index, without holding up searches (they walk the index meanwhile), and puts them in
// ov's place.
func (s *Store) load(owner string, ov *ownerVectors) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fresh := newOwnerVectors()
	err := s.readChanges(ctx, owner, fresh)
	ov.mu.Lock()
	defer ov.mu.Unlock()
	ov.loading = false
	if err == nil && fresh.version >= ov.version {
		ov.sets, ov.text, ov.rows, ov.version, ov.loaded = fresh.sets, fresh.text, fresh.rows, fresh.version, true
	}
}

// readChanges applies to ov the owner's memory vectors and full-text vectors stored or
// changed (every change of the content makes a new embedding, and so a new version), and
// the deletes, after ov.version (all of them when it is -1), in one snapshot, and sets
// ov.version to the owner's version in that snapshot.
func (s *Store) readChanges(ctx context.Context, owner string, ov *ownerVectors) error {
	return db.ReadTx(ctx, s.pool, func(tx pgx.Tx) error {
		var version, pruned int64
		err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0), coalesce(max(pruned), 0) FROM memory_owner_versions WHERE owner_id = $1`, owner).Scan(&version, &pruned)
		if err != nil {
			return fmt.Errorf("store: memory vectors version: %w", err)
		}
		if ov.version >= 0 && ov.version < pruned {
			// Deletes since ov.version may have lost their tombstones: read everything.
			fresh := newOwnerVectors()
			ov.version, ov.sets, ov.text, ov.rows = fresh.version, fresh.sets, fresh.text, fresh.rows
		}
		rows, err := tx.Query(ctx, `SELECT id::text, embedding_model, embedding, search::text, `+heldColumns+` FROM memories
			WHERE owner_id = $1 AND owner_version > $2`, owner, ov.version)
		if err != nil {
			return fmt.Errorf("store: memory vectors: %w", err)
		}
		var id, model, search string
		var vec pgvector.Vector
		var held heldRow
		_, err = pgx.ForEachRow(rows, append([]any{&id, &model, &vec, &search}, held.scanArgs()...), func() error {
			if err := ov.text.Put(id, search); err != nil {
				return err
			}
			h := held
			h.tags = slices.Clone(held.tags)
			ov.rows.put(id, &h)
			held = heldRow{} // pgx scans into the pointers it finds: the next row gets new ones
			v := vec.Slice()
			p := Pair{Model: model, Dims: len(v)}
			for q, set := range ov.sets { // a re-embedded row leaves its old pair's set
				if q != p {
					set.Delete(id)
				}
			}
			set := ov.sets[p]
			if set == nil {
				set = vscan.New(p.Dims)
				ov.sets[p] = set
			}
			set.Put(id, v)
			return nil
		})
		if err != nil {
			return fmt.Errorf("store: memory vectors: %w", err)
		}
		if ov.version >= 0 {
			rows, err := tx.Query(ctx, `SELECT id::text FROM memory_tombstones WHERE owner_id = $1 AND owner_version > $2`, owner, ov.version)
			if err != nil {
				return fmt.Errorf("store: memory tombstones: %w", err)
			}
			_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
				for _, set := range ov.sets {
					set.Delete(id)
				}
				ov.text.Delete(id)
				ov.rows.delete(id)
				return nil
			})
			if err != nil {
				return fmt.Errorf("store: memory tombstones: %w", err)
			}
		}
		ov.version = version
		return nil
	})
}

// TombstoneAge is how long a deleted memory's tombstone is kept for replicas to catch up
// with (PruneTombstones); one further behind reads the owner's vectors again.
const TombstoneAge = 24 * time.Hour

// PruneTombstones removes the tombstones of memories deleted before before, and records per
// owner the newest version removed; it returns how many it removed.
func (s *Store) PruneTombstones(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `WITH gone AS (
			DELETE FROM memory_tombstones WHERE delete_time < $1 RETURNING owner_id, owner_version),
		marked AS (UPDATE memory_owner_versions o SET pruned = greatest(o.pruned, g.v)
			FROM (SELECT owner_id, max(owner_version) AS v FROM gone GROUP BY owner_id) g
			WHERE o.owner_id = g.owner_id)
		SELECT count(*) FROM gone`, before).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: prune tombstones: %w", err)
	}
	return n, nil
}

// scanQuery is the k rows nearest the query vector among hits (the scan's nearest, nearest
// first) that r's filters let through, in r.columns and the scores, nearest first:
// vectorQuery's result, from the scan instead of the walk. The vector score is the scan's
// similarity, so no row's embedding is read; the text rank is PostgreSQL's with textRank,
// and otherwise 0 (the caller ranks the rows by full text in this process).
func scanQuery(r ranking, hits []vscan.Hit, textRank bool) (string, []any) {
	ids := make([]string, len(hits))
	sims := make([]float32, len(hits))
	for i, h := range hits {
		ids[i], sims[i] = h.ID, h.Sim
	}
	c := db.Conds{Args: slices.Clone(r.args)}
	rank := "0::real"
	if textRank {
		rank = fmt.Sprintf("ts_rank(m.search, %s, 1|32)", orQuery(c.Arg(r.words)))
	}
	k, in, sim := c.Arg(r.k), c.Arg(ids), c.Arg(sims)
	dims := len(r.vec.Values)
	return fmt.Sprintf(`SELECT %s, greatest(0, u.sim)::float8, %s
		FROM unnest(%s::uuid[], %s::real[]) AS u(id, sim) JOIN %s m ON m.id = u.id
		WHERE %s AND %s ORDER BY u.sim DESC, m.id LIMIT %s`,
		r.columns, rank, in, sim, r.table, r.where, vecPred(r.vec.Model, dims), k), c.Args
}

// LoadScan loads the owner's vectors for the in-process ranking now and waits for it (a
// search otherwise starts the load in the background and walks the index until it is
// done): for benchmarks and tests, and for a replica that wants an owner warm. It does
// nothing when the scan is off.
func (s *Store) LoadScan(ctx context.Context, owner string) error {
	if s.scan == nil {
		return nil
	}
	ov := s.scan.owner(owner)
	ov.mu.Lock()
	defer ov.mu.Unlock()
	if err := s.readChanges(ctx, owner, ov); err != nil {
		return err
	}
	ov.loaded = true
	return nil
}
