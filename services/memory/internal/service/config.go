package service

import (
	"errors"
	"fmt"
	"slices"
	"time"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/memory/internal/store"
)

// Config is the memory service's own configuration, beside platform.Config.
type Config struct {
	// HybridAlpha is the weight of vector similarity in the ALPHA fusion (the rest is
	// full-text rank).
	HybridAlpha float64 `env:"THEFOLD_MEMORY_HYBRID_ALPHA, default=0.4"`
	// Fusion is the default fusion: alpha or rrf.
	Fusion string `env:"THEFOLD_MEMORY_FUSION, default=alpha"`
	// Candidates is how many memories each ranking (vector, full text) contributes before
	// fusion.
	Candidates int `env:"THEFOLD_MEMORY_CANDIDATES, default=40"`
	// TextPool bounds how many memories the full-text ranking scores in one search. In
	// this process (the in-process vector ranking's owners, store/textscan.go) the query's
	// rarest words pick at most half of it, unless even all its words ANDed match more; in
	// PostgreSQL (THEFOLD_MEMORY_VECTOR_RANKING=hnsw) its rarest words pick them by the
	// planner's statistics (store.termStats.match). Either way a query of common words
	// does not rank every memory holding one of them.
	TextPool int `env:"THEFOLD_MEMORY_TEXT_POOL, default=1000"`
	// EfSearch is how many candidates the vector ranking's HNSW walk keeps (pgvector's
	// hnsw.ef_search, at least Candidates): more finds more of the true nearest memories and
	// takes longer. The default keeps recall@10 against exact search at 0.95 or more on the
	// latency benchmark's 100k memories (make bench); at 10k, 40 already does.
	EfSearch int `env:"THEFOLD_MEMORY_EF_SEARCH, default=160"`
	// VectorRanking is how memories are ranked by vector: "scan" holds each owner's
	// vectors in this process (about 1.6 KB per memory of 384 dimensions, loaded on the
	// owner's first search) and scans them, following every replica's changes through
	// PostgreSQL; "hnsw" walks pgvector's HNSW index in PostgreSQL. The scan is faster at
	// the same recall (docs/benchmarks.md); searches walk while an owner's vectors load,
	// and an owner not searched for 30 minutes is dropped from memory.
	VectorRanking string `env:"THEFOLD_MEMORY_VECTOR_RANKING, default=scan"`
	// ScanPool is how many of an owner's memories the scan's bit comparison passes to the
	// exact re-rank: more finds more of the true nearest and takes longer (1,000 gives
	// recall@10 0.965 at 100k memories).
	ScanPool int `env:"THEFOLD_MEMORY_SCAN_POOL, default=1000"`
	// EmbedModel is the embedding model asked of ai.Embed ("" = ai's default, the local
	// embedder when no provider is set up). When what ai answers for it (model, version and
	// size) is not what the stored vectors have, they are re-embedded in the background
	// (THEFOLD_MEMORY_REEMBED) while searches go on with the old model.
	EmbedModel string `env:"THEFOLD_MEMORY_EMBED_MODEL"`
	// Reembed is "on" to re-embed the stored memories and code patterns when the embedding
	// model changes (searches switch to the new model once every row has its vector), or
	// "off" to keep the model the stored vectors have, for searches and for new rows (a
	// warning says so).
	Reembed string `env:"THEFOLD_MEMORY_REEMBED, default=on"`
	// ReembedBatch is how many texts one ai.Embed call of the re-embedding carries.
	ReembedBatch int `env:"THEFOLD_MEMORY_REEMBED_BATCH, default=64"`
	// ReembedInterval is how often the service checks that the stored vectors are of the
	// configured model (at once, too, when a call finds that the model changed), and retries
	// a re-embedding that failed.
	ReembedInterval time.Duration `env:"THEFOLD_MEMORY_REEMBED_INTERVAL, default=1m"`
	// ReembedIndexMemory is the maintenance_work_mem the re-embedding job builds HNSW
	// indexes with, the new model's after the switch among them (PostgreSQL's default, 64MB,
	// does not hold the graph of 100k vectors, and the build then takes several times
	// longer, while searches of the new model scan).
	ReembedIndexMemory string `env:"THEFOLD_MEMORY_REEMBED_INDEX_MEMORY, default=512MB"`
	// HalfLives overrides the half-life of memory types (e.g. "session:12h,decision:4320h").
	HalfLives map[string]time.Duration `env:"THEFOLD_MEMORY_HALF_LIVES"`
	// MaxContent bounds a memory's content in characters.
	MaxContent int `env:"THEFOLD_MEMORY_MAX_CONTENT, default=32000"`
	// ConsolidateInterval is how often every owner's memories are consolidated (near
	// duplicates merged, expired and low-value ones retired); 0 turns the job off.
	ConsolidateInterval time.Duration `env:"THEFOLD_MEMORY_CONSOLIDATE_INTERVAL, default=24h"`
	// MinStrategyTrust is the least trust (agent < system < user) at which SearchMemories
	// returns a strategy memory, the agent's planning hints: by default an AGENT strategy is
	// no hint until a person promotes it. "agent" turns the threshold off.
	MinStrategyTrust string `env:"THEFOLD_MEMORY_MIN_STRATEGY_TRUST, default=system"`
}

