package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// The ledger keeps each entry's sub-agent role: ListUsageRecords returns it and GetUsage
// groups by it, in the roles' numeric order, other calls under UNSPECIFIED.
func TestUsageByRole(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	subAgents := aiv1.CallPhase_CALL_PHASE_SUB_AGENTS
	for _, r := range []struct {
		role  aiv1.SubAgentRole
		phase aiv1.CallPhase
		cost  int64
	}{
		{aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER, subAgents, 5},
		{aiv1.SubAgentRole_SUB_AGENT_ROLE_PLANNER, subAgents, 7},
		{aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER, subAgents, 11},
		{aiv1.SubAgentRole_SUB_AGENT_ROLE_UNSPECIFIED, subAgents, 13}, // the merge
		{aiv1.SubAgentRole_SUB_AGENT_ROLE_UNSPECIFIED, planning, 17},
	} {
		if _, err := s.RecordUsage(ctx, &aiv1.UsageRecord{Rpc: "RunSubAgents", Phase: r.phase, Role: r.role,
			Usage: &typev1.Usage{CostMicros: r.cost, Calls: 1}, Outcome: ok}); err != nil {
			t.Fatal(err)
		}
	}
	rows, total, err := s.GetUsage(ctx, UsageFilter{}, []aiv1.UsageGroupBy{aiv1.UsageGroupBy_USAGE_GROUP_BY_ROLE})
	if err != nil {
		t.Fatal(err)
	}
	want := []*aiv1.UsageRow{
		{Calls: 2, CostMicros: 30},
		{Role: aiv1.SubAgentRole_SUB_AGENT_ROLE_PLANNER, Calls: 1, CostMicros: 7},
		{Role: aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER, Calls: 2, CostMicros: 16},
	}
	if d := cmp.Diff(want, rows, protocmp.Transform()); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
	if total.CostMicros != 53 || total.Calls != 5 {
		t.Errorf("total %v", total)
	}
	rows, _, err = s.GetUsage(ctx, UsageFilter{Phase: subAgents}, []aiv1.UsageGroupBy{aiv1.UsageGroupBy_USAGE_GROUP_BY_PHASE, aiv1.UsageGroupBy_USAGE_GROUP_BY_ROLE})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Phase != subAgents || rows[0].CostMicros != 13 || rows[2].Role != aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER {
		t.Errorf("by phase and role: %v", rows)
	}
	recs, _, err := s.ListUsageRecords(ctx, UsageFilter{}, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[aiv1.SubAgentRole]int{}
	for _, r := range recs {
		roles[r.Role]++
	}
	if roles[aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER] != 2 || roles[aiv1.SubAgentRole_SUB_AGENT_ROLE_PLANNER] != 1 || roles[aiv1.SubAgentRole_SUB_AGENT_ROLE_UNSPECIFIED] != 2 {
		t.Errorf("roles listed: %v", roles)
	}
}
