package loop

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// The planning phase: confidence, complexity, splitting and the plan.

// confidence asks whether the task is clear enough: proceed, ask, or break it down.
func (r *run) confidence(ctx context.Context) error {
	j, c := r.job(), r.rec.Context
	if j.ProjectId != "" {
		// A project's task is an atomic task of a plan a person confirmed, and a project
		// job never waits for a person: nothing to ask, nothing to break down.
		r.setPhase(phaseComplex)
		return nil
	}
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.AssessConfidence(mctx, &aiv1.AssessConfidenceRequest{
		RequestId: r.key("confidence", shortHash(j.ClarificationAnswer)), Task: c.Task, ProjectTree: c.ProjectTree,
		ContextFiles: c.ContextFiles, Memories: c.Memories, Model: r.modelChoice(), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_CONFIDENCE),
	})
	if err != nil {
		return err
	}
	r.spend(resp.Usage)
	switch resp.Decision {
	case aiv1.ConfidenceDecision_CONFIDENCE_DECISION_CLARIFY:
		q := strings.Join(resp.Questions, "\n")
		if q == "" {
			q = resp.Reasoning
		}
		j.ClarificationQuestion, j.ClarificationAnswer = q, ""
		r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_CLARIFICATION_REQUESTED,
			Payload: &agentv1.WatchJobResponse_ClarificationRequested{ClarificationRequested: &agentv1.ClarificationRequested{Question: q}}})
		r.setStatus(waitingAnswer, "waiting for an answer: "+truncate(q, 500))
		return nil
	case aiv1.ConfidenceDecision_CONFIDENCE_DECISION_BREAK_DOWN:
		if len(resp.SuggestedSubtasks) > 0 {
			return r.split(ctx, "confidence", resp.SuggestedSubtasks, resp.Reasoning)
		}
	}
	r.thought("confidence %d%%: %s", resp.Confidence, truncate(resp.Reasoning, 300))
	r.setPhase(phaseComplex)
	return nil
}

// split replaces the task by subtasks (blocked-by links among them kept): the job ends
// COMPLETED pointing at them and the task is blocked on them.
func (r *run) split(ctx context.Context, why string, proposals []*aiv1.TaskProposal, reason string) error {
	j := r.job()
	req := &tasksv1.BatchCreateTasksRequest{RequestId: r.key("subtasks", why)}
	for i, p := range proposals {
		k := p.Key
		if k == "" {
			k = fmt.Sprintf("t%d", i+1)
		}
		req.Tasks = append(req.Tasks, &tasksv1.BatchTask{Key: k, BlockedByKeys: p.DependsOn, Task: &tasksv1.CreateTaskRequest{
			Title: truncate(p.Title, 200), Description: p.Description, Repo: j.Repo, ParentId: j.TaskId, Source: tasksv1.TaskSource_TASK_SOURCE_API,
		}})
	}
	start := time.Now()
	resp, err := r.e.c.Tasks.BatchCreateTasks(ctx, req)
	r.audit("subtasks_created", r.key("subtasks", why), map[string]any{"count": len(proposals), "why": why}, err, time.Since(start))
	if err != nil {
		return err
	}
	j.SubtaskIds = j.SubtaskIds[:0]
	for _, t := range resp.Tasks {
		j.SubtaskIds = append(j.SubtaskIds, t.Id)
	}
	r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_SUBTASKS_CREATED,
		Payload: &agentv1.WatchJobResponse_SubtasksCreated{SubtasksCreated: &agentv1.SubtasksCreated{TaskIds: j.SubtaskIds}}})
	msg := fmt.Sprintf("broken down into %d subtasks: %s", len(j.SubtaskIds), truncate(reason, 500))
	r.cleanup(ctx, tasksv1.TaskStatus_TASK_STATUS_BLOCKED, msg)
	r.setStatus(completed, msg)
	return nil
}

