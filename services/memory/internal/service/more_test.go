package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/memory/internal/service"
)

// Consolidate merges near-duplicates into the most valuable one (keeping provenance, tags
// and counts), retires expired and low-value memories, reports it all, and finds nothing
// more on a second run; a dry run changes nothing.
func TestConsolidate(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	st := func(content string, tags []string, importance float64) *memoryv1.Memory {
		return e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: content, Repo: "local/c", Type: typev1.MemoryType_MEMORY_TYPE_ERROR_PATTERN,
			Tags: tags, Importance: &importance})
	}
	keep := st("The sandbox build fails when GOFLAGS sets -mod=vendor; unset GOFLAGS in the sandbox.", []string{"go"}, 0.9)
	dup1 := st("The sandbox build fails when GOFLAGS sets -mod=vendor: unset GOFLAGS in the sandbox!", []string{"sandbox"}, 0.5)
	dup2 := st("the sandbox build fails when GOFLAGS sets -mod=vendor; unset GOFLAGS in the sandbox", nil, 0.4)
	other := st("Flaky watcher test: wait for LISTEN before writing events.", nil, 0.5)
	stale := st("Someone said the staging database is slow on Mondays.", nil, 0.1)
	expiring := e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: "temporary note", Repo: "local/c", Type: typev1.MemoryType_MEMORY_TYPE_ERROR_PATTERN})
	if _, err := e.pool.Exec(t.Context(), `UPDATE memories SET create_time = now() - interval '400 days', update_time = now() - interval '400 days' WHERE id = $1`, stale.GetId()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(t.Context(), `UPDATE memories SET expire_time = now() - interval '1 minute' WHERE id = $1`, expiring.GetId()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.MarkMemoriesUsed(e.alice, &memoryv1.MarkMemoriesUsedRequest{Ids: []string{dup1.GetId()}}); err != nil {
		t.Fatal(err)
	}

	dry, err := e.client.Consolidate(e.alice, &memoryv1.ConsolidateRequest{Repo: "local/c", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.GetMergedCount() != 1 || dry.GetRemovedCount() != 2 || dry.GetRetiredCount() != 1 || dry.GetExpiredCount() != 1 {
		t.Fatalf("dry run %v", dry)
	}
	if st, _ := e.client.GetStats(e.alice, &memoryv1.GetStatsRequest{Repo: "local/c"}); st.GetTotal() != 5 {
		t.Fatalf("a dry run changed something: %v", st)
	}
	resp, err := e.client.Consolidate(e.alice, &memoryv1.ConsolidateRequest{Repo: "local/c"})
	if err != nil {
		t.Fatal(err)
	}
	g := resp.GetGroups()
	if len(g) != 1 || g[0].GetKeptId() != keep.GetId() || !sameSet(g[0].GetRemovedIds(), []string{dup1.GetId(), dup2.GetId()}) ||
		resp.GetRetiredCount() != 1 || resp.GetExpiredCount() != 1 {
		t.Fatalf("consolidate %v", resp)
	}
	kept, err := e.client.GetMemory(e.alice, &memoryv1.GetMemoryRequest{Id: keep.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	k := kept.GetMemory()
	if !sameSet(k.GetMergedFrom(), []string{dup1.GetId(), dup2.GetId()}) || !sameSet(k.GetTags(), []string{"go", "sandbox"}) || k.GetUseCount() != 1 {
		t.Fatalf("kept %v", k)
	}
	for _, id := range []string{dup1.GetId(), dup2.GetId(), stale.GetId()} {
		_, err := e.client.GetMemory(e.alice, &memoryv1.GetMemoryRequest{Id: id})
		wantCode(t, err, codes.NotFound, "")
	}
	if _, err := e.client.GetMemory(e.alice, &memoryv1.GetMemoryRequest{Id: other.GetId()}); err != nil {
		t.Fatalf("an unrelated memory went: %v", err)
	}
	again, err := e.client.Consolidate(e.alice, &memoryv1.ConsolidateRequest{Repo: "local/c"})
	if err != nil || again.GetMergedCount()+again.GetRetiredCount()+again.GetExpiredCount() != 0 {
		t.Fatalf("second run %v %v", again, err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Code patterns: stored once, found by a similar problem, weighted by confidence, reuse
// counted.
func TestCodePatterns(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	conf := 0.9
	req := &memoryv1.StoreCodePatternRequest{Problem: "pgx pool exhausted under concurrent Watch streams",
		Solution: "Share one LISTEN connection through an events hub and read through the pool.", Language: "Go", Repo: "local/demo",
		FilePaths: []string{"pkg/events/hub.go"}, Tags: []string{"db"}, Confidence: &conf, RequestId: "p-1"}
	first, err := e.client.StoreCodePattern(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.GetPattern().GetLanguage() != "go" || first.GetPattern().GetContentHash() == "" {
		t.Fatalf("pattern %v", first)
	}
	again, err := e.client.StoreCodePattern(e.alice, req)
	if err != nil || !again.GetDeduplicated() || again.GetPattern().GetId() != first.GetPattern().GetId() {
		t.Fatalf("again %v %v", again, err)
	}
	if _, err := e.client.StoreCodePattern(e.alice, &memoryv1.StoreCodePatternRequest{Problem: "CSS buttons use hex colours", Solution: "Use the colour tokens."}); err != nil {
		t.Fatal(err)
	}
	res, err := e.client.SearchCodePatterns(e.alice, &memoryv1.SearchCodePatternsRequest{Query: "connection pool exhausted by watch streams", Language: "go"})
	if err != nil || len(res.GetResults()) != 1 || res.GetResults()[0].GetPattern().GetId() != first.GetPattern().GetId() || res.GetResults()[0].GetPattern().GetReuseCount() != 1 {
		t.Fatalf("search %v %v", res, err)
	}
	if st, err := e.client.GetStats(e.alice, &memoryv1.GetStatsRequest{}); err != nil || st.GetCodePatternCount() != 2 {
		t.Fatalf("stats %v %v", st, err)
	}
}

// Every RPC answers malformed input with INVALID_ARGUMENT naming the field, and a caller
// without a token with UNAUTHENTICATED.
func TestEveryRPCRefusesMalformedInput(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	c := e.client
	m := e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: "x"})
	huge := strings.Repeat("a", 32001)
	cases := []struct {
		rpc, field string
		call       func(ctx context.Context) error
	}{
		{"StoreMemory", "content", func(ctx context.Context) error {
			_, err := c.StoreMemory(ctx, &memoryv1.StoreMemoryRequest{Content: " \x07 "})
			return err
		}},
		{"StoreMemory", "content", func(ctx context.Context) error {
			_, err := c.StoreMemory(ctx, &memoryv1.StoreMemoryRequest{Content: huge})
			return err
		}},
		{"StoreMemory", "type", func(ctx context.Context) error {
			_, err := c.StoreMemory(ctx, &memoryv1.StoreMemoryRequest{Content: "x", Type: 99})
			return err
		}},
		{"StoreMemory", "importance", func(ctx context.Context) error {
			v := 2.0
			_, err := c.StoreMemory(ctx, &memoryv1.StoreMemoryRequest{Content: "x", Importance: &v})
			return err
		}},
		{"GetMemory", "id", func(ctx context.Context) error {
			_, err := c.GetMemory(ctx, &memoryv1.GetMemoryRequest{Id: "nope"})
			return err
		}},
		{"ListMemories", "page_token", func(ctx context.Context) error {
			_, err := c.ListMemories(ctx, &memoryv1.ListMemoriesRequest{PageToken: "zz"})
			return err
		}},
		{"ListMemories", "types[0]", func(ctx context.Context) error {
			_, err := c.ListMemories(ctx, &memoryv1.ListMemoriesRequest{Types: []typev1.MemoryType{42}})
			return err
		}},
		{"SearchMemories", "query", func(ctx context.Context) error {
			_, err := c.SearchMemories(ctx, &memoryv1.SearchMemoriesRequest{})
			return err
		}},
		{"SearchMemories", "vector_weight", func(ctx context.Context) error {
			w := 0.5
			_, err := c.SearchMemories(ctx, &memoryv1.SearchMemoriesRequest{Query: "q", VectorWeight: &w, Fusion: memoryv1.MemoryFusion_MEMORY_FUSION_RRF})
			return err
		}},
		{"SearchMemories", "limit", func(ctx context.Context) error {
			_, err := c.SearchMemories(ctx, &memoryv1.SearchMemoriesRequest{Query: "q", Limit: 51})
			return err
		}},
		{"DeleteMemory", "id", func(ctx context.Context) error {
			_, err := c.DeleteMemory(ctx, &memoryv1.DeleteMemoryRequest{})
			return err
		}},
		{"Consolidate", "similarity_threshold", func(ctx context.Context) error {
			_, err := c.Consolidate(ctx, &memoryv1.ConsolidateRequest{SimilarityThreshold: 0.1})
			return err
		}},
		{"StoreCodePattern", "solution", func(ctx context.Context) error {
			_, err := c.StoreCodePattern(ctx, &memoryv1.StoreCodePatternRequest{Problem: "p"})
			return err
		}},
		{"StoreCodePattern", "file_paths[0]", func(ctx context.Context) error {
			_, err := c.StoreCodePattern(ctx, &memoryv1.StoreCodePatternRequest{Problem: "p", Solution: "s", FilePaths: []string{"../x"}})
			return err
		}},
		{"SearchCodePatterns", "query", func(ctx context.Context) error {
			_, err := c.SearchCodePatterns(ctx, &memoryv1.SearchCodePatternsRequest{})
			return err
		}},
		{"GetStats", "repo", func(ctx context.Context) error {
			_, err := c.GetStats(ctx, &memoryv1.GetStatsRequest{Repo: "bad repo"})
			return err
		}},
		{"UpdateMemory", "update_mask", func(ctx context.Context) error {
			_, err := c.UpdateMemory(ctx, &memoryv1.UpdateMemoryRequest{Id: m.GetId(), Memory: &memoryv1.Memory{}})
			return err
		}},
		{"UpdateMemory", "update_mask", func(ctx context.Context) error {
			_, err := c.UpdateMemory(ctx, &memoryv1.UpdateMemoryRequest{Id: m.GetId(), Memory: &memoryv1.Memory{},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"content_hash"}}})
			return err
		}},
		{"UpdateMemory", "memory.trust_level", func(ctx context.Context) error {
			_, err := c.UpdateMemory(ctx, &memoryv1.UpdateMemoryRequest{Id: m.GetId(), Memory: &memoryv1.Memory{TrustLevel: 7},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"trust_level"}}})
			return err
		}},
		{"PromoteMemory", "id", func(ctx context.Context) error {
			_, err := c.PromoteMemory(ctx, &memoryv1.PromoteMemoryRequest{})
			return err
		}},
		{"PromoteMemory", "id", func(ctx context.Context) error {
			_, err := c.PromoteMemory(ctx, &memoryv1.PromoteMemoryRequest{Id: "strategy-1"})
			return err
		}},
		{"MarkMemoriesUsed", "ids", func(ctx context.Context) error {
			_, err := c.MarkMemoriesUsed(ctx, &memoryv1.MarkMemoriesUsedRequest{})
			return err
		}},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.rpc] = true
		t.Run(tc.rpc+"/"+tc.field, func(t *testing.T) {
			wantCode(t, tc.call(e.alice), codes.InvalidArgument, tc.field)
			wantCode(t, tc.call(e.anon), codes.Unauthenticated, "")
		})
	}
	for _, md := range memoryv1.MemoryService_ServiceDesc.Methods {
		if !seen[md.MethodName] {
			t.Errorf("%s has no malformed-input case", md.MethodName)
		}
	}
}
