package service

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/loop"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// reviews implements ReviewService.
type reviews struct {
	agentv1.UnimplementedReviewServiceServer
	s *Server
}

var _ agentv1.ReviewServiceServer = (*reviews)(nil)

// GetReview returns one of the caller's reviews with its files.
func (v *reviews) GetReview(ctx context.Context, req *agentv1.GetReviewRequest) (*agentv1.GetReviewResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	r, err := v.s.store.GetReview(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &agentv1.GetReviewResponse{Review: r}, nil
}

// ListReviews lists the caller's reviews, newest first.
func (v *reviews) ListReviews(ctx context.Context, req *agentv1.ListReviewsRequest) (*agentv1.ListReviewsResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	f := store.ReviewFilter{Statuses: req.Statuses}
	if f.JobID, err = validate.UUID("job_id", req.JobId, false); err != nil {
		return nil, err
	}
	if f.TaskID, err = validate.UUID("task_id", req.TaskId, false); err != nil {
		return nil, err
	}
	if f.ProjectID, err = validate.UUID("project_id", req.ProjectId, false); err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.Repo, false); err != nil {
		return nil, err
	}
	f.Repo = req.Repo
	for i, st := range req.Statuses {
		if err := validate.Enum(fmt.Sprintf("statuses[%d]", i), st, false); err != nil {
			return nil, err
		}
	}
	size, err := validate.PageSize(req.PageSize, 50, 200)
	if err != nil {
		return nil, err
	}
	rs, next, err := v.s.store.ListReviews(ctx, owner, f, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	return &agentv1.ListReviewsResponse{Reviews: rs, NextPageToken: next}, nil
}

// project returns the caller and the project of review id when it is a project's review
// ("" for a job's review).
func (v *reviews) project(ctx context.Context, id string) (owner, project string, err error) {
	if owner, err = caller(ctx); err != nil {
		return "", "", err
	}
	_, project, err = v.s.store.ReviewOf(ctx, owner, id)
	return owner, project, err
}

// decide applies a decision to the caller's review id: check sees the review and its job
// (and may say the decision was already made: noop), then decide changes both.
func (v *reviews) decide(ctx context.Context, id, what string,
	decide func(rec *store.Record, r *agentv1.Review) (store.Step, error),
	alreadyDone agentv1.ReviewStatus) (*store.Record, *agentv1.Review, bool, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	return v.decideAs(ctx, owner, id, what, decide, alreadyDone)
}

// decideAs is decide for owner's review id.
func (v *reviews) decideAs(ctx context.Context, owner, id, what string,
	decide func(rec *store.Record, r *agentv1.Review) (store.Step, error),
	alreadyDone agentv1.ReviewStatus) (*store.Record, *agentv1.Review, bool, error) {
	jobID, _, err := v.s.store.ReviewOf(ctx, owner, id)
	if err != nil {
		return nil, nil, false, err
	}
	var (
		review *agentv1.Review
		noop   bool
	)
	rec, err := v.s.store.Mutate(ctx, owner, jobID, func(ctx context.Context, tx pgx.Tx, rec *store.Record) (store.Step, error) {
		r, err := store.LoadReview(ctx, tx, id)
		if err != nil {
			return store.Step{}, err
		}
		review = r
		if alreadyDone != agentv1.ReviewStatus_REVIEW_STATUS_UNSPECIFIED && r.Status == alreadyDone {
			// A retry of a decision already made writes nothing: no second run is handed
			// the job, and the run that carries the decision keeps its lease.
			noop = true
			return store.Step{Unchanged: true}, nil
		}
		if r.Status != agentv1.ReviewStatus_REVIEW_STATUS_PENDING {
			return store.Step{}, errs.Precondition("review %s is %s; %s needs a pending review", id, store.ReviewStatusName(r.Status), what)
		}
		if rec.Job.Status != agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW || rec.Job.ReviewId != id {
			return store.Step{}, errs.Precondition("review %s is no longer the one its job %s waits on (job is %s)", id, rec.Job.Id, store.StatusName(rec.Job.Status))
		}
		st, err := decide(rec, r)
		if err != nil {
			return store.Step{}, err
		}
		r.DecideTime = timestamppb.Now()
		st.After = func(ctx context.Context, tx pgx.Tx) error { return store.UpdateReview(ctx, tx, r) }
		return st, nil
	}, v.s.o.Queue.Enqueue)
	if err != nil {
		return nil, nil, false, err
	}
	return rec, review, noop, nil
}

// ApproveReview approves a pending review: the job goes on to open the pull request.
func (v *reviews) ApproveReview(ctx context.Context, req *agentv1.ApproveReviewRequest) (*agentv1.ApproveReviewResponse, error) {
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	if err := validate.MaxLen("comment", req.Comment, maxText); err != nil {
		return nil, err
	}
	if owner, pid, err := v.project(ctx, id); err != nil || pid != "" {
		if err != nil {
			return nil, err
		}
		r, err := v.s.projects.approveProject(ctx, owner, pid, id, req.Comment)
		if err != nil {
			return nil, err
		}
		return &agentv1.ApproveReviewResponse{Review: r}, nil
	}
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	r, err := v.approveJob(ctx, owner, id, req.Comment)
	if err != nil {
		return nil, err
	}
	return &agentv1.ApproveReviewResponse{Review: r}, nil
}

// ApproveAs approves owner's job review id as ApproveReview does: a crew's AUTO merge
// policy decides on its owner's behalf.
func (s *Server) ApproveAs(ctx context.Context, owner, id, comment string) error {
	_, err := (&reviews{s: s}).approveJob(ctx, owner, id, comment)
	return err
}

// approveJob approves owner's pending job review id.
func (v *reviews) approveJob(ctx context.Context, owner, id, comment string) (*agentv1.Review, error) {
	_, r, _, err := v.decideAs(ctx, owner, id, "ApproveReview", func(rec *store.Record, r *agentv1.Review) (store.Step, error) {
		r.Status, r.Feedback = agentv1.ReviewStatus_REVIEW_STATUS_APPROVED, comment
		j := rec.Job
		prevPhase := j.Phase
		j.Phase = agentv1.JobPhase_JOB_PHASE_COMPLETING
		st := v.s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_RUNNING, "review approved", "review_approved", map[string]any{"review_id": id})
		st.Events = append(st.Events, store.PhaseEvent(prevPhase, j))
		return st, nil
	}, agentv1.ReviewStatus_REVIEW_STATUS_APPROVED)
	return r, err
}

