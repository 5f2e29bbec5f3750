package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db/dbtest"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/memory/migrations"
)

// Migration 00005 names the (full-precision) HNSW indexes of the built-in embedder's
// version 1 itself: its names must be the ones walkHalf and BuildIndexes look for as the
// legacy index of the pair; the half-precision index has its own name.
func TestIndexNameOfLocalVersion1(t *testing.T) {
	for _, c := range []struct{ table, want string }{
		{"memories", "memories_hnsw_c66dc74b_384"},
		{"code_patterns", "code_patterns_hnsw_c66dc74b_384"},
	} {
		if got := legacyIndexName(c.table, "local@1", 384); got != c.want {
			t.Errorf("legacyIndexName(%s, local@1, 384) = %s, want %s", c.table, got, c.want)
		}
		if got := indexName(c.table, "local@1", 384); got != c.want+"_h" {
			t.Errorf("indexName(%s, local@1, 384) = %s, want %s", c.table, got, c.want+"_h")
		}
	}
}

// breakIndex leaves the HNSW index of model/dims on memories invalid the way a failed
// concurrent build does: it drops the index and builds it again while one of the pair's
// rows has a vector of another size, which fails the build after the index is in the
// catalog. The row gets its vector back.
func breakIndex(t *testing.T, pool *pgxpool.Pool, model string, dims int) {
	t.Helper()
	ctx := context.Background()
	var id, vec string
	if err := pool.QueryRow(ctx, `SELECT id::text, embedding::text FROM memories WHERE embedding_model = $1 AND embedding_dims = $2 LIMIT 1`,
		model, dims).Scan(&id, &vec); err != nil {
		t.Fatal(err)
	}
	name := indexName("memories", model, dims)
	for _, q := range []string{`DROP INDEX IF EXISTS ` + name, `UPDATE memories SET embedding = '[1,2]' WHERE id = '` + id + `'`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, createIndexSQL("memories", Pair{model, dims})); err == nil {
		t.Fatal("the concurrent build over a vector of the wrong size did not fail")
	}
	if _, err := pool.Exec(ctx, `UPDATE memories SET embedding = $1::vector WHERE id = $2`, vec, id); err != nil {
		t.Fatal(err)
	}
}

