package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db/dbtest"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/memory/migrations"
)

const scanDims = 16

func scanVector(rng *rand.Rand) []float32 {
	v := make([]float32, scanDims)
	for j := range v {
		v[j] = float32(rng.NormFloat64())
	}
	return v
}

// insertScanMemory stores owner's memory with vector v in repo, and returns its id.
func insertScanMemory(t *testing.T, s *Store, owner, repo string, i int, v []float32) string {
	t.Helper()
	m := &memoryv1.Memory{OwnerId: owner, Repo: repo, Type: typev1.MemoryType_MEMORY_TYPE_GENERAL,
		Content: fmt.Sprint("memory ", i), ContentHash: fmt.Sprint("hash ", i), TrustLevel: memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER, Importance: 0.5}
	row, _, err := s.Insert(context.Background(), NewMemory{Memory: m, Vector: Vector{Model: "test@1", Values: v}, SearchText: m.Content})
	if err != nil {
		t.Fatal(err)
	}
	return row.GetId()
}

// scanStore is a store with the scan on (a pool larger than the tests' sets: exact), on a
// database of its own, and a random source seeded with seed.
func scanStore(t *testing.T, seed uint64) (*Store, *rand.Rand) {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, DBOptions()...)
	s := New(pool)
	s.EnableScan(1000)
	return s, rand.New(rand.NewPCG(seed, seed+1))
}

// replicas is two stores on a database of their own, as two replicas of the service see
// it: writer, and reader with the scan on (a pool larger than the tests' sets: exact); and
// a random source seeded with seed.
func replicas(t *testing.T, seed uint64) (*pgxpool.Pool, *Store, *Store, *rand.Rand) {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, DBOptions()...)
	writer, reader := New(pool), New(pool)
	reader.EnableScan(1000)
	return pool, writer, reader, rand.New(rand.NewPCG(seed, seed+1))
}

