package service_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"

	"github.com/thefold/thefold/services/memory/internal/service"
	"github.com/thefold/thefold/services/memory/internal/store"
)

// reembedConfig re-embeds in batches of 4, so a handful of rows takes several batches.
func reembedConfig(model string) service.Config {
	return service.Config{HybridAlpha: 0.4, Fusion: "alpha", Candidates: 40, TextPool: 1000, MaxContent: 32000,
		EmbedModel: model, ReembedBatch: 4}
}

// topics are memories about unrelated things, each found by its query.
var topics = []struct{ content, query string }{
	{"The connection pool of the billing service times out after 30 seconds under load.", "billing connection pool timeout"},
	{"Webhook deliveries from the forge are duplicated when the relay restarts.", "duplicate webhook deliveries"},
	{"The sandbox image build needs the Go toolchain copied into the root filesystem.", "sandbox image Go toolchain"},
	{"JWT verification rejects tokens signed by a rotated key until the cache refreshes.", "rotated signing key JWT"},
	{"The diff renderer drops the last hunk of files without a trailing newline.", "diff renderer trailing newline"},
	{"Rate limits are counted per API key, not per user, in the gateway.", "gateway rate limit per API key"},
	{"Leader election uses a PostgreSQL advisory lock held on a dedicated session.", "leader election advisory lock"},
	{"The CSV exporter writes dates in the server's time zone instead of UTC.", "CSV export time zone"},
	{"Flaky test TestWatchResume fails when the listener closes before the cursor is saved.", "flaky TestWatchResume listener"},
	{"Prometheus exporter labels must not include the task id: the cardinality explodes.", "prometheus label cardinality"},
	{"Pagination cursors encode create time and id; the last page was lost on equal times.", "pagination cursor lost page"},
	{"Retry loops back off exponentially with jitter, capped at thirty seconds.", "retry backoff jitter"},
	{"OAuth callback fails behind the proxy unless the forwarded host header is trusted.", "OAuth callback proxy host"},
}