// EnsureIndex does not take an invalid index (a concurrent build failed) for built, and
// leaves it to BuildIndexes, which drops it and builds it again, and then does nothing.
func TestInvalidIndexIsRebuilt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, DBOptions()...)
	s := New(pool)
	insert := func(s *Store, i int) { insertTestMemory(t, s, i) }
	name := indexName("memories", "test@1", 3)
	valid := func() (exists, valid bool) {
		t.Helper()
		err := pool.QueryRow(ctx, `SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1`, name).Scan(&valid)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true, valid
	}
	for i := range 3 {
		insert(s, i) // the first builds the pair's index, concurrently
	}
	if exists, ok := valid(); !exists || !ok || !s.indexed[name] {
		t.Fatalf("index of a new pair: exists %v, valid %v, remembered %v", exists, ok, s.indexed[name])
	}
	breakIndex(t, pool, "test@1", 3)
	if exists, ok := valid(); !exists || ok {
		t.Fatalf("broken index: exists %v, valid %v, want an invalid one", exists, ok)
	}

	// Another process stores a row of the pair: the row is stored, the index not trusted.
	other := New(pool)
	insert(other, 3)
	if other.indexed[name] {
		t.Fatal("EnsureIndex remembered an invalid index as built")
	}
	built, err := other.BuildIndexes(ctx, "memories", "64MB")
	if err != nil {
		t.Fatal(err)
	}
	if exists, ok := valid(); !slices.Equal(built, []string{name}) || !exists || !ok || !other.indexed[name] {
		t.Fatalf("BuildIndexes built %v; index exists %v, valid %v, remembered %v; want %s rebuilt", built, exists, ok, other.indexed[name], name)
	}
	if built, err := other.BuildIndexes(ctx, "memories", "64MB"); err != nil || len(built) != 0 {
		t.Fatalf("BuildIndexes again: built %v, %v; want nothing", built, err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE NOT i.indisvalid`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d invalid indexes left (%v)", n, err)
	}
}

// An installation upgraded from full-precision HNSW indexes (legacyIndexName) keeps walking
// its pair's old index — storing a row does not build the new one in the request — until
// BuildIndexes has built the half-precision index, which then serves, and dropped the old.
func TestLegacyIndexServesUntilRebuilt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, DBOptions()...)
	insert := func(s *Store, i int) { insertTestMemory(t, s, i) }
	half, legacy := indexName("memories", "test@1", 3), legacyIndexName("memories", "test@1", 3)
	exists := func(name string) bool {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = $1`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	walks := func(s *Store) string {
		t.Helper()
		plan, _, _, err := s.Explain(ctx, SearchQuery{Owner: "alice", Filter: Filter{AnyRepo: true}, Vector: Vector{Model: "test@1", Values: []float32{1, 2, 0.5}}, K: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range plan {
			for _, name := range []string{half, legacy} {
				if strings.Contains(l, "Index Scan using "+name+" ") {
					return name
				}
			}
		}
		return "no HNSW index:\n" + strings.Join(plan, "\n")
	}
	// The installation as it was: the pair's rows and its full-precision index.
	insert(New(pool), 0)
	for _, q := range []string{`DROP INDEX ` + half, `CREATE INDEX ` + legacy + ` ON memories USING hnsw ((embedding::vector(3)) vector_cosine_ops)
			WHERE embedding_model = 'test@1' AND embedding_dims = 3`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s := New(pool) // the upgraded service
	insert(s, 1)
	if exists(half) {
		t.Fatal("storing a row built the half-precision index in the request")
	}
	if got := walks(s); got != legacy {
		t.Fatalf("before the rebuild the search walks %s, want %s", got, legacy)
	}
	built, err := s.BuildIndexes(ctx, "memories", "64MB")
	if err != nil || !slices.Equal(built, []string{half}) {
		t.Fatalf("BuildIndexes built %v (%v), want %s", built, err, half)
	}
	if exists(legacy) {
		t.Fatal("the full-precision index is still there after the rebuild")
	}
	for _, st := range []*Store{s, New(pool)} {
		if got := walks(st); got != half {
			t.Fatalf("after the rebuild the search walks %s, want %s", got, half)
		}
	}
}

// A model of more than 2,000 dimensions (a provider's 3,072) is stored and indexed: a
// full-precision HNSW index stops at 2,000 dimensions, and before the half-precision index
// the first memory of such a model failed to store.
func TestLargeModelIsIndexed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, DBOptions()...)
	s := New(pool)
	const dims = 3072
	vec := func(i int) []float32 {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32((i*7+j)%13) - 6
		}
		return v
	}
	var ids []string
	for i := range 3 {
		m := &memoryv1.Memory{OwnerId: "alice", Repo: "acme/api", Type: typev1.MemoryType_MEMORY_TYPE_GENERAL,
			Content: fmt.Sprint("memory ", i), ContentHash: fmt.Sprint("hash ", i), TrustLevel: memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER, Importance: 0.5}
		row, _, err := s.Insert(ctx, NewMemory{Memory: m, Vector: Vector{Model: "provider-large@3", Values: vec(i)}, SearchText: m.Content})
		if err != nil {
			t.Fatalf("storing a %d-dimension memory: %v", dims, err)
		}
		ids = append(ids, row.GetId())
	}
	name := indexName("memories", "provider-large@3", dims)
	if st, err := s.indexState(ctx, name); err != nil || !st.valid {
		t.Fatalf("index %s: %+v, %v; want it valid", name, st, err)
	}
	got, err := s.Search(ctx, SearchQuery{Owner: "alice", Filter: Filter{AnyRepo: true}, Vector: Vector{Model: "provider-large@3", Values: vec(1)}, K: 1})
	if err != nil || len(got) != 1 || got[0].GetId() != ids[1] {
		t.Fatalf("search for the second memory's vector: %v, %v; want %s", got, err, ids[1])
	}
}

// insertTestMemory stores alice's memory number i, with a 3-dimension vector of model test@1.
func insertTestMemory(t *testing.T, s *Store, i int) {
	t.Helper()
	m := &memoryv1.Memory{OwnerId: "alice", Repo: "acme/api", Type: typev1.MemoryType_MEMORY_TYPE_GENERAL,
		Content: fmt.Sprint("memory ", i), ContentHash: fmt.Sprint("hash ", i), TrustLevel: memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER, Importance: 0.5}
	if _, _, err := s.Insert(context.Background(), NewMemory{Memory: m, Vector: Vector{Model: "test@1", Values: []float32{1, float32(i), 0.5}}, SearchText: m.Content}); err != nil {
		t.Fatal(err)
	}
}

// Concurrent first stores of a new model's vectors all ensure its index: none fails, in
// one process (its builds take turns) or across two (a build PostgreSQL ends as a
// deadlock with the other is left to it, or to BuildIndexes), and the index ends valid.
func TestConcurrentEnsureIndexOfANewPair(t *testing.T) {
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, DBOptions()...)
	ctx := context.Background()
	a, b := New(pool), New(pool)
	const model, dims = "test-model@1", 8
	errs := make(chan error, 8)
	for i := range 8 {
		s := a
		if i%4 == 3 {
			s = b // another replica
		}
		go func() { errs <- s.EnsureIndex(ctx, "memories", model, dims) }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("EnsureIndex: %v", err)
		}
	}
	// An index a deadlocked build left invalid is dropped by BuildIndexes, and the pair's
	// next store builds it.
	if _, err := a.BuildIndexes(ctx, "memories", "64MB"); err != nil {
		t.Fatal(err)
	}
	if err := b.EnsureIndex(ctx, "memories", model, dims); err != nil {
		t.Fatal(err)
	}
	st, err := a.indexState(ctx, indexName("memories", model, dims))
	if err != nil || !st.valid {
		t.Fatalf("the index of the new pair: %+v, %v; want it valid", st, err)
	}
}