// DefaultHalfLives is how fast each type of memory fades: session notes in a day,
// decisions and strategies in half a year.
var DefaultHalfLives = map[typev1.MemoryType]time.Duration{
	typev1.MemoryType_MEMORY_TYPE_SESSION:       24 * time.Hour,
	typev1.MemoryType_MEMORY_TYPE_TASK:          14 * 24 * time.Hour,
	typev1.MemoryType_MEMORY_TYPE_GENERAL:       30 * 24 * time.Hour,
	typev1.MemoryType_MEMORY_TYPE_ERROR_PATTERN: 60 * 24 * time.Hour,
	typev1.MemoryType_MEMORY_TYPE_CODE_PATTERN:  90 * 24 * time.Hour,
	typev1.MemoryType_MEMORY_TYPE_SKILL:         180 * 24 * time.Hour,
	typev1.MemoryType_MEMORY_TYPE_DECISION:      180 * 24 * time.Hour,
	typev1.MemoryType_MEMORY_TYPE_STRATEGY:      180 * 24 * time.Hour,
}

// Validate collects every problem.
func (c *Config) Validate() error {
	var problems []error
	if c.HybridAlpha < 0 || c.HybridAlpha > 1 {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_HYBRID_ALPHA: %v: want 0 to 1", c.HybridAlpha))
	}
	if !slices.Contains([]string{"alpha", "rrf"}, c.Fusion) {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_FUSION: %q: want alpha or rrf", c.Fusion))
	}
	if c.Candidates < 10 || c.Candidates > 1000 {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_CANDIDATES: %d: want 10 to 1000", c.Candidates))
	}
	if c.EfSearch < 1 || c.EfSearch > 1000 {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_EF_SEARCH: %d: want 1 to 1000", c.EfSearch))
	}
	if c.VectorRanking != "scan" && c.VectorRanking != "hnsw" {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_VECTOR_RANKING: %q: want scan or hnsw", c.VectorRanking))
	}
	if c.VectorRanking == "scan" && (c.ScanPool < 10 || c.ScanPool > 1_000_000) {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_SCAN_POOL: %d: want 10 to 1000000", c.ScanPool))
	}
	if c.TextPool < 100 || c.TextPool > 1_000_000 {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_TEXT_POOL: %d: want 100 to 1000000", c.TextPool))
	}
	if c.EmbedModel != "" {
		if err := store.CheckModel(c.EmbedModel); err != nil {
			problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_EMBED_MODEL: %w", err))
		}
	}
	for name, d := range c.HalfLives {
		if parseTypeName(name) == typev1.MemoryType_MEMORY_TYPE_UNSPECIFIED || d <= 0 {
			problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_HALF_LIVES: %s:%s: want a memory type (session, decision, …) and a positive duration", name, d))
		}
	}
	if c.Reembed != "on" && c.Reembed != "off" {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_REEMBED: %q: want on or off", c.Reembed))
	}
	if c.ReembedBatch < 1 || c.ReembedBatch > 2048 {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_REEMBED_BATCH: %d: want 1 to 2048", c.ReembedBatch))
	}
	if c.ReembedInterval <= 0 {
		problems = append(problems, errors.New("THEFOLD_MEMORY_REEMBED_INTERVAL: must be positive"))
	}
	if err := store.CheckIndexMemory(c.ReembedIndexMemory); err != nil {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_REEMBED_INDEX_MEMORY: %w", err))
	}
	if c.ConsolidateInterval < 0 {
		problems = append(problems, errors.New("THEFOLD_MEMORY_CONSOLIDATE_INTERVAL: must not be negative"))
	}
	if _, ok := trustByName[c.MinStrategyTrust]; !ok {
		problems = append(problems, fmt.Errorf("THEFOLD_MEMORY_MIN_STRATEGY_TRUST: %q: want agent, system or user", c.MinStrategyTrust))
	}
	if c.MaxContent < 100 {
		problems = append(problems, errors.New("THEFOLD_MEMORY_MAX_CONTENT: want at least 100"))
	}
	return errors.Join(problems...)
}

