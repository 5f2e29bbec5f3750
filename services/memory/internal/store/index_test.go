package store

import "testing"

// Migration 00005 names the HNSW indexes of the built-in embedder's version 1 itself:
// its names must be the ones EnsureIndex looks for.
func TestIndexNameOfLocalVersion1(t *testing.T) {
	for _, c := range []struct{ table, want string }{
		{"memories", "memories_hnsw_c66dc74b_384"},
		{"code_patterns", "code_patterns_hnsw_c66dc74b_384"},
	} {
		if got := indexName(c.table, "local@1", 384); got != c.want {
			t.Errorf("indexName(%s, local@1, 384) = %s, want %s", c.table, got, c.want)
		}
	}
}
