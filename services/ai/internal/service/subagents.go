package service

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/tokens"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/ai/internal/engine"
	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/prompts"
	"github.com/thefold/thefold/services/ai/internal/registry"
)

const subAgentsRPC = "RunSubAgents"

// Limits of the sub-agent RPCs' input.
const (
	defaultContextTokens = 6000
	minContextTokens     = 500
	maxContextTokens     = 32000
	defaultTaskTokens    = 4000
	maxTaskTokens        = 100_000_000
)

// RunSubAgents runs the team a complexity calls for on a task and merges the roles'
// outputs into context for the plan and the build.
func (s *AIServer) RunSubAgents(ctx context.Context, req *aiv1.RunSubAgentsRequest) (*aiv1.RunSubAgentsResponse, error) {
	if err := checkRunSubAgents(req); err != nil {
		return nil, err
	}
	c := &engine.Call{RPC: subAgentsRPC, Phase: aiv1.CallPhase_CALL_PHASE_SUB_AGENTS, RequestID: req.RequestId, Request: req}
	return engine.Idempotent(ctx, s.eng, c, func(ctx context.Context) (*aiv1.RunSubAgentsResponse, error) {
		return s.runSubAgents(ctx, req)
	})
}

func checkRunSubAgents(req *aiv1.RunSubAgentsRequest) error {
	if err := firstErr(
		validate.RequestID("request_id", req.RequestId),
		checkTask("task", req.Task),
	); err != nil {
		return err
	}
	if c := req.Complexity; c < minTeamComplexity || c > 10 {
		return errs.Invalid("complexity", "want %d to 10 (below %d no sub-agents run), got %d", minTeamComplexity, minTeamComplexity, c)
	}
	if err := firstErr(
		validate.Enum("budget_mode", req.BudgetMode, true),
		validate.Enum("merge", req.Merge, true),
		checkTree("project_tree", req.ProjectTree),
		checkContextFiles("context_files", req.ContextFiles),
		checkMemories("memories", req.Memories),
	); err != nil {
		return err
	}
	if req.MaxCostMicros < 0 {
		return errs.Invalid("max_cost_micros", "must not be negative (0: no limit of its own), got %d", req.MaxCostMicros)
	}
	if n := req.MaxContextTokens; n != 0 && (n < minContextTokens || n > maxContextTokens) {
		return errs.Invalid("max_context_tokens", "want 0 (%d) or %d to %d, got %d", defaultContextTokens, minContextTokens, maxContextTokens, n)
	}
	return checkAttribution(req.Attribution)
}

// runSubAgents is RunSubAgents' work under its request_id: the budget check, the team's
// graph, the merge.
func (s *AIServer) runSubAgents(ctx context.Context, req *aiv1.RunSubAgentsRequest) (*aiv1.RunSubAgentsResponse, error) {
	members := team(req.Complexity)
	if req.MaxCostMicros > 0 {
		if err := s.checkTeamCost(ctx, req, members); err != nil {
			return nil, err
		}
	}
	runs := runGraph(ctx, members, func(ctx context.Context, m member, deps []roleRun) roleRun {
		return s.runRole(ctx, req, m, deps)
	})
	if err := teamFailed(ctx, members, runs); err != nil {
		return nil, err
	}
	resp := &aiv1.RunSubAgentsResponse{}
	usages := make([]*aiv1.SubAgentResult, 0, len(runs))
	for _, r := range runs {
		resp.Results = append(resp.Results, r.result)
		usages = append(usages, r.result)
	}
	merged, strategy, mergeRun := s.merge(ctx, req, runs)
	resp.MergedContext = capTokens(merged, contextTokens(req))
	resp.Merge = strategy
	if mergeRun != nil {
		usages = append(usages, mergeRun)
	}
	resp.Usage = sumUsage(usages)
	return resp, nil
}

// checkTeamCost refuses a team whose estimate's upper bound is above max_cost_micros, with
// what the roles read counted from the request itself.
func (s *AIServer) checkTeamCost(ctx context.Context, req *aiv1.RunSubAgentsRequest, members []member) error {
	p, err := prompts.SubAgent(req, members[0].role, nil)
	if err != nil {
		return err
	}
	est, err := s.estimate(ctx, req.Complexity, req.BudgetMode, int64(tokens.Count(p.ContextText())), req.Merge)
	if err != nil {
		return err
	}
	if est.MaxCostMicros > req.MaxCostMicros {
		return errs.Public(codes.FailedPrecondition,
			"max_cost_micros: the team of complexity %d is estimated at %d to %d micro-dollars, above max_cost_micros %d; raise it, or lower the complexity or the budget mode",
			req.Complexity, est.MinCostMicros, est.MaxCostMicros, req.MaxCostMicros)
	}
	return nil
}

