package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Stats summarizes owner's memories (of one repository when repo is set). halfLife gives
// each type's half-life for the mean relevance (importance × decay now).
func (s *Store) Stats(ctx context.Context, owner, repo string, repoSet bool, halfLife func(typev1.MemoryType) time.Duration) (*memoryv1.GetStatsResponse, error) {
	out := &memoryv1.GetStatsResponse{ByEmbeddingModel: map[string]int64{}}
	// The decay of each row, by its type's half-life stretched by its importance, as in
	// SearchMemories.
	var hl strings.Builder
	hl.WriteString("CASE m.memory_type")
	for t, name := range typeNames {
		fmt.Fprintf(&hl, " WHEN '%s' THEN %f", name, halfLife(t).Seconds())
	}
	hl.WriteString(" ELSE 2592000 END")
	decay := fmt.Sprintf(`power(2, -extract(epoch FROM now() - greatest(m.create_time, m.update_time, coalesce(m.last_used_time, m.create_time)))
		/ ((%s) * (0.5 + m.importance)))`, hl.String())
	scope := "m.owner_id = $1 AND ($2::bool = false OR m.repo = $3) AND (m.expire_time IS NULL OR m.expire_time > now())"
	var oldest, newest *time.Time
	err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(avg(m.importance), 0), coalesce(avg(m.importance * `+decay+`), 0),
			min(m.create_time), max(m.create_time)
		FROM memories m WHERE `+scope, owner, repoSet, repo).Scan(&out.Total, &out.AverageImportance, &out.AverageRelevance, &oldest, &newest)
	if err != nil {
		return nil, fmt.Errorf("store: stats: %w", err)
	}
	out.OldestCreateTime, out.NewestCreateTime = ts(oldest), ts(newest)
	group := func(col string, fn func(key string, n int64)) error {
		rows, err := s.pool.Query(ctx, "SELECT "+col+", count(*) FROM memories m WHERE "+scope+" GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 100", owner, repoSet, repo)
		if err != nil {
			return fmt.Errorf("store: stats by %s: %w", col, err)
		}
		var (
			key string
			n   int64
		)
		_, err = pgx.ForEachRow(rows, []any{&key, &n}, func() error { fn(key, n); return nil })
		if err != nil {
			return fmt.Errorf("store: stats by %s: %w", col, err)
		}
		return nil
	}
	byType := map[typev1.MemoryType]int64{}
	byTrust := map[memoryv1.MemoryTrustLevel]int64{}
	steps := []error{
		group("m.memory_type", func(k string, n int64) { byType[parseType(k)] = n }),
		group("m.trust_level", func(k string, n int64) { byTrust[parseTrust(k)] = n }),
		group("m.embedding_model", func(k string, n int64) { out.ByEmbeddingModel[k] = n }),
		group("m.repo", func(k string, n int64) { out.ByRepo = append(out.ByRepo, &memoryv1.RepoCount{Repo: k, Count: n}) }),
	}
	for _, err := range steps {
		if err != nil {
			return nil, err
		}
	}
	for t := typev1.MemoryType(1); t <= typev1.MemoryType_MEMORY_TYPE_STRATEGY; t++ {
		if n := byType[t]; n > 0 {
			out.ByType = append(out.ByType, &memoryv1.MemoryTypeCount{Type: t, Count: n})
		}
	}
	for t := memoryv1.MemoryTrustLevel(1); t <= memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_SYSTEM; t++ {
		if n := byTrust[t]; n > 0 {
			out.ByTrustLevel = append(out.ByTrustLevel, &memoryv1.TrustLevelCount{TrustLevel: t, Count: n})
		}
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM code_patterns WHERE owner_id = $1 AND ($2::bool = false OR repo = $3)`,
		owner, repoSet, repo).Scan(&out.CodePatternCount); err != nil {
		return nil, fmt.Errorf("store: stats: %w", err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM integrity_failures f JOIN memories m ON m.id = f.memory_id WHERE `+scope,
		owner, repoSet, repo).Scan(&out.IntegrityFailures); err != nil {
		return nil, fmt.Errorf("store: stats: %w", err)
	}
	return out, nil
}
