package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/thefold/thefold/pkg/db"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Item is a memory as consolidation sees it.
type Item struct {
	ID          string
	Type        typev1.MemoryType
	Importance  float64
	AccessCount int64
	UseCount    int64
	Tags        []string
	MergedFrom  []string
	Model       string
	Vector      []float32
	Created     time.Time
	LastUsed    time.Time
}

// Scope names the memories one consolidation looks at.
type Scope struct {
	Owner, Repo string
	Type        typev1.MemoryType // UNSPECIFIED: every type
}

// MaxConsolidate bounds the memories of one (repository, type) compared pairwise; the most
// recent are taken.
const MaxConsolidate = 2000

// Items loads the live memories of a scope with their vectors, most recent first, at most
// MaxConsolidate per type.
func (s *Store) Items(ctx context.Context, sc Scope) ([]*Item, error) {
	types := []string{}
	if sc.Type != typev1.MemoryType_MEMORY_TYPE_UNSPECIFIED {
		types = append(types, typeNames[sc.Type])
	}
	s.accessesLanded()
	rows, err := s.pool.Query(ctx, `SELECT id::text, memory_type, importance, coalesce((SELECT a.access_count FROM memory_access a WHERE a.memory_id = m.id), 0),
			use_count, tags, merged_from::text[],
			embedding_model, embedding, create_time, coalesce(last_used_time, create_time)
		FROM (SELECT *, row_number() OVER (PARTITION BY memory_type ORDER BY create_time DESC) AS n FROM memories
		      WHERE owner_id = $1 AND repo = $2 AND (cardinality($3::text[]) = 0 OR memory_type = ANY($3))
		        AND (expire_time IS NULL OR expire_time > now())) m
		WHERE n <= $4`, sc.Owner, sc.Repo, types, MaxConsolidate)
	if err != nil {
		return nil, fmt.Errorf("store: consolidation items: %w", err)
	}
	var out []*Item
	var (
		typ string
		vec pgvector.Vector
	)
	it := &Item{}
	_, err = pgx.ForEachRow(rows, []any{&it.ID, &typ, &it.Importance, &it.AccessCount, &it.UseCount, &it.Tags, &it.MergedFrom,
		&it.Model, &vec, &it.Created, &it.LastUsed}, func() error {
		c := *it
		c.Type = parseType(typ)
		c.Vector = slices.Clone(vec.Slice())
		out = append(out, &c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: consolidation items: %w", err)
	}
	return out, nil
}

// Merge is one consolidation group: keep absorbs the others.
type Merge struct {
	Keep   string
	Remove []string
}

// ApplyConsolidation merges the groups (the kept memory takes the union of tags, the sum of
// access and use counts, the highest importance, and the provenance of what it absorbed)
// and deletes the retired memories, in one transaction. It returns how many expired
// memories of the scope it deleted too.
func (s *Store) ApplyConsolidation(ctx context.Context, sc Scope, merges []Merge, retire []string) (int, error) {
	var expired int
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockOwner(ctx, tx, sc.Owner); err != nil {
			return err
		}
		for _, m := range merges {
			all := append([]string{m.Keep}, m.Remove...)
			if _, err := tx.Exec(ctx, `UPDATE memories k SET
					tags = (SELECT coalesce(array_agg(DISTINCT t ORDER BY t), '{}') FROM memories x, unnest(x.tags) t WHERE x.id = ANY($2::uuid[])),
					use_count = (SELECT sum(use_count) FROM memories WHERE id = ANY($2::uuid[])),
					importance = (SELECT max(importance) FROM memories WHERE id = ANY($2::uuid[])),
					merged_from = (SELECT coalesce(array_agg(DISTINCT f), '{}') FROM (
						SELECT unnest(merged_from) AS f FROM memories WHERE id = ANY($2::uuid[])
						UNION SELECT unnest($3::uuid[])) u),
					update_time = now()
				WHERE k.id = $1 AND k.owner_id = $4`, m.Keep, all, m.Remove, sc.Owner); err != nil {
				return fmt.Errorf("store: merge: %w", err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO memory_access (memory_id, access_count, last_accessed_time)
				SELECT $1, coalesce(sum(access_count), 0), max(last_accessed_time) FROM memory_access WHERE memory_id = ANY($2::uuid[])
				ON CONFLICT (memory_id) DO UPDATE SET access_count = excluded.access_count, last_accessed_time = excluded.last_accessed_time`,
				m.Keep, all); err != nil {
				return fmt.Errorf("store: merge access counts: %w", err)
			}
			if _, err := tx.Exec(ctx, "DELETE FROM memories WHERE owner_id = $1 AND id = ANY($2::uuid[])", sc.Owner, m.Remove); err != nil {
				return fmt.Errorf("store: merge: %w", err)
			}
		}
		if len(retire) > 0 {
			if _, err := tx.Exec(ctx, "DELETE FROM memories WHERE owner_id = $1 AND id = ANY($2::uuid[])", sc.Owner, retire); err != nil {
				return fmt.Errorf("store: retire: %w", err)
			}
		}
		types := []string{}
		if sc.Type != typev1.MemoryType_MEMORY_TYPE_UNSPECIFIED {
			types = append(types, typeNames[sc.Type])
		}
		tag, err := tx.Exec(ctx, `DELETE FROM memories WHERE owner_id = $1 AND repo = $2
			AND (cardinality($3::text[]) = 0 OR memory_type = ANY($3)) AND expire_time <= now()`, sc.Owner, sc.Repo, types)
		if err != nil {
			return fmt.Errorf("store: delete expired: %w", err)
		}
		expired = int(tag.RowsAffected())
		return nil
	})
	return expired, err
}

// CountExpired counts the expired memories of a scope (for a dry run).
func (s *Store) CountExpired(ctx context.Context, sc Scope) (int, error) {
	types := []string{}
	if sc.Type != typev1.MemoryType_MEMORY_TYPE_UNSPECIFIED {
		types = append(types, typeNames[sc.Type])
	}
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM memories WHERE owner_id = $1 AND repo = $2
		AND (cardinality($3::text[]) = 0 OR memory_type = ANY($3)) AND expire_time <= now()`, sc.Owner, sc.Repo, types).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: count expired: %w", err)
	}
	return n, nil
}

// Scopes lists every (owner, repository) that has memories, for the periodic consolidation.
func (s *Store) Scopes(ctx context.Context) ([]Scope, error) {
	rows, err := s.pool.Query(ctx, "SELECT DISTINCT owner_id, repo FROM memories ORDER BY 1, 2")
	if err != nil {
		return nil, fmt.Errorf("store: scopes: %w", err)
	}
	var out []Scope
	var sc Scope
	_, err = pgx.ForEachRow(rows, []any{&sc.Owner, &sc.Repo}, func() error { out = append(out, sc); return nil })
	if err != nil {
		return nil, fmt.Errorf("store: scopes: %w", err)
	}
	return out, nil
}
