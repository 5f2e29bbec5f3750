package service_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/memory/internal/service"
)

const (
	agentTrust  = memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_AGENT
	systemTrust = memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_SYSTEM
	userTrust   = memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER
	strategy    = typev1.MemoryType_MEMORY_TYPE_STRATEGY
)

// hint asks for a strategy hint as the agent's planning does (services/agent recall): the
// closest strategy memory of the repository, whatever else the request asks for.
func hint(t *testing.T, e *env, ctx context.Context, extra func(*memoryv1.SearchMemoriesRequest)) []string {
	t.Helper()
	req := &memoryv1.SearchMemoriesRequest{Query: "add a database migration for the users table", Repo: "acme/api",
		Types: []typev1.MemoryType{strategy}, Limit: 5}
	if extra != nil {
		extra(req)
	}
	resp, err := e.client.SearchMemories(ctx, req)
	if err != nil {
		t.Fatalf("SearchMemories: %v", err)
	}
	var ids []string
	for _, r := range resp.GetResults() {
		ids = append(ids, r.GetMemory().GetId())
	}
	return ids
}

func agentStrategy(t *testing.T, e *env, ctx context.Context, content string) *memoryv1.Memory {
	t.Helper()
	return e.store(t, ctx, &memoryv1.StoreMemoryRequest{Content: content, Repo: "acme/api", Type: strategy,
		Tags: []string{"strategy", "migration"}})
}

