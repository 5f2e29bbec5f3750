package loop

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/agent/internal/learn"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// Recovery: diagnosing a failure, choosing a recovery, intervening and restarting.

// Limits on the failed code a diagnosis sees.
const (
	maxFailedFiles     = 10
	maxFailedFileBytes = 64 << 10
)

// failedFiles is what the diagnosis looks at: the files the errors point at, as the failed
// attempt left them in its sandbox (at most maxFailedFiles, each cut to
// maxFailedFileBytes), then the context files of the base branch not among them. A file the
// sandbox no longer has (deleted, or the sandbox gone) is left out.
func (r *run) failedFiles(ctx context.Context, diags []*typev1.Diagnostic) []*aiv1.ContextFile {
	var out []*aiv1.ContextFile
	seen := map[string]bool{}
	if sb := r.job().SandboxId; sb != "" && r.e.c.Sandbox != nil {
		for _, d := range diags {
			p := d.GetPath()
			if p == "" || seen[p] || len(out) == maxFailedFiles {
				continue
			}
			seen[p] = true
			rf, err := r.e.c.Sandbox.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: sb, Path: p})
			if err != nil {
				continue
			}
			content, cut := string(rf.Content), false
			if len(content) > maxFailedFileBytes {
				content, cut = truncate(content, maxFailedFileBytes), true
			}
			out = append(out, &aiv1.ContextFile{Path: p, Content: content, Truncated: cut})
		}
	}
	for _, f := range r.rec.Context.ContextFiles {
		if !seen[f.GetPath()] && len(out) < 200 {
			out = append(out, f)
		}
	}
	return out
}

// nextAttempt starts the next attempt of the current run.
func (r *run) nextAttempt() {
	r.job().Attempt++
	r.job().BuildId = ""
}

// diagnose asks why the attempt failed and acts on the category.
func (r *run) diagnose(ctx context.Context) error {
	j, c, st := r.job(), r.rec.Context, &r.rec.State
	last := c.PreviousAttempts[len(c.PreviousAttempts)-1]
	task, mk, err := r.task(ctx)
	if err != nil {
		return err
	}
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.DiagnoseFailure(mctx, &aiv1.DiagnoseFailureRequest{
		RequestId: r.key("diagnose", j.Attempt) + mk, Task: task, Plan: j.Plan, Errors: last.Errors, ErrorOutput: last.Error,
		Attempts: c.PreviousAttempts, Files: r.failedFiles(ctx, last.Errors), Model: r.modelChoice(),
		Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_DIAGNOSIS),
	})
	if err != nil {
		return err
	}
	r.spend(resp.Usage)
	last.Category, last.Diagnosis = resp.Category, resp.Reason
	if rec := strings.TrimSpace(resp.RecommendedRecovery); rec != "" {
		// The next planning reads the attempts: the recommendation goes with the reason.
		last.Diagnosis += "\nRecommended recovery: " + truncate(rec, 4000)
	}
	st.Failures++
	st.Attempts++
	d := &agentv1.Diagnosis{Category: agentv1.DiagnosisCategory(resp.Category), Reason: resp.Reason, Attempt: j.Attempt, CreateTime: timestamppb.Now(),
		RecommendedRecovery: truncate(resp.RecommendedRecovery, 4000)}
	j.LastDiagnosis = d
	stalled := learn.Stalled(st.Fingerprints)
	switch {
	case resp.Category == aiv1.FailureCategory_FAILURE_CATEGORY_IMPOSSIBLE_TASK:
		d.Recovery = "escalated: the task cannot be done as asked"
		r.human("impossible task: " + resp.Reason)
		r.cleanup(ctx, tasksv1.TaskStatus_TASK_STATUS_BLOCKED, "impossible task: "+resp.Reason)
	case stalled || st.Failures >= r.e.cfg.InterveneAfter || int(j.Attempt) >= r.e.cfg.MaxAttempts:
		why := fmt.Sprintf("%d failed attempts", st.Failures)
		if stalled {
			why = "no progress: two attempts in a row failed the same way"
		} else if int(j.Attempt) >= r.e.cfg.MaxAttempts {
			why = fmt.Sprintf("all %d attempts spent", r.e.cfg.MaxAttempts)
		}
		if !st.Intervened {
			d.Recovery = why + "; intervening"
			r.setPhase(phaseIntervene)
		} else {
			d.Recovery = why + "; escalated"
			r.human(why + ": " + resp.Reason)
		}
	default:
		d.Recovery = r.recover(ctx, resp)
	}
	r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_DIAGNOSED, Payload: &agentv1.WatchJobResponse_Diagnosis{Diagnosis: d}})
	r.audit("diagnosed", r.key("diagnose", j.Attempt), map[string]any{"category": d.Category.String(), "reason": truncate(d.Reason, 1000),
		"recovery": d.Recovery, "attempt": d.Attempt}, nil, 0)
	return nil
}

