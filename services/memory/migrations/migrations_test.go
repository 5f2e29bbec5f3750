package migrations_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/db/dbtest"

	"github.com/thefold/thefold/services/memory/migrations"
)

// upTo is the migrations numbered at most n (file names start with the number).
func upTo(t *testing.T, n string) fs.FS {
	t.Helper()
	out := fstest.MapFS{}
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if name[:5] <= n {
			b, err := fs.ReadFile(migrations.FS, name)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = &fstest.MapFile{Data: b}
		}
	}
	return out
}

// Vectors stored as "local" before the ai service named its embedder's versions are
// version 1 after the migration, and the HNSW index of ('local', 384) gives way to one of
// ('local@1', 384) under the name the store looks for; other models are left alone.
func TestLocalBecomesLocalAtVersion1(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := dbtest.NewEmptyDatabase(t)
	if err := db.EnsureExtension(ctx, url, "vector"); err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx, url, "memory", upTo(t, "00004")); err != nil {
		t.Fatal(err)
	}
	pool, err := db.Open(ctx, url, "memory", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	vec := "[" + strings.TrimSuffix(strings.Repeat("0.1,", 384), ",") + "]"
	for _, q := range []string{
		`INSERT INTO memories (owner_id, memory_type, content, content_hash, trust_level, embedding, embedding_model, embedding_dims, search)
			VALUES ('alice', 'general', 'a', 'h1', 'user', '` + vec + `', 'local', 384, ''), ('alice', 'general', 'b', 'h2', 'user', '[1,0]', 'text-embedding-3-small', 2, '')`,
		`INSERT INTO code_patterns (owner_id, problem, solution, content_hash, embedding, embedding_model, embedding_dims, search)
			VALUES ('alice', 'p', 's', 'h3', '` + vec + `', 'local', 384, '')`,
		// What store.EnsureIndex made for ('local', 384): 9c436708 is FNV-1a 32 of "local".
		`CREATE INDEX memories_hnsw_9c436708_384 ON memories USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE embedding_model = 'local' AND embedding_dims = 384`,
		`CREATE INDEX code_patterns_hnsw_9c436708_384 ON code_patterns USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE embedding_model = 'local' AND embedding_dims = 384`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Migrate(ctx, url, "memory", migrations.FS); err != nil {
		t.Fatal(err)
	}
	var models []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(m ORDER BY m) FROM (SELECT embedding_model AS m FROM memories
		UNION ALL SELECT embedding_model FROM code_patterns) x`).Scan(&models); err != nil {
		t.Fatal(err)
	}
	if want := []string{"local@1", "local@1", "text-embedding-3-small"}; strings.Join(models, ",") != strings.Join(want, ",") {
		t.Errorf("models after the migration %v, want %v", models, want)
	}
	var indexes []string
	if err := pool.QueryRow(ctx, `SELECT array_agg(indexname ORDER BY indexname) FROM pg_indexes
		WHERE schemaname = 'memory' AND indexname LIKE '%hnsw%'`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if want := "code_patterns_hnsw_c66dc74b_384,memories_hnsw_c66dc74b_384"; strings.Join(indexes, ",") != want {
		t.Errorf("HNSW indexes after the migration %v, want %s", indexes, want)
	}
}
