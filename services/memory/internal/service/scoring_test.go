package service

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/memory/internal/store"
)

func week(typev1.MemoryType) time.Duration { return 7 * 24 * time.Hour }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func cand(id string, vector, text float64, vr, tr int, m *memoryv1.Memory) *store.Candidate {
	if m == nil {
		m = &memoryv1.Memory{}
	}
	m.Id = id
	return &store.Candidate{Row: &store.Row{Memory: m, HashOK: true}, Vector: vector, Text: text, VectorRank: vr, TextRank: tr}
}

// ALPHA fusion puts both scores on one scale (each divided by the best of its ranking)
// before weighting them; RRF is normalised so that first in both rankings scores 1.
func TestFusion(t *testing.T) {
	now := time.Now()
	cands := []*store.Candidate{cand("a", 0.8, 0.1, 1, 2, nil), cand("b", 0.4, 0.2, 2, 1, nil)}
	alpha := newScoring(memoryv1.MemoryFusion_MEMORY_FUSION_ALPHA, 0.5, 0, now, week, cands)
	if got := alpha.similarity(0.8, 0.1, 1, 2); !near(got, 0.5*1+0.5*0.5) {
		t.Errorf("alpha a = %v", got)
	}
	if got := alpha.similarity(0.4, 0.2, 2, 1); !near(got, 0.5*0.5+0.5*1) {
		t.Errorf("alpha b = %v", got)
	}
	rrf := newScoring(memoryv1.MemoryFusion_MEMORY_FUSION_RRF, 0.5, 0, now, week, cands)
	if got := rrf.similarity(0, 0, 1, 1); !near(got, 1) {
		t.Errorf("rrf first in both = %v, want 1", got)
	}
	if got := rrf.similarity(0, 0, 1, 0); !near(got, 0.5) {
		t.Errorf("rrf first in one ranking only = %v, want 0.5", got)
	}
	// No text matches at all: the text side scales to 0, not NaN.
	none := newScoring(memoryv1.MemoryFusion_MEMORY_FUSION_ALPHA, 0.7, 0, now, week, []*store.Candidate{cand("c", 0.5, 0, 1, 0, nil)})
	if got := none.similarity(0.5, 0, 1, 0); !near(got, 0.7) {
		t.Errorf("alpha without text = %v, want 0.7", got)
	}
}

// Age halves a memory's weight every half-life (stretched by importance), counted from its
// last use; use boosts it by 0.1 per doubling, at most 0.5.
func TestDecayAndBoost(t *testing.T) {
	now := time.Date(2030, 1, 15, 0, 0, 0, 0, time.UTC)
	old := now.Add(-7 * 24 * time.Hour)
	m := &memoryv1.Memory{CreateTime: timestamppb.New(old), UpdateTime: timestamppb.New(old), Importance: 0.5}
	if got := decay(m, now, 7*24*time.Hour); !near(got, 0.5) {
		t.Errorf("one half-life at importance 0.5 = %v, want 0.5", got)
	}
	m.Importance = 1 // ×1.5 half-life
	if got := decay(m, now, 7*24*time.Hour); !near(got, math.Exp2(-1/1.5)) {
		t.Errorf("importance 1 = %v", got)
	}
	m.LastUsedTime = timestamppb.New(now)
	if got := decay(m, now, 7*24*time.Hour); !near(got, 1) {
		t.Errorf("used just now = %v, want 1", got)
	}
	if got := decay(m, now.Add(-time.Hour), time.Hour); !near(got, 1) {
		t.Errorf("a clock behind the memory = %v, want 1", got)
	}
	for uses, want := range map[int64]float64{0: 0, 1: 0.1, 3: 0.2, 1 << 20: 0.5} {
		if got := usageBoost(uses); !near(got, want) {
			t.Errorf("usageBoost(%d) = %v, want %v", uses, got, want)
		}
	}
}

// A candidate below the minimum similarity is dropped; the rest are ordered by final score,
// ties by id, and cut at the limit; each says why it ranked.
func TestScoreAndBest(t *testing.T) {
	now := time.Now()
	fresh := func() *memoryv1.Memory {
		return &memoryv1.Memory{CreateTime: timestamppb.New(now), UpdateTime: timestamppb.New(now), Importance: 0.5, Type: typev1.MemoryType_MEMORY_TYPE_DECISION}
	}
	used := fresh()
	used.UseCount = 3
	cands := []*store.Candidate{cand("b", 0.9, 0, 1, 0, fresh()), cand("a", 0.9, 0, 1, 0, fresh()), cand("c", 0.1, 0, 3, 0, fresh()), cand("d", 0.9, 0.5, 1, 1, used)}
	s := newScoring(memoryv1.MemoryFusion_MEMORY_FUSION_ALPHA, 1, 0.5, now, week, cands)
	var results []*memoryv1.MemorySearchResult
	for _, c := range cands {
		if sc, ok := s.score(c); ok {
			results = append(results, &memoryv1.MemorySearchResult{Memory: c.Memory, Score: sc})
		}
	}
	if len(results) != 3 {
		t.Fatalf("kept %d, want 3 (c is below min_similarity)", len(results))
	}
	got := best(results, 2)
	if len(got) != 2 || got[0].GetMemory().GetId() != "d" || got[1].GetMemory().GetId() != "a" {
		t.Fatalf("order: %v, %v", got[0].GetMemory().GetId(), got[1].GetMemory().GetId())
	}
	if r := got[0].GetScore().GetReason(); !strings.Contains(r, "text #1 + vector #1") || !strings.Contains(r, "used 3× (+20%)") {
		t.Errorf("reason %q", r)
	}
	if r := got[1].GetScore().GetReason(); !strings.Contains(r, "vector #1 only (alpha 1.00)") || !strings.Contains(r, "half-life 7d") {
		t.Errorf("reason %q", r)
	}
}
