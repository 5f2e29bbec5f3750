package loop

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

const merged = "## Planner\nstep one, then two\n\n## Tester\ntest the greeting"

// subAgentFakes are fakes with a complex task and a team that answers: planner, then
// implementer, tester and reviewer; the tester fails.
func subAgentFakes(complexity int32) *fakes {
	f := newFakes()
	f.Complexity = complexity
	team := []*aiv1.SubAgentEstimate{{Role: aiv1.SubAgentRole_SUB_AGENT_ROLE_PLANNER}, {Role: aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER}}
	f.EstimateSubAgentCost = func(*aiv1.EstimateSubAgentCostRequest) (*aiv1.EstimateSubAgentCostResponse, error) {
		return &aiv1.EstimateSubAgentCostResponse{Team: team, MinCostMicros: 1000, MaxCostMicros: 5000}, nil
	}
	f.RunSubAgents = func(int, *aiv1.RunSubAgentsRequest) (*aiv1.RunSubAgentsResponse, error) {
		return &aiv1.RunSubAgentsResponse{MergedContext: merged, Merge: aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE,
			Usage: &typev1.Usage{InputTokens: 300, OutputTokens: 100, CostMicros: 2500, Calls: 2},
			Results: []*aiv1.SubAgentResult{
				{Role: aiv1.SubAgentRole_SUB_AGENT_ROLE_PLANNER, Model: "m-mid", Output: "step one, then two", Usage: &typev1.Usage{CostMicros: 2000}},
				{Role: aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER, Model: "m-low", Error: "the model's answer was not JSON"},
			}}, nil
	}
	return f
}

var subAgentsOn = &agentv1.Preferences{SubAgentsEnabled: true, BudgetMode: aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST}

// With sub-agents on and a complex task the team runs between complexity and planning, in
// the owner's budget mode; its merged output reaches the plan and the build (fenced as
// context), a failed role is named in the job's events, and its cost is the job's, under
// the sub_agents phase.
func TestSubAgentsEnrichThePlanAndTheBuild(t *testing.T) {
	t.Parallel()
	f := subAgentFakes(8)
	h := newHarness(t, f, testConfig())
	rec := h.run(h.createWith(nil, subAgentsOn))
	wantStatus(t, rec, pendingReview, "")
	runs := requests[*aiv1.RunSubAgentsRequest](f, "RunSubAgents")
	if len(runs) != 1 || runs[0].Complexity != 8 || runs[0].BudgetMode != aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST ||
		runs[0].GetTask().GetTitle() != taskTitle || runs[0].GetAttribution().GetPhase() != aiv1.CallPhase_CALL_PHASE_SUB_AGENTS {
		t.Fatalf("RunSubAgents %v", runs)
	}
	if plans := requests[*aiv1.PlanTaskRequest](f, "PlanTask"); len(plans) != 1 || plans[0].EnrichedContext != merged {
		t.Fatalf("the plan's enriched context: %v", plans)
	}
	builds := requests[*builderv1.StartBuildRequest](f, "StartBuild")
	if len(builds) != 1 || !strings.Contains(builds[0].AdditionalContext, `<data kind="sub-agents">`) ||
		!strings.Contains(builds[0].AdditionalContext, "test the greeting") {
		t.Fatalf("the build's context: %v", builds)
	}
	sa := rec.Job.GetSubAgents()
	if sa.GetSkippedReason() != "" || len(sa.GetRoles()) != 2 || sa.GetRoles()[1].GetError() == "" || sa.GetCostMicros() != 2500 || sa.GetMergedTokens() == 0 {
		t.Errorf("the job's sub-agents: %v", sa)
	}
	if rec.Job.GetUsage().GetCostMicros() < 2500 {
		t.Errorf("the job's cost %d does not count the sub-agents' 2500", rec.Job.GetUsage().GetCostMicros())
	}
	if !anyContains(h.thoughts(rec.Job.Id), "sub-agent tester left out: the model's answer was not JSON") {
		t.Errorf("the failed role is not in the job's events: %v", h.thoughts(rec.Job.Id))
	}
	var phases []agentv1.JobPhase
	for _, ev := range h.events(rec.Job.Id) {
		if p := ev.GetPhaseChanged(); p != nil {
			phases = append(phases, p.Phase)
		}
	}
	if !containsInOrder(phases, agentv1.JobPhase_JOB_PHASE_COMPLEXITY, agentv1.JobPhase_JOB_PHASE_SUB_AGENTS, agentv1.JobPhase_JOB_PHASE_PLANNING) {
		t.Errorf("phases %v: want complexity, sub_agents, planning", phases)
	}
}