// recover sets up the next attempt for a recoverable diagnosis and says what it does.
func (r *run) recover(ctx context.Context, resp *aiv1.DiagnoseFailureResponse) string {
	j, st := r.job(), &r.rec.State
	switch resp.Category {
	case aiv1.FailureCategory_FAILURE_CATEGORY_BAD_PLAN:
		if int(j.PlanRevisions) < r.e.cfg.MaxPlanRevisions {
			j.PlanRevisions++
			r.rec.Context.PreviousPlan = j.Plan
			r.nextAttempt()
			r.setPhase(phasePlanning)
			return fmt.Sprintf("revising plan (revision %d of %d)", j.PlanRevisions, r.e.cfg.MaxPlanRevisions)
		}
	case aiv1.FailureCategory_FAILURE_CATEGORY_MISSING_CONTEXT:
		st.RelevantFiles = max(st.RelevantFiles, r.e.cfg.ContextFiles) + 10
		// More context is gathered at the next planning (relevantFiles with the requests).
		st.MoreContext, st.ContextRequests = true, resp.ContextRequests
		r.nextAttempt()
		r.setPhase(phasePlanning)
		return fmt.Sprintf("fetching more context (%d files, %d named) and planning again", st.RelevantFiles, len(resp.ContextRequests))
	case aiv1.FailureCategory_FAILURE_CATEGORY_ENVIRONMENT_ERROR:
		wait := max(r.e.cfg.Backoff, resp.GetRetryAfter().AsDuration())
		st.BackoffUntil = time.Now().Add(wait)
		r.nextAttempt()
		r.setPhase(phaseSandbox)
		return fmt.Sprintf("environment error: backing off %s, then retrying in a new sandbox", wait)
	}
	r.nextAttempt()
	r.setPhase(phaseSandbox)
	return fmt.Sprintf("fixing: attempt %d rebuilds with the diagnosis", j.Attempt)
}

// intervene asks what to do after repeated failures: rewrite the task (attempts start
// again, once), split it, or give up to a human.
func (r *run) intervene(ctx context.Context) error {
	j, c, st := r.job(), r.rec.Context, &r.rec.State
	task, mk, err := r.task(ctx)
	if err != nil {
		return err
	}
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.Intervene(mctx, &aiv1.InterveneRequest{RequestId: r.key("intervene", j.Attempt) + mk, Task: task, Attempts: c.PreviousAttempts,
		LastPlan: j.Plan, Model: r.modelChoice(), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_INTERVENTION)})
	if err != nil {
		return err
	}
	r.spend(resp.Usage)
	st.Intervened = true
	action := agentv1.InterventionAction(resp.Action)
	defer func() {
		r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_INTERVENED,
			Payload: &agentv1.WatchJobResponse_Intervention{Intervention: &agentv1.JobIntervention{Action: action, Reason: resp.Reason}}})
	}()
	r.audit("intervened", r.key("intervene", j.Attempt), map[string]any{"action": action.String(), "reason": truncate(resp.Reason, 1000)}, nil, 0)
	switch resp.Action {
	case aiv1.InterventionAction_INTERVENTION_ACTION_REWRITE_TASK:
		if st.Rewrites == 0 && (resp.NewTitle != "" || resp.NewDescription != "") {
			st.Rewrites++
			if resp.NewTitle != "" {
				c.Task.Title = resp.NewTitle
			}
			if resp.NewDescription != "" {
				c.Task.Description = resp.NewDescription
			}
			r.restart()
			r.thought("task rewritten: %s", truncate(resp.Reason, 300))
			r.setPhase(phasePlanning)
			return nil
		}
		action = agentv1.InterventionAction_INTERVENTION_ACTION_ESCALATE
		r.human("intervention: the task was rewritten once already and still fails: " + resp.Reason)
	case aiv1.InterventionAction_INTERVENTION_ACTION_SPLIT_TASK:
		if len(resp.Subtasks) > 0 && j.ProjectId == "" {
			return r.split(ctx, "intervention", resp.Subtasks, resp.Reason)
		}
		action = agentv1.InterventionAction_INTERVENTION_ACTION_ESCALATE
		r.human("intervention wanted to split the task but proposed no subtasks: " + resp.Reason)
	default:
		r.human("intervention gave up: " + resp.Reason)
	}
	return nil
}

// restart begins a new run of attempts (a rewrite, a human's guidance, review feedback):
// new idempotency keys, counters back to the start, the last plan kept to revise.
func (r *run) restart() { Restart(r.rec) }

// Restart begins a new run of attempts on rec (see run.restart); the service calls it for
// ResumeJob and RequestChanges.
func Restart(rec *store.Record) {
	j, st := rec.Job, &rec.State
	st.Generation++
	st.Failures, st.Fingerprints, st.Intervened, st.BackoffUntil = 0, nil, false, time.Time{}
	j.Attempt, j.PlanRevisions, j.BuildId = 1, 0, ""
	if j.Plan != nil {
		rec.Context.PreviousPlan = j.Plan
	}
}
