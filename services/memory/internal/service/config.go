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
	// TextPool bounds how many memories the full-text ranking scores in one search: the
	// query's rarest words pick them (store.termStats.match), so a query of common words
	// costs no more than this many ranks.
	TextPool int `env:"THEFOLD_MEMORY_TEXT_POOL, default=1000"`
	// EmbedModel is the embedding model asked of ai.Embed ("" = ai's default, the local
	// embedder when no provider is set up).
	EmbedModel string `env:"THEFOLD_MEMORY_EMBED_MODEL"`
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
