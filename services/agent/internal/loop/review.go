package loop

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// The review gate.

// review asks for the code review and stops at the review gate (a project's job ends
// here instead: the project reviews all its tasks at once).
func (r *run) review(ctx context.Context) error {
	j, st := r.job(), &r.rec.State
	if collectOnly(j) {
		// Collect-only: the project reviews all its tasks' files at once. The task waits for
		// that review (its dependents in the project may start: see tasks' SetTaskStatus).
		if _, err := r.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: j.TaskId, Status: tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW}); err != nil {
			return err
		}
		r.setStatus(completed, "validated for the project's review")
		return nil
	}
	diff, err := r.e.c.Sandbox.Diff(ctx, &sandboxv1.DiffRequest{Id: j.SandboxId})
	if err != nil {
		return err
	}
	if len(diff.GetFiles()) == 0 {
		// (A fix of an open pull request that wrote what its branch has already.)
		r.human(fmt.Sprintf("attempt %d changed no files: there is nothing to review", j.Attempt))
		return nil
	}
	var files []*agentv1.ReviewFile
	var aiFiles []*aiv1.ReviewFile
	for _, f := range diff.Files {
		rf := &agentv1.ReviewFile{Diff: f}
		if f.Action != typev1.FileAction_FILE_ACTION_DELETE && !f.Binary {
			c, err := r.e.c.Sandbox.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: j.SandboxId, Path: f.Path})
			if err != nil {
				return err
			}
			rf.Content = string(c.Content)
		}
		files = append(files, rf)
		aiFiles = append(aiFiles, &aiv1.ReviewFile{Path: f.Path, Action: f.Action, Content: rf.Content, Diff: f.UnifiedDiff})
	}
	task, mk, err := r.task(ctx)
	if err != nil {
		return err
	}
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	rc, err := r.e.c.AI.ReviewCode(mctx, &aiv1.ReviewCodeRequest{RequestId: r.key("review", j.Attempt) + mk, Task: task, Files: aiFiles,
		ValidationSummary: fmt.Sprintf("The build validated (attempt %d); %d files changed.", j.Attempt, len(files)),
		Model:             r.modelFor("review"), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_REVIEW)})
	if err != nil {
		return err
	}
	r.spend(rc.Usage)
	st.Quality, st.ReviewMemories = rc.QualityScore, rc.MemoriesExtracted
	if _, err := r.e.c.Sandbox.KeepAliveSandbox(ctx, &sandboxv1.KeepAliveSandboxRequest{Id: j.SandboxId, Pin: true}); err != nil {
		return err
	}
	if _, err := r.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: j.TaskId, Status: tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW}); err != nil {
		return err
	}
	rev := &agentv1.Review{Id: uuid.NewString(), QualityScore: rc.QualityScore, Concerns: rc.Concerns, Documentation: rc.Documentation,
		Files: files, Stats: diff.Stats, PreviousReviewId: st.PreviousReview}
	r.step.Review, r.step.ReviewKey = rev, r.key("review", j.Attempt)
	j.ReviewId = rev.Id
	r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_REVIEW_SUBMITTED,
		Payload: &agentv1.WatchJobResponse_ReviewSubmitted{ReviewSubmitted: &agentv1.ReviewSubmitted{ReviewId: rev.Id, QualityScore: rc.QualityScore}}})
	r.audit("review_submitted", r.key("review", j.Attempt), map[string]any{"review_id": rev.Id, "quality_score": rc.QualityScore, "files": len(files)}, nil, 0)
	if revises(j) && continuesPullRequest(j) {
		// The people who asked for the changes review the pushed commit on the pull request:
		// the gate here is theirs, so the job goes on to push it.
		rev.Status = agentv1.ReviewStatus_REVIEW_STATUS_APPROVED
		rev.Feedback = fmt.Sprintf("passed on to the reviewers of pull request #%d, who asked for these changes", j.PullRequest.GetNumber())
		r.audit("review_approved", r.key("review_approved", j.Attempt), map[string]any{"review_id": rev.Id, "by": "the pull request's reviewers"}, nil, 0)
		r.thought("revision of pull request #%d reviewed (quality %d/10): pushing it to %s for its reviewers", j.PullRequest.GetNumber(), rc.QualityScore, j.Branch)
		r.setPhase(phaseComplete)
		return nil
	}
	r.setStatus(pendingReview, fmt.Sprintf("review %s waits for a decision (quality %d/10)", rev.Id, rc.QualityScore))
	return nil
}

// diagnosticsText is up to n diagnostics, one per line.
func diagnosticsText(ds []*typev1.Diagnostic, n int) string {
	var b strings.Builder
	for i, d := range ds {
		if i == n {
			fmt.Fprintf(&b, "… and %d more\n", len(ds)-n)
			break
		}
		loc := d.Path
		if d.Line > 0 {
			loc = fmt.Sprintf("%s:%d", d.Path, d.Line)
		}
		if loc != "" {
			loc += ": "
		}
		fmt.Fprintf(&b, "%s%s", loc, d.Message)
		if d.Rule != "" {
			fmt.Fprintf(&b, " (%s)", d.Rule)
		}
		b.WriteByte('\n')
	}
	return strings.TrimSpace(b.String())
}
