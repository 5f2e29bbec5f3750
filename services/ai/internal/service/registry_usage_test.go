package service_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

func TestUsageReports(t *testing.T) {
	t.Parallel()
	e := startRegistry(t)
	ctx := e.admin
	day := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
	for i, r := range []struct {
		at      time.Time
		rpc     string
		model   string
		tokens  int64
		cost    int64
		outcome aiv1.CallOutcome
	}{
		{day, "PlanTask", "claude-sonnet-4-5", 100, 10, aiv1.CallOutcome_CALL_OUTCOME_OK},
		{day.Add(time.Hour), "GenerateFile", "claude-sonnet-4-5", 200, 20, aiv1.CallOutcome_CALL_OUTCOME_OK},
		{day.Add(24 * time.Hour), "GenerateFile", "gpt-4o", 300, 30, aiv1.CallOutcome_CALL_OUTCOME_PROVIDER_ERROR},
	} {
		_, err := e.st.RecordUsage(t.Context(), &aiv1.UsageRecord{
			CreateTime: timestamppb.New(r.at), UserId: "alice", Caller: "agent", Rpc: r.rpc, JobId: "job-1",
			Usage:   &typev1.Usage{Model: r.model, Provider: "p", InputTokens: r.tokens, CostMicros: r.cost, Calls: int32(i + 1)},
			Outcome: r.outcome,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	resp, err := e.client.GetUsage(ctx, &aiv1.GetUsageRequest{JobId: "job-1",
		GroupBy: []aiv1.UsageGroupBy{aiv1.UsageGroupBy_USAGE_GROUP_BY_DAY, aiv1.UsageGroupBy_USAGE_GROUP_BY_MODEL}})
	if err != nil {
		t.Fatal(err)
	}
	want := &aiv1.GetUsageResponse{
		Rows: []*aiv1.UsageRow{
			{Day: "2030-05-01", Provider: "p", Model: "claude-sonnet-4-5", Calls: 3, InputTokens: 300, CostMicros: 30},
			{Day: "2030-05-02", Provider: "p", Model: "gpt-4o", Calls: 3, InputTokens: 300, CostMicros: 30, FailedCalls: 1},
		},
		Total: &aiv1.UsageRow{Calls: 6, InputTokens: 600, CostMicros: 60, FailedCalls: 1},
	}
	if d := cmp.Diff(want, resp, protocmp.Transform()); d != "" {
		t.Errorf("GetUsage (-want +got):\n%s", d)
	}
	// The range is start-inclusive, end-exclusive.
	resp, err = e.client.GetUsage(ctx, &aiv1.GetUsageRequest{StartTime: timestamppb.New(day.Add(time.Hour)), EndTime: timestamppb.New(day.Add(24 * time.Hour))})
	if err != nil || len(resp.Rows) != 1 || resp.Rows[0].InputTokens != 200 {
		t.Errorf("ranged usage = %v, %v", resp, err)
	}

	var rpcs []string
	req := &aiv1.ListUsageRecordsRequest{UserId: "alice", PageSize: 2}
	for range 5 {
		page, err := e.client.ListUsageRecords(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			rpcs = append(rpcs, r.Rpc+"/"+r.Usage.GetModel())
		}
		if page.NextPageToken == "" {
			break
		}
		req.PageToken = page.NextPageToken
	}
	if d := cmp.Diff([]string{"GenerateFile/gpt-4o", "GenerateFile/claude-sonnet-4-5", "PlanTask/claude-sonnet-4-5"}, rpcs); d != "" {
		t.Errorf("records newest first (-want +got):\n%s", d)
	}
	filtered, err := e.client.ListUsageRecords(ctx, &aiv1.ListUsageRecordsRequest{Rpc: "PlanTask"})
	if err != nil || len(filtered.Records) != 1 || filtered.NextPageToken != "" {
		t.Errorf("filtered records = %v, %v", filtered, err)
	}
}

// Usage is readable by its owner: a member reads their own spend (an empty user_id means
// theirs), never another's; an admin reads anyone's.
func TestUsageIsReadableByItsOwner(t *testing.T) {
	t.Parallel()
	e := startRegistry(t)
	for _, u := range []struct {
		user string
		cost int64
	}{{"alice", 7}, {"bob", 100}} {
		if _, err := e.st.RecordUsage(t.Context(), &aiv1.UsageRecord{CreateTime: timestamppb.Now(), UserId: u.user, Caller: "agent", Rpc: "PlanTask",
			Usage: &typev1.Usage{Model: "m", Provider: "p", CostMicros: u.cost, Calls: 1}, Outcome: aiv1.CallOutcome_CALL_OUTCOME_OK}); err != nil {
			t.Fatal(err)
		}
	}
	mine, err := e.client.GetUsage(e.user, &aiv1.GetUsageRequest{})
	if err != nil || mine.GetTotal().GetCostMicros() != 7 {
		t.Fatalf("alice's own usage: %v %v", mine, err)
	}
	recs, err := e.client.ListUsageRecords(e.user, &aiv1.ListUsageRecordsRequest{})
	if err != nil || len(recs.GetRecords()) != 1 || recs.GetRecords()[0].GetUserId() != "alice" {
		t.Fatalf("alice's own records: %v %v", recs, err)
	}
	_, err = e.client.GetUsage(e.user, &aiv1.GetUsageRequest{UserId: "bob"})
	regWantCode(t, err, codes.PermissionDenied, "user_id")
	_, err = e.client.ListUsageRecords(e.user, &aiv1.ListUsageRecordsRequest{UserId: "bob"})
	regWantCode(t, err, codes.PermissionDenied, "user_id")
	all, err := e.client.GetUsage(e.admin, &aiv1.GetUsageRequest{})
	if err != nil || all.GetTotal().GetCostMicros() != 107 {
		t.Fatalf("an admin reads everyone's: %v %v", all, err)
	}
	bobs, err := e.client.GetUsage(e.admin, &aiv1.GetUsageRequest{UserId: "bob"})
	if err != nil || bobs.GetTotal().GetCostMicros() != 100 {
		t.Fatalf("an admin reads bob's: %v %v", bobs, err)
	}
}
