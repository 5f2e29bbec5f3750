package loop

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/tokens"
)

// The sub-agents phase: when the owner's preferences turn them on and the task is complex
// (5 or more), a team of specialised sub-agents (ai.RunSubAgents) studies the task before it
// is planned; their merged output enriches the plan's context and every file the build
// writes or fixes, as context to weigh, never as the task. It runs once per job: the merged
// context stays in the job's context for every later attempt.

// subAgentsMinComplexity is the complexity from which a team is dispatched.
const subAgentsMinComplexity = 5

// wantsSubAgents reports whether the job dispatches sub-agents before planning.
func (r *run) wantsSubAgents() bool {
	j := r.job()
	return j.GetPreferences().GetSubAgentsEnabled() && j.Complexity >= subAgentsMinComplexity && j.SubAgents == nil
}

// budgetMode is the owner's budget mode for the job's model selection.
func (r *run) budgetMode() aiv1.BudgetMode {
	return r.job().GetPreferences().GetBudgetMode()
}

// subAgents runs the team, or says why it did not: the estimate exceeds what is left of
// the budget, or the ai service cannot run it. Only a passing failure (the ai service
// restarting) is an error: the step is tried again from the checkpoint, whose request id
// makes the team's recorded answer come back billed once.
func (r *run) subAgents(ctx context.Context) error {
	j, c := r.job(), r.rec.Context
	merge := j.GetPreferences().GetSubAgentMerge()
	run := &agentv1.SubAgentsRun{Merge: merge}
	skip := func(format string, args ...any) error {
		run.SkippedReason = fmt.Sprintf(format, args...)
		j.SubAgents = run
		r.thought("sub-agents skipped: %s", run.SkippedReason)
		r.setPhase(phasePlanning)
		return nil
	}
	est, err := r.e.c.AI.EstimateSubAgentCost(ctx, &aiv1.EstimateSubAgentCostRequest{
		Complexity: j.Complexity, BudgetMode: r.budgetMode(), TaskTokens: int64(r.subAgentInputTokens()), Merge: merge,
	})
	if err != nil {
		if permanent(err) {
			return skip("the ai service cannot estimate them: %s", status.Convert(err).Message())
		}
		return err
	}
	run.EstimateMaxCostMicros = est.MaxCostMicros
	left := r.remaining().GetMaxCostMicros()
	if left > 0 && est.MaxCostMicros > left {
		return skip("their estimate (up to %s for %s) exceeds what is left of the job's budget (%s)",
			dollars(est.MaxCostMicros), teamNames(est.Team), dollars(left))
	}
	r.thought("sub-agents: %s, up to %s", teamNames(est.Team), dollars(est.MaxCostMicros))
	task, mk, err := r.task(ctx)
	if err != nil {
		return err
	}
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.RunSubAgents(mctx, &aiv1.RunSubAgentsRequest{
		RequestId: r.key("subagents") + mk, Task: task, Complexity: j.Complexity, BudgetMode: r.budgetMode(), Merge: merge,
		ProjectTree: c.ProjectTree, ContextFiles: c.ContextFiles, Memories: c.Memories, MaxCostMicros: left,
		Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_SUB_AGENTS),
	})
	if err != nil {
		if permanent(err) || status.Code(err) == codes.ResourceExhausted {
			return skip("%s", status.Convert(err).Message())
		}
		return err
	}
	r.spend(resp.Usage)
	run.Merge, run.CostMicros = resp.Merge, resp.GetUsage().GetCostMicros()
	for _, res := range resp.Results {
		run.Roles = append(run.Roles, &agentv1.SubAgentOutcome{Role: res.Role, Model: res.Model, Error: res.Error, CostMicros: res.GetUsage().GetCostMicros()})
		if res.Error != "" {
			// The role's output is left out; the job goes on with the others'.
			r.thought("sub-agent %s left out: %s", roleName(res.Role), truncate(res.Error, 300))
		}
	}
	c.EnrichedContext = resp.MergedContext
	run.MergedTokens = int32(tokens.Count(resp.MergedContext))
	j.SubAgents = run
	r.thought("sub-agents done: %d tokens of context from %s (%s)", run.MergedTokens, teamNames(est.Team), dollars(run.CostMicros))
	r.setPhase(phasePlanning)
	return nil
}

// subAgentInputTokens is the size of what each sub-agent reads: the task and its context.
func (r *run) subAgentInputTokens() int {
	c := r.rec.Context
	n := tokens.Count(c.GetTask().GetTitle()) + tokens.Count(c.GetTask().GetDescription()) + 2*len(c.ProjectTree)
	for _, f := range c.ContextFiles {
		n += tokens.Count(f.Content)
	}
	for _, m := range c.Memories {
		n += tokens.Count(m.Content)
	}
	return n
}

func roleName(r aiv1.SubAgentRole) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "SUB_AGENT_ROLE_"))
}

func teamNames(team []*aiv1.SubAgentEstimate) string {
	names := make([]string, len(team))
	for i, m := range team {
		names[i] = roleName(m.Role)
	}
	return strings.Join(names, ", ")
}

func dollars(micros int64) string { return fmt.Sprintf("$%.4f", float64(micros)/1e6) }