// pairs is the distinct "model/size" of table's vectors.
func pairs(t *testing.T, e *env, table string) []string {
	t.Helper()
	var out []string
	if err := e.pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(DISTINCT embedding_model || '/' || embedding_dims), '{}') FROM `+table).Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// count is a count(*) query's answer.
func count(t *testing.T, e *env, q string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// findTop searches as alice and fails unless want is the best result; it returns the
// model the query was embedded with.
func findTop(t *testing.T, e *env, query, want string) string {
	t.Helper()
	resp, err := e.client.SearchMemories(e.alice, &memoryv1.SearchMemoriesRequest{Query: query, Repo: "acme/api"})
	if err != nil {
		t.Fatalf("search %q: %v", query, err)
	}
	if len(resp.GetResults()) == 0 || resp.GetResults()[0].GetMemory().GetId() != want {
		t.Fatalf("search %q: want %s first, got %v", query, want, resp.GetResults())
	}
	if resp.GetResults()[0].GetScore().GetVector() <= 0 {
		t.Fatalf("search %q: found by text alone (vector score 0) with %s", query, resp.GetEmbeddingModel())
	}
	return resp.GetEmbeddingModel()
}

func stats(t *testing.T, e *env) *memoryv1.GetStatsResponse {
	t.Helper()
	st, err := e.client.GetStats(e.alice, &memoryv1.GetStatsRequest{Repo: "acme/api"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func embStatus(s *memoryv1.EmbeddingStatus) string {
	return fmt.Sprintf("%s/%d → %s/%d %d/%d", s.GetActiveModel(), s.GetActiveDimensions(), s.GetTargetModel(), s.GetTargetDimensions(),
		s.GetReembedded(), s.GetTotal())
}

// A new version of the built-in embedder: searches keep finding the stored memories with
// the old version while the job re-embeds them; a job stopped half-way and started again
// (another process) continues without embedding a finished row again; memories stored
// meanwhile are found before and after; then searches — also of the replica that did not
// switch — use the new version, and the old vectors and their index are gone.
func TestReembedForNewLocalVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := reembedConfig("")
	e := start(t, cfg)
	ids := make([]string, len(topics))
	for i, tp := range topics {
		ids[i] = e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: tp.content, Repo: "acme/api"}).GetId()
	}
	for _, p := range []string{"Share one LISTEN connection through an events hub.", "Close rows before returning the connection."} {
		if _, err := e.client.StoreCodePattern(e.alice, &memoryv1.StoreCodePatternRequest{Problem: p, Solution: "Fixed: " + p, Repo: "acme/api"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.srv.Reembed(ctx); err != nil {
		t.Fatal(err)
	}
	if got := embStatus(stats(t, e).GetMemoryEmbedding()); got != "local@1/384 → local@1/384 13/13" {
		t.Fatalf("embedding status before the new version: %s", got)
	}

	// The ai service ships local@2: "local" now means it.
	e.ai.current.Store(2)
	if m := findTop(t, e, topics[0].query, ids[0]); m != "local@1" {
		t.Fatalf("search during the re-embedding used %s, want the stored vectors' local@1", m)
	}
	mid := e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: "Stored while re-embedding: the outbox relay skips events of aborted transactions.", Repo: "acme/api"})
	if mid.GetEmbeddingModel() != "local@1" {
		t.Fatalf("a memory stored during the re-embedding has %s, want local@1 (what searches use)", mid.GetEmbeddingModel())
	}
	if got := embStatus(stats(t, e).GetMemoryEmbedding()); got != "local@1/384 → local@2/384 1/14" {
		t.Fatalf("embedding status before the job: %s", got)
	}

	// The job stops after two batches (the embedder goes down).
	e.ai.failAfter.Store(e.ai.calls.Load() + 2)
	if err := e.srv.Reembed(ctx); err == nil {
		t.Fatal("Reembed with the embedder down: no error")
	}
	e.ai.failAfter.Store(0)
	if n := count(t, e, "SELECT count(*) FROM memory_next_embeddings WHERE model = 'local@2'"); n != 1+2*4 {
		t.Fatalf("%d memories have a local@2 vector after two batches of 4 and one stored, want 9", n)
	}
	if got := embStatus(stats(t, e).GetMemoryEmbedding()); got != "local@1/384 → local@2/384 9/14" {
		t.Fatalf("embedding status half-way: %s", got)
	}
	findTop(t, e, "outbox relay aborted transactions", mid.GetId())
	if m := findTop(t, e, topics[12].query, ids[12]); m != "local@1" {
		t.Fatalf("search half-way used %s", m)
	}

	// Started again: another process on the same database.
	e2 := startOn(t, e.pool, cfg)
	e2.ai.current.Store(2)
	if err := e2.srv.Reembed(ctx); err != nil {
		t.Fatal(err)
	}
	// One text asking which model ai embeds with, the 5 memories not done, the 2 patterns.
	if n := e2.ai.texts.Load(); n != 1+5+2 {
		t.Fatalf("the restarted job embedded %d texts, want 8 (nothing done before again)", n)
	}
	if got, want := pairs(t, e, "memories"), []string{"local@2/384"}; !slices.Equal(got, want) {
		t.Fatalf("memories' vectors after the switch: %v, want %v", got, want)
	}
	if got, want := pairs(t, e, "code_patterns"), []string{"local@2/384"}; !slices.Equal(got, want) {
		t.Fatalf("code patterns' vectors after the switch: %v, want %v", got, want)
	}
	if n := count(t, e, "SELECT (SELECT count(*) FROM memory_next_embeddings) + (SELECT count(*) FROM code_pattern_next_embeddings)"); n != 0 {
		t.Fatalf("%d vectors left in the side tables", n)
	}
	var indexes []string
	if err := e.pool.QueryRow(ctx, `SELECT array_agg(indexdef ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'memory' AND indexname LIKE '%hnsw%'`).Scan(&indexes); err != nil {
		t.Fatal(err)
	}
	if len(indexes) != 2 || !strings.Contains(indexes[0], "'local@2'") || !strings.Contains(indexes[1], "'local@2'") {
		t.Fatalf("HNSW indexes after the switch: %v, want one of local@2 per table", indexes)
	}

	// Both replicas search with local@2 now; e had not seen the switch.
	for _, r := range []*env{e, e2} {
		for i, tp := range topics {
			if m := findTop(t, r, tp.query, ids[i]); m != "local@2" {
				t.Fatalf("search after the switch used %s, want local@2", m)
			}
		}
		findTop(t, r, "outbox relay aborted transactions", mid.GetId())
		pr, err := r.client.SearchCodePatterns(r.alice, &memoryv1.SearchCodePatternsRequest{Query: "LISTEN connection events hub"})
		if err != nil || len(pr.GetResults()) == 0 || !strings.Contains(pr.GetResults()[0].GetPattern().GetProblem(), "LISTEN") ||
			pr.GetResults()[0].GetPattern().GetEmbeddingModel() != "local@2" {
			t.Fatalf("code pattern search after the switch: %v %v", pr.GetResults(), err)
		}
	}
	st := stats(t, e2)
	if got := embStatus(st.GetMemoryEmbedding()); got != "local@2/384 → local@2/384 14/14" {
		t.Fatalf("embedding status after the switch: %s", got)
	}
	if got := embStatus(st.GetCodePatternEmbedding()); got != "local@2/384 → local@2/384 2/2" {
		t.Fatalf("code patterns' embedding status after the switch: %s", got)
	}
	if st.GetByEmbeddingModel()["local@2"] != 14 || len(st.GetByEmbeddingModel()) != 1 {
		t.Fatalf("by embedding model after the switch: %v", st.GetByEmbeddingModel())
	}
	// A memory stored now has the new model only; malformed input is still refused.
	late := e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: "Stored after the switch: the token counter double-counts cached prompts.", Repo: "acme/api"})
	if late.GetEmbeddingModel() != "local@2" {
		t.Fatalf("a memory stored after the switch has %s", late.GetEmbeddingModel())
	}
	findTop(t, e2, "token counter cached prompts", late.GetId())
	_, err := e.client.SearchMemories(e.alice, &memoryv1.SearchMemoriesRequest{Query: " \x07 "})
	wantCode(t, err, codes.InvalidArgument, "query")
	_, err = e.client.GetStats(e.alice, &memoryv1.GetStatsRequest{Repo: "bad repo"})
	wantCode(t, err, codes.InvalidArgument, "repo")
}

// Another size of the same model is another pair: configured "local-256" over memories of
// 384 dimensions, a replica searches at 384 until the switch and at 256 after it; updated
// content during the re-embedding gets a vector of both sizes.
func TestReembedForAnotherSize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := start(t, reembedConfig(""))
	ids := make([]string, 6)
	for i, tp := range topics[:6] {
		ids[i] = e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: tp.content, Repo: "acme/api"}).GetId()
	}
	small := startOn(t, e.pool, reembedConfig("local-256"))
	findTop(t, small, topics[1].query, ids[1])
	if got := embStatus(stats(t, small).GetMemoryEmbedding()); got != "local@1/384 → local@1/256 0/6" {
		t.Fatalf("embedding status: %s", got)
	}
	// New content while re-embedding: both sizes, the side row replaced.
	if _, err := small.client.UpdateMemory(small.alice, &memoryv1.UpdateMemoryRequest{Id: ids[2],
		Memory:     &memoryv1.Memory{Content: "The sandbox image bundles busybox and a copy of the Go toolchain."},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"content"}}}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e, "SELECT count(*) FROM memory_next_embeddings WHERE dims = 256"); n != 1 {
		t.Fatalf("%d side vectors after an update, want 1", n)
	}
	if err := small.srv.Reembed(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := pairs(t, e, "memories"), []string{"local@1/256"}; !slices.Equal(got, want) {
		t.Fatalf("vectors after the switch: %v, want %v", got, want)
	}
	// The search (the configured model's vector, then the stored vectors' model's), the
	// update (both), and the 5 memories with no 256-dimension vector yet: no probe (the
	// search told which model ai embeds with) and the updated memory not again.
	if n := small.ai.texts.Load(); n != 2+2+5 {
		t.Fatalf("embedded %d texts, want 9", n)
	}
	findTop(t, small, "busybox Go toolchain", ids[2])
	if got := embStatus(stats(t, small).GetMemoryEmbedding()); got != "local@1/256 → local@1/256 6/6" {
		t.Fatalf("embedding status after the switch: %s", got)
	}
}

// THEFOLD_MEMORY_REEMBED=off keeps the stored vectors' model for searches and new rows and
// re-embeds nothing.
func TestReembedOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := reembedConfig("")
	cfg.Reembed = "off"
	e := start(t, cfg)
	first := e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: topics[3].content, Repo: "acme/api"})
	e.ai.current.Store(2)
	second := e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: topics[4].content, Repo: "acme/api"})
	if err := e.srv.Reembed(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := pairs(t, e, "memories"), []string{"local@1/384"}; !slices.Equal(got, want) || second.GetEmbeddingModel() != "local@1" {
		t.Fatalf("vectors with re-embedding off: %v (stored meanwhile: %s), want %v", got, second.GetEmbeddingModel(), want)
	}
	if n := count(t, e, "SELECT count(*) FROM memory_next_embeddings"); n != 0 {
		t.Fatalf("%d side vectors with re-embedding off", n)
	}
	findTop(t, e, topics[3].query, first.GetId())
	if m := findTop(t, e, topics[4].query, second.GetId()); m != "local@1" {
		t.Fatalf("search with re-embedding off used %s", m)
	}
	st := stats(t, e).GetMemoryEmbedding()
	if got := embStatus(st); got != "local@1/384 → local@2/384 0/2" || st.GetReembedEnabled() {
		t.Fatalf("embedding status with re-embedding off: %s, enabled %v", got, st.GetReembedEnabled())
	}
}

// One replica re-embeds at a time: while another holds the re-embedding lock, a pass does
// nothing (and says no error); once it is free, the pass does the work.
func TestReembedOneRunnerAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := start(t, reembedConfig(""))
	m := e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: topics[5].content, Repo: "acme/api"})
	e.ai.current.Store(2)
	findTop(t, e, topics[5].query, m.GetId())
	unlock, ok, err := store.New(e.pool).TryLock(ctx, "thefold.memory.reembed")
	if err != nil || !ok {
		t.Fatalf("taking the lock as another replica: %v %v", ok, err)
	}
	if err := e.srv.Reembed(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e, "SELECT count(*) FROM memory_next_embeddings"); n != 0 || !slices.Equal(pairs(t, e, "memories"), []string{"local@1/384"}) {
		t.Fatalf("a pass re-embedded while another replica held the lock (%d side vectors, %v)", n, pairs(t, e, "memories"))
	}
	unlock()
	if err := e.srv.Reembed(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pairs(t, e, "memories"); !slices.Equal(got, []string{"local@2/384"}) {
		t.Fatalf("vectors after the lock was free: %v", got)
	}
}

// The running job (RunReembed) starts at once when a call finds that ai embeds with a new
// model, without waiting for its interval, and stops when its context ends.
func TestRunReembedStartsWhenTheModelChanges(t *testing.T) {
	t.Parallel()
	e := start(t, reembedConfig(""))
	m := e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: topics[6].content, Repo: "acme/api"})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- e.srv.RunReembed(ctx, time.Hour) }()
	defer func() {
		cancel()
		select {
		case err := <-stopped:
			if err != nil {
				t.Errorf("RunReembed: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("RunReembed did not stop when its context ended")
		}
	}()
	e.ai.current.Store(2)
	findTop(t, e, topics[6].query, m.GetId()) // sees local@2
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Equal(pairs(t, e, "memories"), []string{"local@2/384"}) {
		if time.Now().After(deadline) {
			t.Fatalf("not re-embedded 20 s after a search found the new model (interval 1h): %v", pairs(t, e, "memories"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := findTop(t, e, topics[6].query, m.GetId()); got != "local@2" {
		t.Fatalf("search after the job used %s", got)
	}
}