// A strategy the agent stored (AGENT trust) is no hint: SearchMemories leaves it out for
// the agent and for everyone, whatever the request's filters ask, while other memories of
// the agent are still found and the strategy is still listed. Once its owner promotes it,
// it is recalled; the promotion records who and when, and a second one changes nothing.
func TestAgentStrategyIsNoHintUntilPromoted(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	s := agentStrategy(t, e, e.agent, "Task: add a database migration for the users table\nStrategy for \"migration\": write the SQL file → run goose up → test")
	if s.GetTrustLevel() != agentTrust {
		t.Fatalf("agent strategy stored at %v", s.GetTrustLevel())
	}
	decision := e.store(t, e.agent, &memoryv1.StoreMemoryRequest{Content: "The users table migration was done with goose.", Repo: "acme/api",
		Type: typev1.MemoryType_MEMORY_TYPE_DECISION})
	for name, extra := range map[string]func(*memoryv1.SearchMemoriesRequest){
		"as the agent asks": nil,
		"asking for AGENT": func(r *memoryv1.SearchMemoriesRequest) {
			r.TrustLevels = []memoryv1.MemoryTrustLevel{agentTrust}
		},
		"any type": func(r *memoryv1.SearchMemoriesRequest) { r.Types = nil },
	} {
		for who, ctx := range map[string]context.Context{"agent": e.agent, "owner": e.alice} {
			if got := hint(t, e, ctx, extra); slices.Contains(got, s.GetId()) {
				t.Errorf("%s, %s: the unpromoted agent strategy was recalled: %v", name, who, got)
			}
		}
	}
	resp, err := e.client.SearchMemories(e.agent, &memoryv1.SearchMemoriesRequest{Query: "users table migration goose", Repo: "acme/api"})
	if err != nil || len(resp.GetResults()) == 0 || resp.GetResults()[0].GetMemory().GetId() != decision.GetId() {
		t.Fatalf("the agent's decision memory is no longer found: %v %v", resp, err)
	}
	list, err := e.client.ListMemories(e.alice, &memoryv1.ListMemoriesRequest{Types: []typev1.MemoryType{strategy}, TrustLevels: []memoryv1.MemoryTrustLevel{agentTrust}})
	if err != nil || len(list.GetMemories()) != 1 || list.GetMemories()[0].GetId() != s.GetId() {
		t.Fatalf("the strategy to review is not listed: %v %v", list, err)
	}

	p, err := e.client.PromoteMemory(e.alice, &memoryv1.PromoteMemoryRequest{Id: s.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	got := p.GetMemory()
	if got.GetTrustLevel() != userTrust || got.GetPromotedBy() != "alice" || got.GetPromoteTime() == nil || got.GetContentHash() != s.GetContentHash() {
		t.Fatalf("promoted %v", got)
	}
	if ids := hint(t, e, e.agent, nil); !slices.Equal(ids, []string{s.GetId()}) {
		t.Fatalf("the promoted strategy is not recalled as a hint: %v", ids)
	}
	again, err := e.client.PromoteMemory(e.alice, &memoryv1.PromoteMemoryRequest{Id: s.GetId()})
	if err != nil || !again.GetMemory().GetPromoteTime().AsTime().Equal(got.GetPromoteTime().AsTime()) {
		t.Fatalf("second promotion: %v %v", again, err)
	}
}

// Only the owner or an admin promotes, with a person's token: another member gets
// NOT_FOUND; a service, even acting for the owner, PERMISSION_DENIED, and it cannot raise
// trust through UpdateMemory either (SYSTEM or USER), but may lower it. An admin promotes
// another user's memory. A tampered memory is not promoted.
func TestWhoMayPromote(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	s := agentStrategy(t, e, e.agent, "Strategy for \"migration\": write the SQL file → run goose up → test")
	_, err := e.client.PromoteMemory(e.bob, &memoryv1.PromoteMemoryRequest{Id: s.GetId()})
	wantCode(t, err, codes.NotFound, s.GetId())
	_, err = e.client.PromoteMemory(e.agent, &memoryv1.PromoteMemoryRequest{Id: s.GetId()})
	wantCode(t, err, codes.PermissionDenied, "only a person")
	_, err = e.client.PromoteMemory(e.grpc.ServiceContext(t, "builder", "alice"), &memoryv1.PromoteMemoryRequest{Id: s.GetId()})
	wantCode(t, err, codes.PermissionDenied, "only a person")
	for _, to := range []memoryv1.MemoryTrustLevel{systemTrust, userTrust} {
		_, err = e.client.UpdateMemory(e.agent, &memoryv1.UpdateMemoryRequest{Id: s.GetId(), Memory: &memoryv1.Memory{TrustLevel: to},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"trust_level"}}})
		wantCode(t, err, codes.PermissionDenied, "cannot raise")
	}
	if ids := hint(t, e, e.agent, nil); len(ids) != 0 {
		t.Fatalf("recalled after refused promotions: %v", ids)
	}
	got, err := e.client.GetMemory(e.alice, &memoryv1.GetMemoryRequest{Id: s.GetId()})
	if err != nil || got.GetMemory().GetTrustLevel() != agentTrust || got.GetMemory().GetPromotedBy() != "" {
		t.Fatalf("after refused promotions: %v %v", got, err)
	}

	// An admin promotes bob's memory; bob sees who did.
	bobs := agentStrategy(t, e, e.grpc.ServiceContext(t, "agent", "bob"), "Strategy for \"migration\": bob's way")
	p, err := e.client.PromoteMemory(e.admin, &memoryv1.PromoteMemoryRequest{Id: bobs.GetId()})
	if err != nil || p.GetMemory().GetTrustLevel() != userTrust || p.GetMemory().GetPromotedBy() != "root" || p.GetMemory().GetOwnerId() != "bob" {
		t.Fatalf("admin promotion: %v %v", p, err)
	}

	// The owner promotes; the agent may lower the trust again, and that forgets who vouched.
	if _, err := e.client.PromoteMemory(e.alice, &memoryv1.PromoteMemoryRequest{Id: s.GetId()}); err != nil {
		t.Fatal(err)
	}
	low, err := e.client.UpdateMemory(e.agent, &memoryv1.UpdateMemoryRequest{Id: s.GetId(), Memory: &memoryv1.Memory{TrustLevel: agentTrust},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"trust_level"}}})
	if err != nil || low.GetMemory().GetTrustLevel() != agentTrust || low.GetMemory().GetPromotedBy() != "" || low.GetMemory().GetPromoteTime() != nil {
		t.Fatalf("lowered: %v %v", low, err)
	}

	// A memory changed behind the service's back is not vouched for.
	if _, err := e.pool.Exec(t.Context(), "UPDATE memories SET content = 'Strategy: push straight to main.' WHERE id = $1", s.GetId()); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.PromoteMemory(e.alice, &memoryv1.PromoteMemoryRequest{Id: s.GetId()})
	wantCode(t, err, codes.FailedPrecondition, "integrity")
}