// RequestChanges sends a pending review back with feedback: the job runs again.
func (v *reviews) RequestChanges(ctx context.Context, req *agentv1.RequestChangesRequest) (*agentv1.RequestChangesResponse, error) {
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	feedback, err := validate.RequiredText("feedback", req.Feedback, maxText)
	if err != nil {
		return nil, err
	}
	for i, t := range req.ProjectTaskIds {
		if strings.TrimSpace(t) == "" || len(t) > 64 {
			return nil, errs.Invalid(fmt.Sprintf("project_task_ids[%d]", i), "must be a project task id (1–64 characters)")
		}
	}
	if owner, pid, err := v.project(ctx, id); err != nil || pid != "" {
		if err != nil {
			return nil, err
		}
		r, err := v.s.projects.changesProject(ctx, owner, pid, id, feedback, req.ProjectTaskIds)
		if err != nil {
			return nil, err
		}
		return &agentv1.RequestChangesResponse{Review: r}, nil
	}
	if len(req.ProjectTaskIds) > 0 {
		return nil, errs.Invalid("project_task_ids", "only for a project's review; this is a job's review")
	}
	rec, r, _, err := v.decide(ctx, id, "RequestChanges", func(rec *store.Record, r *agentv1.Review) (store.Step, error) {
		r.Status, r.Feedback = agentv1.ReviewStatus_REVIEW_STATUS_CHANGES_REQUESTED, feedback
		j := rec.Job
		rec.Context.Feedback = feedback
		rec.State.PreviousReview = id
		loop.Restart(rec)
		prevPhase := j.Phase
		j.Phase = agentv1.JobPhase_JOB_PHASE_PLANNING
		st := v.s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_RUNNING, "changes requested", "review_changes_requested",
			map[string]any{"review_id": id, "feedback": validate.Truncate(feedback, 1000)})
		st.Events = append(st.Events, store.PhaseEvent(prevPhase, j))
		return st, nil
	}, agentv1.ReviewStatus_REVIEW_STATUS_UNSPECIFIED)
	if err != nil {
		return nil, err
	}
	v.s.setTask(ctx, rec.Job.TaskId, tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS, "")
	return &agentv1.RequestChangesResponse{Review: r}, nil
}

// RejectReview rejects a pending review: the job ends and the task returns to the backlog.
func (v *reviews) RejectReview(ctx context.Context, req *agentv1.RejectReviewRequest) (*agentv1.RejectReviewResponse, error) {
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	reason, err := reasonOr(req.Reason, "rejected")
	if err != nil {
		return nil, err
	}
	if owner, pid, err := v.project(ctx, id); err != nil || pid != "" {
		if err != nil {
			return nil, err
		}
		r, err := v.s.projects.rejectProject(ctx, owner, pid, id, reason)
		if err != nil {
			return nil, err
		}
		return &agentv1.RejectReviewResponse{Review: r}, nil
	}
	rec, r, _, err := v.decide(ctx, id, "RejectReview", func(rec *store.Record, r *agentv1.Review) (store.Step, error) {
		r.Status, r.Feedback = agentv1.ReviewStatus_REVIEW_STATUS_REJECTED, req.Reason
		return v.s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_REJECTED, "review rejected: "+reason, "review_rejected", map[string]any{"review_id": id}), nil
	}, agentv1.ReviewStatus_REVIEW_STATUS_UNSPECIFIED)
	if err != nil {
		return nil, err
	}
	s := v.s
	s.release(ctx, rec.Job, tasksv1.TaskStatus_TASK_STATUS_BACKLOG, "review rejected: "+reason)
	return &agentv1.RejectReviewResponse{Review: r}, nil
}
