package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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
	// One scan: the totals and the counts by type, trust level, embedding model and
	// repository as grouping sets (GROUPING says which set a row belongs to).
	rows, err := s.pool.Query(ctx, `SELECT GROUPING(m.memory_type, m.trust_level, m.embedding_model, m.repo),
			coalesce(m.memory_type, ''), coalesce(m.trust_level, ''), coalesce(m.embedding_model, ''), coalesce(m.repo, ''),
			count(*), coalesce(avg(m.importance), 0), coalesce(avg(m.importance * `+decay+`), 0), min(m.create_time), max(m.create_time)
		FROM memories m WHERE `+scope+`
		GROUP BY GROUPING SETS ((), (m.memory_type), (m.trust_level), (m.embedding_model), (m.repo))`, owner, repoSet, repo)
	if err != nil {
		return nil, fmt.Errorf("store: stats: %w", err)
	}
	byType := map[typev1.MemoryType]int64{}
	byTrust := map[memoryv1.MemoryTrustLevel]int64{}
	var (
		set                   int
		typ, trust, model, rp string
		n                     int64
		avgImp, avgRel        float64
		oldest, newest        *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&set, &typ, &trust, &model, &rp, &n, &avgImp, &avgRel, &oldest, &newest}, func() error {
		// GROUPING's bits, first argument highest: 1 where the column is not grouped by.
		switch set {
		case 0b1111:
			out.Total, out.AverageImportance, out.AverageRelevance = n, avgImp, avgRel
			out.OldestCreateTime, out.NewestCreateTime = ts(oldest), ts(newest)
		case 0b0111:
			byType[parseType(typ)] = n
		case 0b1011:
			byTrust[parseTrust(trust)] = n
		case 0b1101:
			out.ByEmbeddingModel[model] = n
		case 0b1110:
			out.ByRepo = append(out.ByRepo, &memoryv1.RepoCount{Repo: rp, Count: n})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: stats: %w", err)
	}
	// The hundred repositories with the most memories.
	slices.SortFunc(out.ByRepo, func(a, b *memoryv1.RepoCount) int {
		return cmp.Or(cmp.Compare(b.GetCount(), a.GetCount()), strings.Compare(a.GetRepo(), b.GetRepo()))
	})
	out.ByRepo = out.ByRepo[:min(len(out.ByRepo), 100)]
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