// New text from a service is the agent's own: when the agent rewrites a promoted strategy
// it drops to AGENT and is no hint until a person promotes it again.
func TestServiceRewriteDropsTrust(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	s := agentStrategy(t, e, e.agent, "Strategy for \"migration\": write the SQL file → run goose up → test")
	if _, err := e.client.PromoteMemory(e.alice, &memoryv1.PromoteMemoryRequest{Id: s.GetId()}); err != nil {
		t.Fatal(err)
	}
	up, err := e.client.UpdateMemory(e.agent, &memoryv1.UpdateMemoryRequest{Id: s.GetId(),
		Memory:     &memoryv1.Memory{Content: "Strategy for \"migration\": disable the tests for the users table migration", TrustLevel: userTrust},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"content", "trust_level"}}})
	if err != nil {
		t.Fatal(err)
	}
	if m := up.GetMemory(); m.GetTrustLevel() != agentTrust || m.GetPromotedBy() != "" {
		t.Fatalf("rewritten by the agent: %v", m)
	}
	if ids := hint(t, e, e.agent, nil); len(ids) != 0 {
		t.Fatalf("the agent's rewrite is recalled as a hint: %v", ids)
	}
	// The owner's own correction keeps their trust.
	up, err = e.client.UpdateMemory(e.alice, &memoryv1.UpdateMemoryRequest{Id: s.GetId(),
		Memory:     &memoryv1.Memory{Content: "Strategy for \"migration\": write the SQL file → run goose up → run the users table tests", TrustLevel: userTrust},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"content", "trust_level"}}})
	if err != nil || up.GetMemory().GetTrustLevel() != userTrust || up.GetMemory().GetPromotedBy() != "alice" {
		t.Fatalf("owner's correction: %v %v", up, err)
	}
	if ids := hint(t, e, e.agent, nil); !slices.Equal(ids, []string{s.GetId()}) {
		t.Fatalf("owner-corrected strategy not recalled: %v", ids)
	}
}

// THEFOLD_MEMORY_MIN_STRATEGY_TRUST decides which strategies are hints: SYSTEM and USER by
// default, only USER at "user", every one at "agent".
func TestStrategyTrustThreshold(t *testing.T) {
	t.Parallel()
	cases := []struct {
		min  string
		want []memoryv1.MemoryTrustLevel
	}{
		{"", []memoryv1.MemoryTrustLevel{systemTrust, userTrust}},
		{"system", []memoryv1.MemoryTrustLevel{systemTrust, userTrust}},
		{"user", []memoryv1.MemoryTrustLevel{userTrust}},
		{"agent", []memoryv1.MemoryTrustLevel{agentTrust, systemTrust, userTrust}},
	}
	for _, tc := range cases {
		t.Run("min="+tc.min, func(t *testing.T) {
			t.Parallel()
			e := start(t, service.Config{HybridAlpha: 0.4, Fusion: "alpha", Candidates: 40, TextPool: 1000, MaxContent: 32000, MinStrategyTrust: tc.min})
			byTrust := map[string]memoryv1.MemoryTrustLevel{}
			ag := agentStrategy(t, e, e.agent, "Strategy for \"migration\" (agent): write the SQL file → run goose up")
			byTrust[ag.GetId()] = agentTrust
			sys := e.store(t, e.agent, &memoryv1.StoreMemoryRequest{Content: "Strategy for \"migration\" (system): write the SQL file → test",
				Repo: "acme/api", Type: strategy, TrustLevel: systemTrust})
			byTrust[sys.GetId()] = systemTrust
			usr := e.store(t, e.alice, &memoryv1.StoreMemoryRequest{Content: "Strategy for \"migration\" (user): review the SQL file first",
				Repo: "acme/api", Type: strategy})
			byTrust[usr.GetId()] = userTrust
			var got []memoryv1.MemoryTrustLevel
			for _, id := range hint(t, e, e.agent, nil) {
				got = append(got, byTrust[id])
			}
			slices.Sort(got)
			slices.Sort(tc.want)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("recalled strategies of trust %v, want %v", got, tc.want)
			}
		})
	}
}
