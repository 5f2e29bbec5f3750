package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

const (
	ok          = aiv1.CallOutcome_CALL_OUTCOME_OK
	badOutput   = aiv1.CallOutcome_CALL_OUTCOME_INVALID_OUTPUT
	planning    = aiv1.CallPhase_CALL_PHASE_PLANNING
	generation  = aiv1.CallPhase_CALL_PHASE_GENERATION
	groupModel  = aiv1.UsageGroupBy_USAGE_GROUP_BY_MODEL
	groupDay    = aiv1.UsageGroupBy_USAGE_GROUP_BY_DAY
	groupPhase  = aiv1.UsageGroupBy_USAGE_GROUP_BY_PHASE
	groupJob    = aiv1.UsageGroupBy_USAGE_GROUP_BY_JOB
	groupTask   = aiv1.UsageGroupBy_USAGE_GROUP_BY_TASK
	groupBuild  = aiv1.UsageGroupBy_USAGE_GROUP_BY_BUILD
	groupProj   = aiv1.UsageGroupBy_USAGE_GROUP_BY_PROJECT
	groupRPC    = aiv1.UsageGroupBy_USAGE_GROUP_BY_RPC
	modelIDOfB1 = "00000000-0000-4000-8000-0000000000b1"
)

// day0 is late evening UTC: in UTC+2 it is already the next day, which must not matter.
var day0 = time.Date(2030, 3, 9, 23, 30, 0, 0, time.UTC)

type rec struct {
	at                  time.Time
	rpc, job, task      string
	build, project      string
	phase               aiv1.CallPhase
	model, provider     string
	in, out, cr, cw     int64
	cost                int64
	calls               int32
	outcome             aiv1.CallOutcome
	modelID, user, repo string
}

func (r rec) record() *aiv1.UsageRecord {
	return &aiv1.UsageRecord{
		CreateTime: timestamppb.New(r.at), UserId: r.user, Caller: "agent", Rpc: r.rpc, Phase: r.phase,
		JobId: r.job, TaskId: r.task, BuildId: r.build, ProjectId: r.project, Repo: r.repo, ModelId: r.modelID,
		Usage: &typev1.Usage{Model: r.model, Provider: r.provider, InputTokens: r.in, OutputTokens: r.out,
			CacheReadTokens: r.cr, CacheWriteTokens: r.cw, CostMicros: r.cost,
			Latency: durationpb.New(1500 * time.Microsecond), Calls: r.calls},
		Outcome: r.outcome,
	}
}