// No sub-agent call unless the preferences turn them on and the task is complex enough.
func TestSubAgentsOnlyWhenOnAndComplex(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		complexity int32
		prefs      *agentv1.Preferences
	}{
		"off":         {9, &agentv1.Preferences{}},
		"no prefs":    {9, nil},
		"simple task": {4, subAgentsOn},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := subAgentFakes(tc.complexity)
			h := newHarness(t, f, testConfig())
			rec := h.run(h.createWith(nil, tc.prefs))
			wantStatus(t, rec, pendingReview, "")
			if n := f.count("EstimateSubAgentCost") + f.count("RunSubAgents"); n != 0 || rec.Job.SubAgents != nil {
				t.Errorf("%d sub-agent calls, job's sub-agents %v", n, rec.Job.SubAgents)
			}
		})
	}
}

// A team whose estimate exceeds what is left of the budget does not run, and the job says
// so; a team the ai service refuses is skipped the same way; both jobs go on to review.
func TestSubAgentsSkippedByBudgetOrRefusal(t *testing.T) {
	t.Parallel()
	t.Run("budget", func(t *testing.T) {
		t.Parallel()
		f := subAgentFakes(8)
		h := newHarness(t, f, testConfig())
		rec := h.run(h.createWith(&typev1.Budget{MaxCostMicros: 4000}, subAgentsOn))
		wantStatus(t, rec, pendingReview, "")
		if n := f.count("RunSubAgents"); n != 0 {
			t.Errorf("%d team runs over the budget", n)
		}
		if r := rec.Job.GetSubAgents().GetSkippedReason(); !strings.Contains(r, "exceeds what is left of the job's budget") ||
			rec.Job.GetSubAgents().GetEstimateMaxCostMicros() != 5000 {
			t.Errorf("skipped reason %q", r)
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		f := subAgentFakes(8)
		f.RunSubAgents = func(int, *aiv1.RunSubAgentsRequest) (*aiv1.RunSubAgentsResponse, error) {
			return nil, status.Error(codes.FailedPrecondition, "every sub-agent failed")
		}
		h := newHarness(t, f, testConfig())
		rec := h.run(h.createWith(nil, subAgentsOn))
		wantStatus(t, rec, pendingReview, "")
		if r := rec.Job.GetSubAgents().GetSkippedReason(); r != "every sub-agent failed" {
			t.Errorf("skipped reason %q", r)
		}
		if plans := requests[*aiv1.PlanTaskRequest](f, "PlanTask"); len(plans) != 1 || plans[0].EnrichedContext != "" {
			t.Errorf("plans %v", plans)
		}
	})
}

// A passing failure of the team's call is tried again with the same request id (the ai
// service answers a retry from its record, billed once).
func TestSubAgentsRetriedWithTheSameRequestID(t *testing.T) {
	t.Parallel()
	f := subAgentFakes(8)
	ok := f.RunSubAgents
	f.RunSubAgents = func(n int, req *aiv1.RunSubAgentsRequest) (*aiv1.RunSubAgentsResponse, error) {
		if n == 1 {
			return nil, status.Error(codes.Unavailable, "ai restarting")
		}
		return ok(n, req)
	}
	h := newHarness(t, f, testConfig())
	id := h.createWith(nil, subAgentsOn)
	if rec := h.run(id); rec.Job.Status != running || rec.Job.Phase != phaseSubAgents {
		t.Fatalf("after the passing failure: %v in %v, want running in sub_agents (the queue runs it again)", rec.Job.Status, rec.Job.Phase)
	}
	rec := h.run(id) // the queue's next try, from the checkpoint
	wantStatus(t, rec, pendingReview, "")
	runs := requests[*aiv1.RunSubAgentsRequest](f, "RunSubAgents")
	if len(runs) != 2 || runs[0].RequestId == "" || runs[0].RequestId != runs[1].RequestId {
		t.Fatalf("RunSubAgents requests %v", runs)
	}
	if plans := requests[*aiv1.PlanTaskRequest](f, "PlanTask"); len(plans) != 1 || plans[0].EnrichedContext != merged {
		t.Errorf("plans %v", plans)
	}
}

func containsInOrder[T comparable](s []T, want ...T) bool {
	i := 0
	for _, v := range s {
		if i < len(want) && v == want[i] {
			i++
		}
	}
	return i == len(want)
}