// vectorIDs is the ids the vector ranking found, nearest first.
func vectorIDs(t *testing.T, s *Store, q SearchQuery) []string {
	t.Helper()
	got, err := s.Search(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range got {
		if c.VectorRank > 0 {
			ids = append(ids, c.GetId())
		}
	}
	return ids
}

// The in-process vector ranking answers what exact search does, and sees at once what
// another replica (another Store on the same database) stores, re-embeds and deletes.
func TestScanFollowsEveryReplicasChanges(t *testing.T) {
	t.Parallel()
	pool, writer, reader, rng := replicas(t, 1)
	var ids []string
	for i := range 60 {
		ids = append(ids, insertScanMemory(t, writer, "alice", "acme/api", i, scanVector(rng)))
	}
	insertScanMemory(t, writer, "bob", "acme/api", 100, scanVector(rng)) // not alice's
	ctx := context.Background()
	if err := reader.LoadScan(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	check := func(what string, v []float32, k int) []string {
		t.Helper()
		q := SearchQuery{Owner: "alice", Filter: Filter{AnyRepo: true}, Vector: Vector{Model: "test@1", Values: v}, K: k}
		exact := q
		exact.Exact = true
		got, want := vectorIDs(t, reader, q), vectorIDs(t, writer, exact)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: the scan found %v, exact search %v", what, got, want)
		}
		return got
	}
	for range 5 {
		check("loaded", scanVector(rng), 10)
	}

	// Stored by the other replica: found by its own vector.
	v := scanVector(rng)
	id := insertScanMemory(t, writer, "alice", "acme/api", 200, v)
	if got := check("after a store", v, 3); got[0] != id {
		t.Fatalf("the new memory %s is not the nearest to its own vector: %v", id, got)
	}
	// Re-embedded by the other replica: found by its new vector.
	moved := scanVector(rng)
	if _, err := pool.Exec(ctx, `UPDATE memories SET embedding = $1::real[]::vector WHERE id = $2`, moved, ids[7]); err != nil {
		t.Fatal(err)
	}
	if got := check("after a re-embedding", moved, 3); got[0] != ids[7] {
		t.Fatalf("the re-embedded memory %s is not the nearest to its new vector: %v", ids[7], got)
	}
	// Deleted by the other replica: gone.
	if err := writer.Delete(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	if got := check("after a delete", v, 3); slices.Contains(got, id) {
		t.Fatalf("the deleted memory %s is still found: %v", id, got)
	}

	// A delete whose tombstone was pruned before the reader caught up: the reader reads
	// everything again rather than keep the deleted memory.
	var gone []float32
	if err := pool.QueryRow(ctx, `SELECT embedding::real[] FROM memories WHERE id = $1`, ids[3]).Scan(&gone); err != nil {
		t.Fatal(err)
	}
	if err := writer.Delete(ctx, "alice", ids[3]); err != nil {
		t.Fatal(err)
	}
	if n, err := writer.PruneTombstones(ctx, time.Now().Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("PruneTombstones = %d, %v; want the 2 tombstones", n, err)
	}
	if got := check("after a pruned delete", gone, 3); slices.Contains(got, ids[3]) {
		t.Fatalf("the deleted memory %s is still found: %v", ids[3], got)
	}

	// What the reader holds is what was committed, version by version.
	var version int64
	if err := pool.QueryRow(ctx, ownerVersion, "alice").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if ov := reader.scan.owners["alice"]; ov.version != version || ov.sets[Pair{"test@1", scanDims}].Len() != 59 {
		t.Fatalf("the reader holds version %d with %d vectors; the database is at %d with 59", ov.version, ov.sets[Pair{"test@1", scanDims}].Len(), version)
	}
}

// A filter that leaves fewer than k of the scan's nearest makes the search walk the index,
// which continues until k rows pass: the result is the filtered exact one.
func TestScanWithASelectiveFilterWalksInstead(t *testing.T) {
	t.Parallel()
	s, rng := scanStore(t, 3)
	for i := range 80 {
		repo := "acme/api"
		if i%20 == 0 {
			repo = "acme/rare" // 4 of 80
		}
		insertScanMemory(t, s, "alice", repo, i, scanVector(rng))
	}
	if err := s.LoadScan(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	q := SearchQuery{Owner: "alice", Filter: Filter{Repo: "acme/rare"}, Vector: Vector{Model: "test@1", Values: scanVector(rng)}, K: 4}
	exact := q
	exact.Exact = true
	got, want := vectorIDs(t, s, q), vectorIDs(t, s, exact)
	if len(got) != 4 || !slices.Equal(got, want) {
		t.Fatalf("filtered search found %v, exact %v", got, want)
	}
}

// An owner's first search starts the load in the background and walks the index; once the
// load is done, searches scan.
func TestScanLoadsInTheBackground(t *testing.T) {
	t.Parallel()
	s, rng := scanStore(t, 5)
	for i := range 20 {
		insertScanMemory(t, s, "alice", "acme/api", i, scanVector(rng))
	}
	q := SearchQuery{Owner: "alice", Filter: Filter{AnyRepo: true}, Vector: Vector{Model: "test@1", Values: scanVector(rng)}, K: 5}
	first := vectorIDs(t, s, q)
	if len(first) != 5 {
		t.Fatalf("the first search (walking the index) found %v", first)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.scan.mu.Lock()
		ov := s.scan.owners["alice"]
		s.scan.mu.Unlock()
		ov.mu.Lock()
		loaded := ov.loaded
		ov.mu.Unlock()
		if loaded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the owner's vectors were never loaded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	v, err := s.scanned(context.Background(), "alice", Pair{"test@1", scanDims}, nil)
	if err != nil || v == nil || v.set.Len() != 20 || v.text.Len() != 20 {
		t.Fatalf("after the load: scanned = %v (%v)", v, err)
	}
	if got := vectorIDs(t, s, q); !slices.Equal(got, first) {
		t.Fatalf("the scan found %v, the walk %v", got, first)
	}
	// A model this owner has no vector of: nothing to find, and no walk.
	if v, err := s.scanned(context.Background(), "alice", Pair{"other@1", 4}, nil); err != nil || v == nil || v.set.Len() != 0 {
		t.Fatalf("another pair: %v, %v; want an empty set", v, err)
	}
}

// The text ranking's hits get their vector score from the scan's vectors (their embeddings
// are not read): the same score PostgreSQL computes for them.
func TestScanScoresTheTextHitsVectors(t *testing.T) {
	t.Parallel()
	s, rng := scanStore(t, 7)
	// All near one direction, so every similarity is positive (a negative one scores 0).
	near := func() []float32 {
		v := scanVector(rng)
		for j := range v {
			v[j] = v[j]/4 + 1
		}
		return v
	}
	for i := range 30 {
		insertScanMemory(t, s, "alice", "acme/api", i, near())
	}
	if err := s.LoadScan(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	plain := New(s.pool)
	q := SearchQuery{Owner: "alice", Filter: Filter{AnyRepo: true}, Vector: Vector{Model: "test@1", Values: near()}, Words: "memory", K: 3}
	type scored struct {
		vector   float64
		textOnly bool
	}
	score := func(st *Store) map[string]scored {
		got, err := st.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]scored{}
		for _, c := range got {
			out[c.GetId()] = scored{c.Vector, c.VectorRank == 0}
		}
		return out
	}
	scanned, sql := score(s), score(plain)
	textOnly := 0
	for id, want := range sql {
		got, ok := scanned[id]
		if !ok || got.vector < want.vector-1e-5 || got.vector > want.vector+1e-5 {
			t.Errorf("memory %s: vector score %v with the scan (found: %v), %v by PostgreSQL", id, got.vector, ok, want.vector)
		}
		if want.textOnly {
			textOnly++
			if want.vector <= 0 {
				t.Errorf("memory %s: a text hit's vector score is %v, want it positive", id, want.vector)
			}
		}
	}
	if textOnly == 0 {
		t.Fatalf("no hit of the text ranking alone among %d candidates", len(sql))
	}
}