// ledger records a small ledger over two days and returns the store.
func ledger(t *testing.T) *Store {
	t.Helper()
	s, _ := emptyStore(t)
	recs := []rec{
		{at: day0, rpc: "PlanTask", job: "j1", task: "t1", project: "p1", phase: planning, model: "m-a", provider: "a", in: 100, out: 10, cost: 7, calls: 1, outcome: ok, user: "alice", repo: "o/r"},
		{at: day0.Add(10 * time.Minute), rpc: "GenerateFile", job: "j1", task: "t1", build: "b1", phase: generation, model: "m-b", provider: "b", in: 200, out: 20, cr: 50, cw: 5, cost: 11, calls: 2, outcome: ok, modelID: modelIDOfB1, user: "alice", repo: "o/r"},
		{at: day0.Add(20 * time.Minute), rpc: "GenerateFile", job: "j1", task: "t2", build: "b1", phase: generation, model: "m-b", provider: "b", in: 300, out: 0, cost: 13, calls: 3, outcome: badOutput, modelID: modelIDOfB1, user: "alice", repo: "o/r"},
		{at: day0.Add(40 * time.Minute), rpc: "PlanTask", job: "j2", task: "t3", phase: planning, model: "m-a", provider: "a", in: 400, out: 40, cost: 17, calls: 1, outcome: ok, user: "bob", repo: "o/s"},
	}
	for _, r := range recs {
		if _, err := s.RecordUsage(t.Context(), r.record()); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestGetUsage(t *testing.T) {
	t.Parallel()
	s := ledger(t)
	ctx := t.Context()
	cases := []struct {
		name    string
		f       UsageFilter
		groupBy []aiv1.UsageGroupBy
		want    []*aiv1.UsageRow
	}{
		{"no grouping: one total row", UsageFilter{}, nil, []*aiv1.UsageRow{
			{Calls: 7, InputTokens: 1000, OutputTokens: 70, CacheReadTokens: 50, CacheWriteTokens: 5, CostMicros: 48, FailedCalls: 1},
		}},
		{"nothing selected: one zero row", UsageFilter{JobID: "none"}, nil, []*aiv1.UsageRow{{}}},
		{"by model", UsageFilter{}, []aiv1.UsageGroupBy{groupModel}, []*aiv1.UsageRow{
			{Provider: "a", Model: "m-a", Calls: 2, InputTokens: 500, OutputTokens: 50, CostMicros: 24},
			{Provider: "b", Model: "m-b", Calls: 5, InputTokens: 500, OutputTokens: 20, CacheReadTokens: 50, CacheWriteTokens: 5, CostMicros: 24, FailedCalls: 1},
		}},
		{"by UTC day", UsageFilter{}, []aiv1.UsageGroupBy{groupDay}, []*aiv1.UsageRow{
			{Day: "2030-03-09", Calls: 6, InputTokens: 600, OutputTokens: 30, CacheReadTokens: 50, CacheWriteTokens: 5, CostMicros: 31, FailedCalls: 1},
			{Day: "2030-03-10", Calls: 1, InputTokens: 400, OutputTokens: 40, CostMicros: 17},
		}},
		{"by phase", UsageFilter{}, []aiv1.UsageGroupBy{groupPhase}, []*aiv1.UsageRow{
			{Phase: planning, Calls: 2, InputTokens: 500, OutputTokens: 50, CostMicros: 24},
			{Phase: generation, Calls: 5, InputTokens: 500, OutputTokens: 20, CacheReadTokens: 50, CacheWriteTokens: 5, CostMicros: 24, FailedCalls: 1},
		}},
		{"by job and task, job filter", UsageFilter{JobID: "j1"}, []aiv1.UsageGroupBy{groupJob, groupTask, groupJob}, []*aiv1.UsageRow{
			{JobId: "j1", TaskId: "t1", Calls: 3, InputTokens: 300, OutputTokens: 30, CacheReadTokens: 50, CacheWriteTokens: 5, CostMicros: 18},
			{JobId: "j1", TaskId: "t2", Calls: 3, InputTokens: 300, CostMicros: 13, FailedCalls: 1},
		}},
		{"by build, project and rpc", UsageFilter{}, []aiv1.UsageGroupBy{groupRPC, groupBuild, groupProj}, []*aiv1.UsageRow{
			{Rpc: "GenerateFile", BuildId: "b1", Calls: 5, InputTokens: 500, OutputTokens: 20, CacheReadTokens: 50, CacheWriteTokens: 5, CostMicros: 24, FailedCalls: 1},
			{Rpc: "PlanTask", Calls: 1, InputTokens: 400, OutputTokens: 40, CostMicros: 17},
			{Rpc: "PlanTask", ProjectId: "p1", Calls: 1, InputTokens: 100, OutputTokens: 10, CostMicros: 7},
		}},
		{"time range, start inclusive, end exclusive", UsageFilter{Start: day0.Add(10 * time.Minute), End: day0.Add(40 * time.Minute)}, nil, []*aiv1.UsageRow{
			{Calls: 5, InputTokens: 500, OutputTokens: 20, CacheReadTokens: 50, CacheWriteTokens: 5, CostMicros: 24, FailedCalls: 1},
		}},
		{"user, repo, model, rpc and phase filters", UsageFilter{UserID: "alice", Repo: "o/r", ModelID: modelIDOfB1, RPC: "GenerateFile", Phase: generation, TaskID: "t1", BuildID: "b1"}, nil, []*aiv1.UsageRow{
			{Calls: 2, InputTokens: 200, OutputTokens: 20, CacheReadTokens: 50, CacheWriteTokens: 5, CostMicros: 11},
		}},
		{"project filter", UsageFilter{ProjectID: "p1"}, []aiv1.UsageGroupBy{groupModel}, []*aiv1.UsageRow{
			{Provider: "a", Model: "m-a", Calls: 1, InputTokens: 100, OutputTokens: 10, CostMicros: 7},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows, total, err := s.GetUsage(ctx, tc.f, tc.groupBy)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, rows, protocmp.Transform()); d != "" {
				t.Errorf("rows (-want +got):\n%s", d)
			}
			var sum aiv1.UsageRow
			for _, r := range tc.want {
				sum.Calls += r.Calls
				sum.InputTokens += r.InputTokens
				sum.OutputTokens += r.OutputTokens
				sum.CacheReadTokens += r.CacheReadTokens
				sum.CacheWriteTokens += r.CacheWriteTokens
				sum.CostMicros += r.CostMicros
				sum.FailedCalls += r.FailedCalls
			}
			if d := cmp.Diff(&sum, total, protocmp.Transform()); d != "" {
				t.Errorf("total (-want +got):\n%s", d)
			}
		})
	}
	if _, _, err := s.GetUsage(ctx, UsageFilter{}, []aiv1.UsageGroupBy{aiv1.UsageGroupBy_USAGE_GROUP_BY_UNSPECIFIED}); err == nil {
		t.Error("grouping by UNSPECIFIED succeeded")
	}
}

func TestListUsageRecords(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	// Two records share each time: the id breaks the tie, and pages neither skip nor repeat.
	var ids []string
	for i := range 7 {
		r := rec{at: day0.Add(time.Duration(i/2) * time.Minute), rpc: fmt.Sprintf("R%d", i), job: "j", calls: 1, outcome: ok, model: "m", provider: "p"}
		if i == 3 {
			r.job = "other"
		}
		id, err := s.RecordUsage(ctx, r.record())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var got []*aiv1.UsageRecord
	var after *UsageCursor
	for range 10 {
		page, next, err := s.ListUsageRecords(ctx, UsageFilter{JobID: "j"}, 2, after)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 2 {
			t.Fatalf("page of %d", len(page))
		}
		got = append(got, page...)
		if next == nil {
			break
		}
		after = next
	}
	if len(got) != 6 {
		t.Fatalf("listed %d records, want 6", len(got))
	}
	seen := map[string]bool{}
	for i, r := range got {
		if seen[r.Id] {
			t.Errorf("record %s listed twice", r.Id)
		}
		seen[r.Id] = true
		if r.JobId != "j" {
			t.Errorf("record of job %q listed", r.JobId)
		}
		if i > 0 {
			prev := got[i-1]
			if r.CreateTime.AsTime().After(prev.CreateTime.AsTime()) ||
				(r.CreateTime.AsTime().Equal(prev.CreateTime.AsTime()) && r.Id > prev.Id) {
				t.Errorf("record %d (%s %s) is not older than the one before", i, r.CreateTime.AsTime(), r.Id)
			}
		}
	}
	// One record read back whole.
	want := rec{at: day0.Add(time.Minute), rpc: "R3", job: "other", calls: 1, outcome: ok, model: "m", provider: "p"}.record()
	want.Id = ids[3]
	page, _, err := s.ListUsageRecords(ctx, UsageFilter{JobID: "other"}, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]*aiv1.UsageRecord{want}, page, protocmp.Transform()); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}
}

func TestRecordUsageDefaults(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	// No time, no model id, no usage: the database's now, a NULL model id, zero counts.
	id, err := s.RecordUsage(ctx, &aiv1.UsageRecord{Rpc: "Embed", Outcome: ok})
	if err != nil {
		t.Fatal(err)
	}
	page, _, err := s.ListUsageRecords(ctx, UsageFilter{}, 10, nil)
	if err != nil || len(page) != 1 {
		t.Fatalf("list = %v, %v", page, err)
	}
	r := page[0]
	if r.Id != id || r.CreateTime == nil || r.ModelId != "" || r.Usage.GetCalls() != 0 || r.Usage.GetLatency().AsDuration() != 0 {
		t.Errorf("record = %v", r)
	}
}