// runRole makes one role's model call through the engine (selection at the role's tier,
// fallbacks, retries, spend limit, ledger under CALL_PHASE_SUB_AGENTS and the role), given
// the outputs of the dependencies that succeeded and told of those that failed. A failed
// role's error is the status the caller would have been told (never a provider's words).
func (s *AIServer) runRole(ctx context.Context, req *aiv1.RunSubAgentsRequest, m member, deps []roleRun) roleRun {
	res := &aiv1.SubAgentResult{Role: m.role, StartTime: timestamppb.Now()}
	var inputs []prompts.SubAgentInput
	var missing []string
	for _, d := range deps {
		in := prompts.SubAgentInput{Role: d.result.GetRole(), Failed: d.err != nil}
		if d.err == nil {
			in.Output = d.result.GetOutput()
			res.DependsOn = append(res.DependsOn, in.Role)
		} else {
			missing = append(missing, in.Name())
		}
		inputs = append(inputs, in)
	}
	tier := roleTier(m.role, req.BudgetMode)
	fail := func(err error) roleRun {
		err = s.eng.PublicError(ctx, aiv1.AIService_RunSubAgents_FullMethodName, err)
		res.Error = status.Convert(err).Message()
		if cands, cerr := s.eng.TierCandidates(ctx, tier); cerr == nil {
			res.Model = cands[0].Model.GetId() // the model it was to run on
		}
		res.EndTime = timestamppb.Now()
		return roleRun{result: res, err: err}
	}
	p, err := prompts.SubAgent(req, m.role, inputs)
	if err != nil {
		return fail(err)
	}
	requestID := ""
	if req.RequestId != "" {
		// The role's own request_id, so that a retry of a RunSubAgents that failed as a
		// whole is answered role by role from what succeeded, billed once. A space never
		// occurs in a caller's request_id, so no caller's call can collide with it. What the
		// role was given is part of it: given other inputs, the role answers anew.
		requestID = req.RequestId + " #" + prompts.SubAgentName(m.role)
		if len(missing) > 0 {
			requestID += " without " + strings.Join(missing, ",")
		}
	}
	c := s.subAgentCall(req, requestID, m.role, tier, p)
	// A role that fails after the provider billed it (an answer that never parsed) still
	// costs the job: its result carries what the ledger recorded.
	var spent *typev1.Usage
	c.Spent = func(u *typev1.Usage) { spent = u }
	out, err := engine.Run(ctx, s.eng, c, parseWith(p, func(raw string) (*aiv1.SubAgentResult, error) {
		md, err := prompts.ParseSubAgent(m.role, raw)
		if err != nil {
			return nil, err
		}
		return &aiv1.SubAgentResult{Role: m.role, Output: md}, nil
	}))
	if err != nil {
		if spent.GetCalls() > 0 || spent.GetCostMicros() > 0 {
			res.Usage = spent
		}
		return fail(err)
	}
	res.Output, res.Usage = out.GetOutput(), out.GetUsage()
	res.Model = s.modelID(ctx, res.Usage.GetProvider(), res.Usage.GetModel())
	res.EndTime = timestamppb.Now()
	return roleRun{result: res}
}

// subAgentCall is the engine call of a role (or, role UNSPECIFIED, of the merge): the
// caller's attribution with the phase CALL_PHASE_SUB_AGENTS and the role, the model
// selected at tier. No reasoning: the answers are short and capped, and a thinking budget
// would cost more than the answer.
func (s *AIServer) subAgentCall(req *aiv1.RunSubAgentsRequest, requestID string, role aiv1.SubAgentRole, tier int32, p *prompts.Prompt) *engine.Call {
	a := &aiv1.Attribution{}
	if req.Attribution != nil {
		a = proto.CloneOf(req.Attribution)
	}
	a.Phase, a.Role = aiv1.CallPhase_CALL_PHASE_SUB_AGENTS, role
	return &engine.Call{
		RPC: subAgentsRPC, Phase: aiv1.CallPhase_CALL_PHASE_SUB_AGENTS, RequestID: requestID, Request: req,
		Attribution: a, Tier: tier, Fit: p.Fit,
		LLM: llm.Request{System: p.System, Messages: p.Messages, MaxTokens: p.MaxTokens, JSON: !p.Text},
	}
}

// modelID is the registry id of the model a usage names (its provider and model names).
func (s *AIServer) modelID(ctx context.Context, provider, model string) string {
	cands, err := s.reg.Candidates(ctx)
	if err != nil {
		return ""
	}
	for _, c := range cands {
		if c.Model.GetName() == model && c.Provider.GetName() == provider {
			return c.Model.GetId()
		}
	}
	return ""
}

