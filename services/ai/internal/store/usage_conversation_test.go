package store

import (
	"testing"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// The ledger files a chat reply's calls under their conversation: ListUsageRecords returns
// it and filters by it, GetUsage groups by it (other calls under "").
func TestUsageByConversation(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	for _, r := range []struct {
		conv string
		cost int64
	}{{"c-1", 5}, {"c-2", 7}, {"c-1", 11}, {"", 13}} {
		if _, err := s.RecordUsage(ctx, &aiv1.UsageRecord{Rpc: "StreamComplete", Phase: aiv1.CallPhase_CALL_PHASE_COMPLETION, ConversationId: r.conv,
			Usage: &typev1.Usage{CostMicros: r.cost, Calls: 1}, Outcome: ok}); err != nil {
			t.Fatal(err)
		}
	}
	rows, _, err := s.GetUsage(ctx, UsageFilter{}, []aiv1.UsageGroupBy{aiv1.UsageGroupBy_USAGE_GROUP_BY_CONVERSATION})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rows {
		got[r.ConversationId] = r.CostMicros
	}
	if len(rows) != 3 || got["c-1"] != 16 || got["c-2"] != 7 || got[""] != 13 {
		t.Errorf("by conversation: %v", rows)
	}
	recs, _, err := s.ListUsageRecords(ctx, UsageFilter{ConversationID: "c-1"}, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ConversationId != "c-1" || recs[1].ConversationId != "c-1" {
		t.Errorf("c-1's records: %v", recs)
	}
}
