package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/errs"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/memory/migrations"
)

// heldFixture stores owner's memories of every kind the filters tell apart: two
// repositories, three types (one of them strategy), three trust levels, tag sets, three
// categories, importances, and some expired; their text is real prose.
func heldFixture(t *testing.T, s *Store, owner string, n int, rng *rand.Rand) []string {
	t.Helper()
	types := []typev1.MemoryType{typev1.MemoryType_MEMORY_TYPE_GENERAL, typev1.MemoryType_MEMORY_TYPE_DECISION, typev1.MemoryType_MEMORY_TYPE_STRATEGY}
	trusts := []memoryv1.MemoryTrustLevel{memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER, memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_AGENT, memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_SYSTEM}
	tagSets := [][]string{nil, {"go"}, {"go", "db"}, {"ops"}, {"db", "ops", "go"}}
	categories := []string{"", "arch", "bug"}
	var ids []string
	for i, p := range paragraphs(t, n) {
		m := &memoryv1.Memory{OwnerId: owner, Repo: []string{"acme/api", "acme/web"}[i%2], Type: types[i%3], TrustLevel: trusts[(i/3)%3],
			Tags: tagSets[i%5], Category: categories[(i/2)%3], Importance: float64(i%10) / 10, Content: p, ContentHash: contentHash(p)}
		if i%11 == 0 || i%7 == 0 {
			m.ExpireTime = timestamppb.New(time.Now().Add(time.Hour))
		}
		row, _, err := s.Insert(context.Background(), NewMemory{Memory: m, Vector: Vector{Model: "test@1", Values: scanVector(rng)}, SearchText: p})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, row.GetId())
	}
	// Every eleventh expired an hour ago (a memory cannot be stored expired).
	var expired []string
	for i := 0; i < len(ids); i += 11 {
		expired = append(expired, ids[i])
	}
	if _, err := s.pool.Exec(context.Background(), `UPDATE memories SET expire_time = now() - interval '1 hour' WHERE id = ANY($1::uuid[])`, expired); err != nil {
		t.Fatal(err)
	}
	return ids
}

// contentHash is content_hash as the service stores it.
func contentHash(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// sameCandidates fails the test unless q, filtered and scored by what the process holds,
// finds what it finds with PostgreSQL applying the filters and reading the scores' columns
// (TextInDB), candidate for candidate: ids, ranks, scores and the scored fields.
func sameCandidates(t *testing.T, s *Store, what string, q SearchQuery) []*Candidate {
	t.Helper()
	ctx := context.Background()
	got, err := s.Search(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	db := q
	db.TextInDB = true
	want, err := s.Search(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(cs []*Candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, fmt.Sprintf("%s v%d t%d", c.GetId(), c.VectorRank, c.TextRank))
		}
		return out
	}
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("%s: held filters found %v, PostgreSQL's %v", what, ids(got), ids(want))
	}
	for i, c := range got {
		w := want[i]
		if math.Abs(c.Vector-w.Vector) > 1e-6 || math.Abs(c.Text-w.Text) > 1e-6 {
			t.Errorf("%s: %s scores %v/%v held, %v/%v from PostgreSQL", what, c.GetId(), c.Vector, c.Text, w.Vector, w.Text)
		}
		if !proto.Equal(c.Memory, w.Memory) || c.HashOK != w.HashOK {
			t.Errorf("%s: %s is scored by %v held, %v from PostgreSQL", what, c.GetId(), c.Memory, w.Memory)
		}
	}
	return got
}

