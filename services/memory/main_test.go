package main

import (
	"context"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/config"

	"github.com/thefold/thefold/services/memory/internal/service"
)

// The memory service's configuration: the defaults are valid, and every bad setting is named.
func TestConfig(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string // in the error; none: valid
	}{
		{"defaults", nil, nil},
		{"rrf with half-lives", map[string]string{"THEFOLD_MEMORY_FUSION": "rrf", "THEFOLD_MEMORY_HALF_LIVES": "session:12h,decision:4320h"}, nil},
		{"every problem at once", map[string]string{"THEFOLD_MEMORY_HYBRID_ALPHA": "1.5", "THEFOLD_MEMORY_FUSION": "max",
			"THEFOLD_MEMORY_CANDIDATES": "1", "THEFOLD_MEMORY_HALF_LIVES": "diary:1h", "THEFOLD_MEMORY_EMBED_MODEL": "a b",
			"THEFOLD_MEMORY_MIN_STRATEGY_TRUST": "USER"},
			[]string{"THEFOLD_MEMORY_HYBRID_ALPHA", "THEFOLD_MEMORY_FUSION", "THEFOLD_MEMORY_CANDIDATES", "diary", "THEFOLD_MEMORY_EMBED_MODEL",
				"THEFOLD_MEMORY_MIN_STRATEGY_TRUST"}},
		{"re-embedding off, in batches of 16", map[string]string{"THEFOLD_MEMORY_REEMBED": "off", "THEFOLD_MEMORY_REEMBED_BATCH": "16"}, nil},
		{"re-embedding settings out of range", map[string]string{"THEFOLD_MEMORY_REEMBED": "later", "THEFOLD_MEMORY_REEMBED_BATCH": "0",
			"THEFOLD_MEMORY_REEMBED_INTERVAL": "0s", "THEFOLD_MEMORY_REEMBED_INDEX_MEMORY": "lots"},
			[]string{"THEFOLD_MEMORY_REEMBED:", "THEFOLD_MEMORY_REEMBED_BATCH", "THEFOLD_MEMORY_REEMBED_INTERVAL", "THEFOLD_MEMORY_REEMBED_INDEX_MEMORY"}},
		{"strategy hints need a person", map[string]string{"THEFOLD_MEMORY_MIN_STRATEGY_TRUST": "user"}, nil},
		{"a wider HNSW walk", map[string]string{"THEFOLD_MEMORY_EF_SEARCH": "400"}, nil},
		{"an HNSW walk out of range", map[string]string{"THEFOLD_MEMORY_EF_SEARCH": "0"}, []string{"THEFOLD_MEMORY_EF_SEARCH"}},
		{"an HNSW walk beyond pgvector's", map[string]string{"THEFOLD_MEMORY_EF_SEARCH": "1001"}, []string{"THEFOLD_MEMORY_EF_SEARCH"}},
		{"the HNSW walk instead of the scan", map[string]string{"THEFOLD_MEMORY_VECTOR_RANKING": "hnsw"}, nil},
		{"an unknown vector ranking", map[string]string{"THEFOLD_MEMORY_VECTOR_RANKING": "ivfflat"}, []string{"THEFOLD_MEMORY_VECTOR_RANKING"}},
		{"a wider scan", map[string]string{"THEFOLD_MEMORY_SCAN_POOL": "4000"}, nil},
		{"a scan pool out of range", map[string]string{"THEFOLD_MEMORY_SCAN_POOL": "5"}, []string{"THEFOLD_MEMORY_SCAN_POOL"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cfg service.Config
			err := config.Load(context.Background(), &cfg, config.Map(tc.env, nil))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if tc.env == nil && (cfg.HybridAlpha != 0.4 || cfg.Fusion != "alpha" || cfg.MinStrategyTrust != "system") {
					t.Fatalf("defaults: %+v", cfg)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %v", tc.env)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}