func parseTypeName(name string) typev1.MemoryType {
	for t := range DefaultHalfLives {
		if store.TypeName(t) == name {
			return t
		}
	}
	return typev1.MemoryType_MEMORY_TYPE_UNSPECIFIED
}

// reembed reports whether stored vectors are re-embedded for a new model (a Config not
// from config.Load, in tests, re-embeds as the default does).
func (c *Config) reembed() bool { return c.Reembed != "off" }

// reembedBatch is ReembedBatch, or the default for a Config not from config.Load.
func (c *Config) reembedBatch() int {
	if c.ReembedBatch <= 0 {
		return 64
	}
	return c.ReembedBatch
}

// indexMemory is ReembedIndexMemory, or the default for a Config not from config.Load.
func (c *Config) indexMemory() string {
	if c.ReembedIndexMemory == "" {
		return "512MB"
	}
	return c.ReembedIndexMemory
}

// halfLife is a type's half-life under this configuration.
func (c *Config) halfLife(t typev1.MemoryType) time.Duration {
	if d, ok := c.HalfLives[store.TypeName(t)]; ok {
		return d
	}
	if d, ok := DefaultHalfLives[t]; ok {
		return d
	}
	return 30 * 24 * time.Hour
}

// trustByName are the trust levels by their configuration names.
var trustByName = map[string]memoryv1.MemoryTrustLevel{
	"agent":  memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_AGENT,
	"system": memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_SYSTEM,
	"user":   memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER,
}

// trustRank orders trust levels by how far they are trusted (the enum's numbers do not):
// AGENT 1, SYSTEM 2, USER 3; 0 for UNSPECIFIED.
func trustRank(t memoryv1.MemoryTrustLevel) int {
	switch t {
	case memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_AGENT:
		return 1
	case memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_SYSTEM:
		return 2
	case memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER:
		return 3
	}
	return 0
}

// strategyTrust is the trust levels at which a strategy memory is recalled.
func (c *Config) strategyTrust() []memoryv1.MemoryTrustLevel {
	least, ok := trustByName[c.MinStrategyTrust]
	if !ok { // a Config not from config.Load (tests): the default
		least = memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_SYSTEM
	}
	var out []memoryv1.MemoryTrustLevel
	for _, t := range trustByName {
		if trustRank(t) >= trustRank(least) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}