// The in-process rankings filter and score by what the process holds exactly as PostgreSQL
// does, for every filter, and follow every change another replica makes to what they
// filter and score by: trust, tags, category, importance, expiry, uses and merges.
func TestHeldFiltersAndScoresAreTheDatabases(t *testing.T) {
	t.Parallel()
	_, writer, reader, rng := replicas(t, 21)
	ids := heldFixture(t, writer, "alice", 150, rng)
	heldFixture(t, writer, "bob", 5, rng) // not alice's
	ctx := context.Background()
	if err := reader.LoadScan(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	user, agent := memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER, memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_AGENT
	filters := []struct {
		name string
		f    Filter
	}{
		{"any repository", Filter{AnyRepo: true}},
		{"acme/web", Filter{Repo: "acme/web"}},
		{"decisions and strategies", Filter{AnyRepo: true, Types: []typev1.MemoryType{typev1.MemoryType_MEMORY_TYPE_DECISION, typev1.MemoryType_MEMORY_TYPE_STRATEGY}}},
		{"trusted by a person", Filter{AnyRepo: true, Trust: []memoryv1.MemoryTrustLevel{user}}},
		{"strategies a person promoted", Filter{AnyRepo: true, StrategyTrust: []memoryv1.MemoryTrustLevel{user}}},
		{"tagged go and db", Filter{AnyRepo: true, Tags: []string{"db", "go"}}},
		{"architecture", Filter{Repo: "acme/api", Categories: []string{"arch"}}},
		{"everything at once", Filter{Repo: "acme/api", Types: []typev1.MemoryType{typev1.MemoryType_MEMORY_TYPE_GENERAL, typev1.MemoryType_MEMORY_TYPE_STRATEGY},
			Trust: []memoryv1.MemoryTrustLevel{user, agent}, StrategyTrust: []memoryv1.MemoryTrustLevel{user}, Tags: []string{"go"}, Categories: []string{"", "bug"}}},
	}
	query := func(f Filter, words string) SearchQuery {
		return SearchQuery{Owner: "alice", Filter: f, Vector: Vector{Model: "test@1", Values: scanVector(rng)}, Words: words, K: 8, TextPool: 100_000}
	}
	checkAll := func(what string) {
		t.Helper()
		for _, f := range filters {
			for _, words := range []string{"package provides functions for formatted input and output", "error returned when the reader reaches end of file"} {
				sameCandidates(t, reader, what+", "+f.name+", "+words, query(f.f, words))
			}
		}
	}
	checkAll("loaded")
	// The fixture's expired memories are never candidates.
	for _, c := range sameCandidates(t, reader, "expired", query(Filter{AnyRepo: true}, "package provides")) {
		if i := slices.Index(ids, c.GetId()); i%11 == 0 {
			t.Fatalf("memory %d expired an hour ago and is a candidate", i)
		}
	}
	// found says whether q finds id by either ranking (a ranking of every memory: k is the
	// set's size).
	found := func(what string, f Filter, words, id string) bool {
		t.Helper()
		q := query(f, words)
		q.K = len(ids)
		return slices.ContainsFunc(sameCandidates(t, reader, what, q), func(c *Candidate) bool { return c.GetId() == id })
	}

	// Each change by the other replica, seen at once by what the filters and scores read.
	target := ids[1] // acme/web, decision, user, tags go
	tags, category, importance := []string{"ops", "rare"}, "rare-category", 0.95
	if _, err := writer.Update(ctx, "alice", target, Update{Tags: &tags, Category: &category, Importance: &importance}); err != nil {
		t.Fatal(err)
	}
	if !found("new tags", Filter{AnyRepo: true, Tags: []string{"rare"}, Categories: []string{"rare-category"}}, "package", target) {
		t.Fatal("the memory's new tag and category do not find it")
	}
	lowered := agent
	if _, err := writer.Update(ctx, "alice", target, Update{Trust: &lowered}); err != nil {
		t.Fatal(err)
	}
	if found("lowered trust", Filter{AnyRepo: true, Trust: []memoryv1.MemoryTrustLevel{user}}, "package", target) {
		t.Fatal("a memory lowered to AGENT is found among USER's")
	}
	if _, err := writer.Promote(ctx, "alice", false, target, "carol"); err != nil {
		t.Fatal(err)
	}
	if !found("promoted", Filter{AnyRepo: true, Trust: []memoryv1.MemoryTrustLevel{user}}, "package", target) {
		t.Fatal("a promoted memory is not found among USER's")
	}
	if _, err := writer.MarkUsed(ctx, "alice", ids[:40], ""); err != nil {
		t.Fatal(err)
	}
	past := new(time.Time)
	*past = time.Now().Add(-time.Minute)
	// (The update's answer is the memory read again: expired, it is not found.)
	if _, err := writer.Update(ctx, "alice", ids[2], Update{ExpireTime: &past}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("expiring a memory: %v, want its reading not found", err)
	}
	if found("expired", Filter{AnyRepo: true}, "package provides functions", ids[2]) {
		t.Fatal("a memory expired by the other replica is still a candidate")
	}
	if _, err := writer.ApplyConsolidation(ctx, Scope{Owner: "alice", Repo: "acme/api"}, []Merge{{Keep: ids[4], Remove: []string{ids[6]}}}, nil); err != nil {
		t.Fatal(err)
	}
	checkAll("after the changes")
}

// Changes of an owner's memories by many writers at once (uses of overlapping sets, in
// opposite orders, updates, promotions, deletes, merges) all succeed: each takes the owner's
// version row before the memories' rows (lockOwner), so none waits for a row while holding
// the version row another is waiting for (a deadlock, which PostgreSQL ends by failing one).
func TestConcurrentChangesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, DBOptions()...)
	s := New(pool)
	rng := rand.New(rand.NewPCG(31, 32))
	ids := heldFixture(t, s, "alice", 40, rng)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE memories SET expire_time = NULL`); err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(ids)
	slices.Reverse(reversed)
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := range 6 {
		wg.Go(func() {
			for i := range 15 {
				var err error
				switch (w + i) % 5 {
				case 0:
					_, err = s.MarkUsed(ctx, "alice", ids, "")
				case 1:
					_, err = s.MarkUsed(ctx, "alice", reversed, "")
				case 2:
					imp := float64(i) / 20
					_, err = s.Update(ctx, "alice", ids[(w*7+i)%40], Update{Importance: &imp})
				case 3:
					_, err = s.Promote(ctx, "alice", false, reversed[(w*5+i)%40], "carol")
				case 4:
					tags := []string{fmt.Sprint("t", i)}
					_, err = s.Update(ctx, "alice", ids[(w+i*3)%40], Update{Tags: &tags})
				}
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a change failed: %v", err)
	}
}

// A version read ahead of a search (CheckVersion, while the service embeds the query) is
// the owner's when it was read: the search applies every change committed before, by
// another replica too; a check of another owner's version is not taken for this one's.
func TestVersionReadAheadSeesEarlierChanges(t *testing.T) {
	t.Parallel()
	pool, writer, reader, rng := replicas(t, 41)
	for i := range 20 {
		insertScanMemory(t, writer, "alice", "acme/api", i, scanVector(rng))
	}
	insertScanMemory(t, writer, "bob", "acme/api", 99, scanVector(rng))
	ctx := context.Background()
	if err := reader.LoadScan(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, check := range []string{"alice", "bob"} {
		v := scanVector(rng)
		id := insertScanMemory(t, writer, "alice", "acme/api", 100, v)
		q := SearchQuery{Owner: "alice", Filter: Filter{AnyRepo: true}, Version: reader.CheckVersion(ctx, check), Vector: Vector{Model: "test@1", Values: v}, K: 1}
		if got := vectorIDs(t, reader, q); !slices.Equal(got, []string{id}) {
			t.Fatalf("with %s's version read ahead: found %v, want the memory stored before, %s", check, got, id)
		}
		if err := writer.Delete(ctx, "alice", id); err != nil {
			t.Fatal(err)
		}
	}
	if New(pool).CheckVersion(ctx, "alice") != nil {
		t.Fatal("a store without the scan reads a version it has no use for")
	}
}

// An update by a session whose search_path does not name the service's schema (an
// operator's psql) takes the owner's next version too: the version trigger's function runs
// with the schema's path (migration 00009), and a replica holding the owner sees the change.
func TestUpdateFromAnotherSearchPathIsFollowed(t *testing.T) {
	t.Parallel()
	pool, writer, reader, rng := replicas(t, 51)
	ids := heldFixture(t, writer, "alice", 12, rng)
	ctx := context.Background()
	if err := reader.LoadScan(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET search_path TO public"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "RESET search_path") //nolint:errcheck // the pool's connection, back to its own path
	if _, err := conn.Exec(ctx, "UPDATE memory.memories SET tags = '{operator}' WHERE id = $1", ids[1]); err != nil {
		t.Fatalf("an update outside the schema's search_path: %v", err)
	}
	q := SearchQuery{Owner: "alice", Filter: Filter{AnyRepo: true, Tags: []string{"operator"}}, Vector: Vector{Model: "test@1", Values: scanVector(rng)}, Words: "package", K: 5, TextPool: 100_000}
	got := sameCandidates(t, reader, "the operator's tag", q)
	if len(got) != 1 || got[0].GetId() != ids[1] {
		t.Fatalf("the operator's tag finds %v, want %s alone", got, ids[1])
	}
}

// A switch of the memories' embedding model beside a change of one memory does not
// deadlock: the change holds its owner's version row (lockOwner) and then needs the table,
// which the switch locks; the switch takes every owner's version row before the table, so
// it waits for the change instead of holding the table while waiting for that row.
func TestSwitchBesideAChangeDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, DBOptions()...)
	s := New(pool)
	rng := rand.New(rand.NewPCG(51, 52))
	var ids []string
	for i := range 10 {
		ids = append(ids, insertScanMemory(t, s, []string{"alice", "bob"}[i%2], "acme/api", i, scanVector(rng)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := make([]Vector, len(ids))
	for i := range next {
		next[i] = Vector{Model: "test@2", Values: scanVector(rng)}
	}
	if err := s.SaveNext(ctx, "memories", ids, next); err != nil {
		t.Fatal(err)
	}

	// A change of alice's first memory, as Update makes it: her version row first.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := lockOwner(ctx, tx, "alice"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		switched bool
		err      error
	}
	done := make(chan result, 1)
	go func() {
		switched, err := s.Switch(ctx, "memories", Pair{"test@2", scanDims})
		done <- result{switched, err}
	}()
	// Until the switch waits for a lock (alice's version row, or, before the fix, the same
	// row from inside its update while it holds the table).
	for {
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the switch did not wait for the change: %+v", r)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE memories SET importance = 0.9 WHERE id = $1`, ids[0]); err != nil {
		t.Fatalf("the change beside the switch: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the change beside the switch: %v", err)
	}
	r := <-done
	if r.err != nil || !r.switched {
		t.Fatalf("the switch beside the change: switched %v, %v", r.switched, r.err)
	}
}
