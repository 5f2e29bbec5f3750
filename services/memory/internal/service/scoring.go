package service

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/memory/internal/store"
)

// Search scoring, as pure functions of the candidates the store found: how the vector and
// full-text scores fuse into one similarity, how age decays it, how use boosts it, why a
// memory ranked, and the order of the results. SearchMemories only validates, calls the
// store and applies these.

// rrfK is reciprocal-rank fusion's constant (Cormack et al.).
const rrfK = 60

// scoring is one search's ranking settings.
type scoring struct {
	fusion        memoryv1.MemoryFusion
	alpha         float64 // weight of the vector score in ALPHA fusion
	minSimilarity float64
	now           time.Time
	halfLife      func(typev1.MemoryType) time.Duration
	// The best vector and text scores among the candidates: ALPHA fusion divides each
	// score by the best of its ranking, so cosines and full-text ranks share one scale
	// (a raw blend lets the larger one decide alone).
	maxVector, maxText float64
}

// newScoring is the ranking of one search over cands.
func newScoring(fusion memoryv1.MemoryFusion, alpha, minSimilarity float64, now time.Time, halfLife func(typev1.MemoryType) time.Duration, cands []*store.Candidate) scoring {
	s := scoring{fusion: fusion, alpha: alpha, minSimilarity: minSimilarity, now: now, halfLife: halfLife}
	for _, c := range cands {
		s.maxVector, s.maxText = max(s.maxVector, c.Vector), max(s.maxText, c.Text)
	}
	return s
}

// similarity fuses a candidate's two scores into 0–1. RRF is normalised so that first in
// both rankings scores 1.
func (s scoring) similarity(vector, text float64, vectorRank, textRank int) float64 {
	if s.fusion == memoryv1.MemoryFusion_MEMORY_FUSION_RRF {
		var sum float64
		for _, r := range []int{vectorRank, textRank} {
			if r > 0 {
				sum += 1 / float64(rrfK+r)
			}
		}
		return sum / (2.0 / (rrfK + 1))
	}
	return s.alpha*scaled(vector, s.maxVector) + (1-s.alpha)*scaled(text, s.maxText)
}

func scaled(x, best float64) float64 {
	if best <= 0 {
		return 0
	}
	return x / best
}

// score scores one candidate; ok is false when it falls below the minimum similarity (or
// matches nothing).
func (s scoring) score(c *store.Candidate) (sc *memoryv1.MemoryScore, ok bool) {
	sc = &memoryv1.MemoryScore{Vector: c.Vector, Text: c.Text, Fusion: s.fusion,
		VectorRank: int32(c.VectorRank), TextRank: int32(c.TextRank)}
	sc.Similarity = s.similarity(c.Vector, c.Text, c.VectorRank, c.TextRank)
	if sc.Similarity < s.minSimilarity || sc.Similarity <= 0 {
		return nil, false
	}
	sc.Decay = decay(c.Memory, s.now, s.halfLife(c.GetType()))
	sc.UsageBoost = usageBoost(c.GetUseCount())
	sc.Final = sc.Similarity * sc.Decay * (1 + sc.UsageBoost)
	sc.Reason = reason(c.Memory, sc, s.halfLife(c.GetType()))
	return sc, true
}

// decay is the 0–1 factor of a memory's age since it was last used (or stored), by the
// half-life of its type; importance stretches the half-life from ×0.5 (0) to ×1.5 (1).
func decay(m *memoryv1.Memory, now time.Time, halfLife time.Duration) float64 {
	since := m.GetUpdateTime().AsTime()
	if c := m.GetCreateTime().AsTime(); c.After(since) {
		since = c
	}
	if m.GetLastUsedTime() != nil && m.GetLastUsedTime().AsTime().After(since) {
		since = m.GetLastUsedTime().AsTime()
	}
	age := max(now.Sub(since), 0)
	hl := float64(halfLife) * (0.5 + m.GetImportance())
	return math.Exp2(-float64(age) / hl)
}

// decay is decay by the configured half-life of m's type.
func (s *Server) decay(m *memoryv1.Memory, now time.Time) float64 {
	return decay(m, now, s.cfg.halfLife(m.GetType()))
}

// usageBoost rewards memories that were used: 0.1 per doubling of the use count, at most
// 0.5.
func usageBoost(uses int64) float64 { return math.Min(0.5, 0.1*math.Log2(1+float64(uses))) }

// reason says in one line why a memory ranked.
func reason(m *memoryv1.Memory, sc *memoryv1.MemoryScore, halfLife time.Duration) string {
	var parts []string
	switch {
	case sc.GetVectorRank() > 0 && sc.GetTextRank() > 0:
		parts = append(parts, fmt.Sprintf("text #%d + vector #%d", sc.GetTextRank(), sc.GetVectorRank()))
	case sc.GetTextRank() > 0:
		parts = append(parts, fmt.Sprintf("text #%d only", sc.GetTextRank()))
	default:
		parts = append(parts, fmt.Sprintf("vector #%d only", sc.GetVectorRank()))
	}
	fusion := "alpha"
	if sc.GetFusion() == memoryv1.MemoryFusion_MEMORY_FUSION_RRF {
		fusion = "rrf"
	}
	parts[0] += fmt.Sprintf(" (%s %.2f)", fusion, sc.GetSimilarity())
	parts = append(parts, fmt.Sprintf("%s half-life %s, decay %.2f", store.TypeName(m.GetType()), days(halfLife), sc.GetDecay()))
	if m.GetUseCount() > 0 {
		parts = append(parts, fmt.Sprintf("used %d× (+%.0f%%)", m.GetUseCount(), 100*sc.GetUsageBoost()))
	}
	return strings.Join(parts, ", ")
}

func days(d time.Duration) string {
	if d < 48*time.Hour {
		return fmt.Sprintf("%.0fh", d.Hours())
	}
	return fmt.Sprintf("%.0fd", d.Hours()/24)
}

// best orders results by final score (ties by id, so the order is stable) and keeps limit.
func best(results []*memoryv1.MemorySearchResult, limit int) []*memoryv1.MemorySearchResult {
	slices.SortStableFunc(results, func(a, b *memoryv1.MemorySearchResult) int {
		switch {
		case a.GetScore().GetFinal() > b.GetScore().GetFinal():
			return -1
		case a.GetScore().GetFinal() < b.GetScore().GetFinal():
			return 1
		}
		return strings.Compare(a.GetMemory().GetId(), b.GetMemory().GetId())
	})
	if len(results) > limit {
		results = results[:limit]
	}
	return results
}
