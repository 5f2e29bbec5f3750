package service_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/jackc/pgx/v5"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/services/agent/internal/store"
)

func (q *queue) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ids)
}

// A control with a request_id acts once: a retry of the call (also after the job came back
// to the state it acted on) answers with the job as it is and changes nothing; a new key
// acts again; a key reused for another request is refused.
func TestControlRequestIDActsOnce(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx(alice)
	j := e.job(t, alice, taskA)
	pause := func() {
		t.Helper()
		if _, err := e.agent.PauseJob(ctx, &agentv1.PauseJobRequest{Id: j.Id}); err != nil {
			t.Fatalf("pause: %v", err)
		}
	}
	resume := func(requestID string) (*agentv1.Job, error) {
		r, err := e.agent.ResumeJob(ctx, &agentv1.ResumeJobRequest{Id: j.Id, RequestId: requestID})
		return r.GetJob(), err
	}

	pause()
	queued := e.q.count()
	got, err := resume("resume-1")
	if err != nil || got.Status != agentv1.JobStatus_JOB_STATUS_QUEUED || e.q.count() != queued+1 {
		t.Fatalf("resume: %v %v (queued %d → %d)", got, err, queued, e.q.count())
	}
	again, err := resume("resume-1")
	if err != nil || again.Status != agentv1.JobStatus_JOB_STATUS_QUEUED || e.q.count() != queued+1 {
		t.Fatalf("retried resume: %v %v (queued %d → %d), want the job as it is and nothing queued", again, err, queued, e.q.count())
	}
	// Paused again by a person; the lost answer's retry arrives late and resumes nothing.
	pause()
	late, err := resume("resume-1")
	if err != nil || late.Status != agentv1.JobStatus_JOB_STATUS_PAUSED {
		t.Fatalf("late retry: %v %v, want the job still PAUSED", late, err)
	}
	_, err = e.agent.ResumeJob(ctx, &agentv1.ResumeJobRequest{Id: j.Id, RequestId: "resume-1", Guidance: "another request"})
	grpctest.WantCode(t, err, codes.InvalidArgument, "request_id")
	_, err = e.agent.RespondToClarification(ctx, &agentv1.RespondToClarificationRequest{Id: j.Id, Answer: "yes", RequestId: "resume-1"})
	grpctest.WantCode(t, err, codes.InvalidArgument, "request_id")
	if next, err := resume("resume-2"); err != nil || next.Status != agentv1.JobStatus_JOB_STATUS_QUEUED {
		t.Fatalf("a new key: %v %v", next, err)
	}

	audit, err := e.agent.ListAuditLog(ctx, &agentv1.ListAuditLogRequest{JobId: j.Id})
	if err != nil {
		t.Fatal(err)
	}
	resumed := 0
	for _, a := range audit.Entries {
		if a.Action == "job_resumed" {
			resumed++
		}
	}
	if resumed != 2 {
		t.Errorf("job_resumed %d times in the audit log, want 2", resumed)
	}

	for name, bad := range map[string]string{"with a space": "a b", "too long": strings.Repeat("r", 200)} {
		_, err := e.agent.ResumeJob(ctx, &agentv1.ResumeJobRequest{Id: j.Id, RequestId: bad})
		grpctest.WantCode(t, err, codes.InvalidArgument, "request_id")
		_, err = e.agent.RespondToClarification(ctx, &agentv1.RespondToClarificationRequest{Id: j.Id, Answer: "yes", RequestId: bad})
		grpctest.WantCode(t, err, codes.InvalidArgument, "request_id")
		_ = name
	}
}

// A retried ApproveReview (the first answer was lost) returns the approved review and
// writes nothing: no second run is handed the job, so the run carrying the approval keeps
// its lease.
func TestApproveReviewRetryChangesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx(alice)
	j := e.job(t, alice, taskA)
	// The job at the review gate, as the loop leaves it.
	rec, err := e.st.Mutate(ctx, alice, j.Id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
		rec.Job.Status = agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW
		return store.Step{Review: &agentv1.Review{QualityScore: 8}, ReviewKey: "review-1"}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reviewID := rec.Job.ReviewId
	if _, err := e.review.ApproveReview(ctx, &agentv1.ApproveReviewRequest{Id: reviewID}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	queued := e.q.count()
	before, err := e.agent.GetJob(ctx, &agentv1.GetJobRequest{Id: j.Id})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.review.ApproveReview(ctx, &agentv1.ApproveReviewRequest{Id: reviewID})
	if err != nil || again.GetReview().GetStatus() != agentv1.ReviewStatus_REVIEW_STATUS_APPROVED {
		t.Fatalf("retried approve: %v %v", again, err)
	}
	after, err := e.agent.GetJob(ctx, &agentv1.GetJobRequest{Id: j.Id})
	if err != nil {
		t.Fatal(err)
	}
	if e.q.count() != queued || !proto.Equal(before.GetJob().GetUpdateTime(), after.GetJob().GetUpdateTime()) {
		t.Fatalf("the retry wrote the job (update %v → %v) or queued a run (%d → %d)",
			before.GetJob().GetUpdateTime().AsTime(), after.GetJob().GetUpdateTime().AsTime(), queued, e.q.count())
	}
}
