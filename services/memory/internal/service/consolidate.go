package service

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/thefold/thefold/pkg/errs"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"
	"github.com/thefold/thefold/pkg/wait"

	"github.com/thefold/thefold/services/memory/internal/store"
)

// Low-value memories are retired by Consolidate: never used, read at most once, of low
// importance, and faded below retireDecay.
const (
	defaultThreshold = 0.92
	retireImportance = 0.3
	retireDecay      = 0.05
)

// Consolidate merges near-duplicates and retires expired and low-value memories of one
// repository (and type).
func (s *Server) Consolidate(ctx context.Context, req *memoryv1.ConsolidateRequest) (*memoryv1.ConsolidateResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.GetRepo(), false); err != nil {
		return nil, err
	}
	if err := validate.Enum("type", req.GetType(), true); err != nil {
		return nil, err
	}
	th := req.GetSimilarityThreshold()
	switch {
	case math.IsNaN(th) || th < 0 || th > 1:
		return nil, errs.Invalid("similarity_threshold", "want 0.5 to 1, or 0 for %.2f", defaultThreshold)
	case th == 0:
		th = defaultThreshold
	case th < 0.5:
		return nil, errs.Invalid("similarity_threshold", "want 0.5 to 1 (below that, unrelated memories would merge), or 0 for %.2f", defaultThreshold)
	}
	return s.consolidate(ctx, store.Scope{Owner: p.UserID, Repo: req.GetRepo(), Type: req.GetType()}, th, req.GetDryRun())
}

// consolidate plans the merges and retirements of a scope and, unless dryRun, applies them.
//
// Within each type, memories are taken from the most valuable (importance, uses, accesses,
// recency) down; each one not yet absorbed keeps every later memory whose embedding's cosine
// similarity to it reaches the threshold (same model only). So the kept memory of a group
// is its most valuable one, and a run leaves no pair above the threshold to merge again.
func (s *Server) consolidate(ctx context.Context, sc store.Scope, threshold float64, dryRun bool) (*memoryv1.ConsolidateResponse, error) {
	items, err := s.store.Items(ctx, sc)
	if err != nil {
		return nil, err
	}
	now := s.now()
	byType := map[typev1.MemoryType][]*store.Item{}
	for _, it := range items {
		byType[it.Type] = append(byType[it.Type], it)
	}
	resp := &memoryv1.ConsolidateResponse{}
	var (
		merges []store.Merge
		retire []string
	)
	types := make([]typev1.MemoryType, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, t := range types {
		group := byType[t]
		slices.SortStableFunc(group, func(a, b *store.Item) int { return compareValue(b, a) })
		absorbed := make([]bool, len(group))
		for i, keep := range group {
			if absorbed[i] {
				continue
			}
			var removed []string
			for j := i + 1; j < len(group); j++ {
				if absorbed[j] || group[j].Model != keep.Model || len(group[j].Vector) != len(keep.Vector) {
					continue
				}
				if cosine(keep.Vector, group[j].Vector) >= threshold {
					absorbed[j] = true
					removed = append(removed, group[j].ID)
				}
			}
			if len(removed) > 0 {
				merges = append(merges, store.Merge{Keep: keep.ID, Remove: removed})
				resp.Groups = append(resp.Groups, &memoryv1.ConsolidatedGroup{KeptId: keep.ID, RemovedIds: removed})
				resp.RemovedCount += int32(len(removed))
				continue
			}
			m := &memoryv1.Memory{Type: t, Importance: keep.Importance, CreateTime: ts(keep.Created), UpdateTime: ts(keep.Created), LastUsedTime: ts(keep.LastUsed)}
			if keep.UseCount == 0 && keep.AccessCount <= 1 && keep.Importance < retireImportance && s.decay(m, now) < retireDecay {
				retire = append(retire, keep.ID)
			}
		}
	}
	resp.MergedCount = int32(len(merges))
	resp.RetiredCount = int32(len(retire))
	if dryRun {
		n, err := s.store.CountExpired(ctx, sc)
		if err != nil {
			return nil, err
		}
		resp.ExpiredCount = int32(n)
		return resp, nil
	}
	n, err := s.store.ApplyConsolidation(ctx, sc, merges, retire)
	if err != nil {
		return nil, err
	}
	resp.ExpiredCount = int32(n)
	if resp.MergedCount+resp.RetiredCount+resp.ExpiredCount > 0 {
		s.log.InfoContext(ctx, "memories consolidated", "owner", sc.Owner, "repo", sc.Repo, "merged", resp.MergedCount,
			"removed", resp.RemovedCount, "retired", resp.RetiredCount, "expired", resp.ExpiredCount)
	}
	return resp, nil
}

// compareValue orders memories by how much they are worth keeping.
func compareValue(a, b *store.Item) int {
	switch {
	case a.Importance != b.Importance:
		return cmpFloat(a.Importance, b.Importance)
	case a.UseCount != b.UseCount:
		return cmpInt(a.UseCount, b.UseCount)
	case a.AccessCount != b.AccessCount:
		return cmpInt(a.AccessCount, b.AccessCount)
	}
	return a.Created.Compare(b.Created)
}

func cmpFloat(a, b float64) int {
	if a < b {
		return -1
	}
	return 1
}

func cmpInt(a, b int64) int {
	if a < b {
		return -1
	}
	return 1
}

// cosine is the cosine similarity of two vectors.
func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// RunConsolidation consolidates every owner's memories of every repository each interval
// (threshold 0.92), until ctx ends.
func (s *Server) RunConsolidation(ctx context.Context, every time.Duration) error {
	wait.Every(ctx, every, func(ctx context.Context) {
		scopes, err := s.store.Scopes(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "periodic consolidation", "err", err)
			}
			return
		}
		for _, sc := range scopes {
			if _, err := s.consolidate(ctx, sc, defaultThreshold, false); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "periodic consolidation", "owner", sc.Owner, "repo", sc.Repo, "err", err)
			}
		}
		if _, err := s.store.PruneTombstones(ctx, s.now().Add(-store.TombstoneAge)); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "pruning deleted memories' tombstones", "err", err)
		}
	})
	return nil
}