// EstimateSubAgentCost is the team RunSubAgents would run, its models and its cost range.
func (s *AIServer) EstimateSubAgentCost(ctx context.Context, req *aiv1.EstimateSubAgentCostRequest) (*aiv1.EstimateSubAgentCostResponse, error) {
	if c := req.Complexity; c < 1 || c > 10 {
		return nil, errs.Invalid("complexity", "want 1 to 10, got %d", c)
	}
	if err := firstErr(
		validate.Enum("budget_mode", req.BudgetMode, true),
		validate.Enum("merge", req.Merge, true),
	); err != nil {
		return nil, err
	}
	if n := req.TaskTokens; n < 0 || n > maxTaskTokens {
		return nil, errs.Invalid("task_tokens", "want 0 (%d) to %d, got %d", defaultTaskTokens, maxTaskTokens, n)
	}
	n := req.TaskTokens
	if n == 0 {
		n = defaultTaskTokens
	}
	return s.estimate(ctx, req.Complexity, req.BudgetMode, n, req.Merge)
}

// estimate prices the team of a complexity: each role on the model its tier selects, its
// input the task's tokens, its prompt's own and its dependencies' outputs at their caps;
// its output a short answer (a fifth of its cap) for the lower bound and its cap for the
// upper one. Priced as EstimateCost prices (registry.Price). The AI merge, when asked,
// reads the task and every role's output at its cap.
func (s *AIServer) estimate(ctx context.Context, complexity int32, mode aiv1.BudgetMode, taskTokens int64, merge aiv1.MergeStrategy) (*aiv1.EstimateSubAgentCostResponse, error) {
	out := &aiv1.EstimateSubAgentCostResponse{}
	members := team(complexity)
	if len(members) == 0 {
		return out, nil
	}
	models := map[int32]*aiv1.Model{}
	modelAt := func(tier int32) (*aiv1.Model, error) {
		if m, ok := models[tier]; ok {
			return m, nil
		}
		cands, err := s.eng.TierCandidates(ctx, tier)
		if err != nil {
			return nil, err
		}
		models[tier] = cands[0].Model
		return cands[0].Model, nil
	}
	overhead, err := subAgentOverheads()
	if err != nil {
		return nil, err
	}
	var allCaps int64
	for _, m := range members {
		model, err := modelAt(roleTier(m.role, mode))
		if err != nil {
			return nil, err
		}
		in := taskTokens + overhead[m.role]
		for _, d := range m.deps {
			in += int64(prompts.SubAgentMaxTokens(d))
		}
		limit := int64(prompts.SubAgentMaxTokens(m.role))
		allCaps += limit
		e := &aiv1.SubAgentEstimate{
			Role: m.role, Model: model.GetId(), Tier: model.GetTier(), DependsOn: m.deps, MaxOutputTokens: int32(limit),
			MinCostMicros: registry.Price(model, in, shortAnswer(limit), 0, 0).Total,
			MaxCostMicros: registry.Price(model, in, limit, 0, 0).Total,
		}
		out.Team = append(out.Team, e)
		out.MinCostMicros += e.MinCostMicros
		out.MaxCostMicros += e.MaxCostMicros
	}
	if merge == aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE {
		model, err := modelAt(mergeTier)
		if err != nil {
			return nil, err
		}
		in := taskTokens + overhead[aiv1.SubAgentRole_SUB_AGENT_ROLE_UNSPECIFIED] + allCaps
		out.MinCostMicros += registry.Price(model, in, shortAnswer(prompts.MergeMaxTokens), 0, 0).Total
		out.MaxCostMicros += registry.Price(model, in, prompts.MergeMaxTokens, 0, 0).Total
	}
	return out, nil
}

// shortAnswer is the output of a short answer under a cap: a fifth of it.
func shortAnswer(limit int64) int64 { return limit / 5 }

// subAgentOverheads are the tokens each role's prompt has besides what it reads (its
// instructions and answer format), and under UNSPECIFIED the merge's: counted once from
// prompts built for an empty request.
var subAgentOverheads = sync.OnceValues(func() (map[aiv1.SubAgentRole]int64, error) {
	out := map[aiv1.SubAgentRole]int64{}
	empty := &aiv1.RunSubAgentsRequest{Task: &aiv1.TaskSpec{}}
	for r := range aiv1.SubAgentRole_name {
		role := aiv1.SubAgentRole(r)
		var p *prompts.Prompt
		var err error
		if role == aiv1.SubAgentRole_SUB_AGENT_ROLE_UNSPECIFIED {
			p, err = prompts.MergeSubAgents(empty.Task, nil)
		} else {
			p, err = prompts.SubAgent(empty, role, nil)
		}
		if err != nil {
			return nil, fmt.Errorf("sub-agent prompt of %v: %w", role, err)
		}
		out[role] = int64(p.FixedTokens(tokens.Count))
	}
	return out, nil
})

// contextTokens is the merged context's cap.
func contextTokens(req *aiv1.RunSubAgentsRequest) int {
	if req.MaxContextTokens == 0 {
		return defaultContextTokens
	}
	return int(req.MaxContextTokens)
}