// complexity rates the task and selects the model (unless the job names one).
func (r *run) complexity(ctx context.Context) error {
	j, c := r.job(), r.rec.Context
	task, mk, err := r.task(ctx)
	if err != nil {
		return err
	}
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.AssessComplexity(mctx, &aiv1.AssessComplexityRequest{
		RequestId: r.key("complexity") + mk, Task: task, ProjectTree: c.ProjectTree, ContextFiles: c.ContextFiles,
		Model: r.modelChoice(), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_COMPLEXITY),
	})
	if err != nil {
		return err
	}
	r.spend(resp.Usage)
	j.Complexity = resp.Complexity
	if coding := j.GetPreferences().GetDefaultModels()["coding"]; j.Model == "" && coding != "" {
		j.Model = coding
		r.thought("complexity %d: model %s (the owner's default for coding)", j.Complexity, j.Model)
	}
	if j.Model == "" && r.e.c.Models != nil {
		mode := resp.BudgetMode
		if m := r.budgetMode(); m != aiv1.BudgetMode_BUDGET_MODE_UNSPECIFIED {
			mode = m // the owner's choice over the assessment's suggestion
		}
		sel, err := r.e.c.Models.SelectModel(ctx, &aiv1.SelectModelRequest{Complexity: resp.Complexity, Tags: resp.Tags, BudgetMode: mode})
		switch {
		case err == nil:
			j.Model = sel.GetModel().GetId()
			r.thought("complexity %d: model %s (%s)", j.Complexity, j.Model, truncate(sel.GetReason(), 200))
		case status.Code(err) == codes.NotFound || status.Code(err) == codes.FailedPrecondition:
			// No model fits: the ai service chooses per call.
			r.thought("complexity %d: no model in the registry fits; the ai service chooses per call", j.Complexity)
		default:
			return err
		}
	}
	if j.Attempt == 0 {
		j.Attempt = 1
	}
	if r.wantsSubAgents() {
		r.setPhase(phaseSubAgents)
		return nil
	}
	r.setPhase(phasePlanning)
	return nil
}

// plan asks for a plan, or a revised one (after bad_plan, missing_context, feedback).
func (r *run) plan(ctx context.Context) error {
	j, st := r.job(), &r.rec.State
	if st.MoreContext {
		before := len(r.rec.Context.ContextFiles)
		if err := r.relevantFiles(ctx, st.ContextRequests); err != nil {
			return err
		}
		query := r.taskText()
		if d := j.LastDiagnosis; d != nil {
			query += "\n" + d.Reason
		}
		if err := r.withoutMemory(ctx, r.memories(ctx, query), "more memories"); err != nil {
			return err
		}
		st.MoreContext, st.ContextRequests = false, nil
		r.thought("more context: %d files now (%d new)", len(r.rec.Context.ContextFiles), len(r.rec.Context.ContextFiles)-before)
	}
	req := proto.CloneOf(r.rec.Context)
	task, mk, err := r.task(ctx)
	if err != nil {
		return err
	}
	req.Task = task
	req.RequestId = r.key("plan", j.Attempt, j.PlanRevisions) + mk
	req.Model, req.Attribution = r.modelChoice(), r.attribution(aiv1.CallPhase_CALL_PHASE_PLANNING)
	start := time.Now()
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.PlanTask(mctx, req)
	if err != nil {
		return err
	}
	r.spend(resp.Usage)
	if len(resp.GetPlan().GetSteps()) == 0 {
		return status.Error(codes.FailedPrecondition, "the plan has no steps")
	}
	typ := agentv1.JobEventType_JOB_EVENT_TYPE_PLAN_CREATED
	if j.Plan != nil {
		typ = agentv1.JobEventType_JOB_EVENT_TYPE_PLAN_REVISED
	}
	j.Plan = resp.Plan
	r.rec.Context.PreviousPlan = nil
	r.emit(&agentv1.WatchJobResponse{Type: typ, Payload: &agentv1.WatchJobResponse_Plan{Plan: &agentv1.JobPlanChange{Revision: j.PlanRevisions, Plan: j.Plan}}})
	r.audit("plan_created", r.key("plan", j.Attempt, j.PlanRevisions), map[string]any{"steps": len(j.Plan.Steps), "summary": truncate(j.Plan.Summary, 500),
		"revision": j.PlanRevisions, "attempt": j.Attempt}, nil, time.Since(start))
	r.setPhase(phaseSandbox)
	return nil
}
