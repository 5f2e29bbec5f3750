package eval

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// fakeAgent is an agent of one job: WatchJob replays events (after the cursor asked for),
// GetJob answers job.
type fakeAgent struct {
	agentv1.UnimplementedAgentServiceServer
	events []*agentv1.WatchJobResponse
	job    *agentv1.Job
	// breakAfter > 0: the first stream fails UNAVAILABLE after that many events (a restart).
	breakAfter int
	// end: the stream ends after the events (a finished job); else it stays open.
	end bool

	mu     sync.Mutex
	afters []int64
}

func (f *fakeAgent) WatchJob(req *agentv1.WatchJobRequest, s grpc.ServerStreamingServer[agentv1.WatchJobResponse]) error {
	if req.GetId() != f.job.GetId() {
		return status.Error(codes.NotFound, "no such job")
	}
	f.mu.Lock()
	f.afters = append(f.afters, req.GetAfterId())
	first := len(f.afters) == 1
	f.mu.Unlock()
	if err := s.Send(heartbeat(0, false)); err != nil {
		return err
	}
	sent := 0
	for _, ev := range f.events {
		if ev.GetId() <= req.GetAfterId() {
			continue
		}
		if first && f.breakAfter > 0 && sent == f.breakAfter {
			return status.Error(codes.Unavailable, "the agent is restarting")
		}
		if err := s.Send(ev); err != nil {
			return err
		}
		sent++
	}
	if f.end {
		return s.Send(heartbeat(f.events[len(f.events)-1].GetId(), true))
	}
	<-s.Context().Done()
	return nil
}

func (f *fakeAgent) GetJob(_ context.Context, req *agentv1.GetJobRequest) (*agentv1.GetJobResponse, error) {
	if req.GetId() != f.job.GetId() {
		return nil, status.Error(codes.NotFound, "no such job")
	}
	return &agentv1.GetJobResponse{Job: f.job}, nil
}

func heartbeat(cursor int64, end bool) *agentv1.WatchJobResponse {
	return &agentv1.WatchJobResponse{Payload: &agentv1.WatchJobResponse_Heartbeat{Heartbeat: &typev1.Heartbeat{Cursor: cursor, End: end}}}
}

func statusEvent(id int64, s agentv1.JobStatus) *agentv1.WatchJobResponse {
	return &agentv1.WatchJobResponse{Id: id, JobId: "job-1", Type: agentv1.JobEventType_JOB_EVENT_TYPE_STATUS_CHANGED,
		Payload: &agentv1.WatchJobResponse_StatusChange{StatusChange: &agentv1.JobStatusChange{Status: s}}}
}

func phaseEvent(id int64, p agentv1.JobPhase, attempt int32) *agentv1.WatchJobResponse {
	return &agentv1.WatchJobResponse{Id: id, JobId: "job-1", Type: agentv1.JobEventType_JOB_EVENT_TYPE_PHASE_CHANGED,
		Payload: &agentv1.WatchJobResponse_PhaseChanged{PhaseChanged: &agentv1.JobPhaseChange{Phase: p, Attempt: attempt}}}
}

func thoughtEvent(id int64) *agentv1.WatchJobResponse {
	return &agentv1.WatchJobResponse{Id: id, JobId: "job-1", Type: agentv1.JobEventType_JOB_EVENT_TYPE_THOUGHT,
		Payload: &agentv1.WatchJobResponse_Thought{Thought: &agentv1.JobThought{Text: "reading the repository"}}}
}

// toReview is a job's way to its review: started, context, a thought, building, review.
var toReview = []*agentv1.WatchJobResponse{
	statusEvent(1, agentv1.JobStatus_JOB_STATUS_RUNNING),
	phaseEvent(2, agentv1.JobPhase_JOB_PHASE_CONTEXT, 1),
	thoughtEvent(3),
	phaseEvent(4, agentv1.JobPhase_JOB_PHASE_BUILDING, 1),
	phaseEvent(5, agentv1.JobPhase_JOB_PHASE_REVIEWING, 1),
	statusEvent(6, agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW),
}

// startFakeAgent serves f behind the real server and returns a runner whose client calls it.
func startFakeAgent(t *testing.T, f *fakeAgent) *Runner {
	t.Helper()
	env := grpctest.Start(t, func(s *grpc.Server) { agentv1.RegisterAgentServiceServer(s, f) })
	tok, _, err := env.Signer.Issue("admin", []string{auth.RoleAdmin}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Config{Token: tok, Addrs: map[string]string{"agent": env.Conn.Target()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &Runner{Client: c}
}

func TestWaitJobFollowsTheJobsEvents(t *testing.T) {
	t.Parallel()
	const fromStart = "QUEUED  (attempt 0)|RUNNING  (attempt 0)|RUNNING CONTEXT (attempt 1)|RUNNING BUILDING (attempt 1)|" +
		"RUNNING REVIEWING (attempt 1)|"
	atReview := &agentv1.Job{Id: "job-1", Status: agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW, Phase: agentv1.JobPhase_JOB_PHASE_REVIEWING,
		Attempt: 1, ReviewId: "review-1"}
	failed := &agentv1.Job{Id: "job-1", Status: agentv1.JobStatus_JOB_STATUS_FAILED, Phase: agentv1.JobPhase_JOB_PHASE_BUILDING, Attempt: 2,
		Error: "attempts spent", LastDiagnosis: &agentv1.Diagnosis{Category: agentv1.DiagnosisCategory_DIAGNOSIS_CATEGORY_IMPLEMENTATION_ERROR, Reason: "the test still fails"}}
	building := &agentv1.Job{Id: "job-1", Status: agentv1.JobStatus_JOB_STATUS_RUNNING, Phase: agentv1.JobPhase_JOB_PHASE_BUILDING, Attempt: 1}
	cases := []struct {
		name  string
		agent *fakeAgent
		limit time.Duration
		// want: the progress lines, the cursors the streams were opened after, the job's
		// review (when it reached it) or the reason given for it.
		lines      string
		afters     []int64
		review     string
		wantReason string
	}{
		{name: "to the review", agent: &fakeAgent{events: toReview, job: atReview},
			lines: fromStart + "PENDING_REVIEW REVIEWING (attempt 1)", afters: []int64{0}, review: "review-1"},
		{name: "through an agent restart", agent: &fakeAgent{events: toReview, job: atReview, breakAfter: 3},
			lines: fromStart + "PENDING_REVIEW REVIEWING (attempt 1)", afters: []int64{0, 3}, review: "review-1"},
		{name: "to a failure", agent: &fakeAgent{job: failed, end: true, events: []*agentv1.WatchJobResponse{
			statusEvent(1, agentv1.JobStatus_JOB_STATUS_RUNNING), phaseEvent(2, agentv1.JobPhase_JOB_PHASE_BUILDING, 2),
			statusEvent(3, agentv1.JobStatus_JOB_STATUS_FAILED)}},
			lines: "QUEUED  (attempt 0)|RUNNING  (attempt 0)|RUNNING BUILDING (attempt 2)|FAILED BUILDING (attempt 2)", afters: []int64{0},
			wantReason: "job FAILED: attempts spent (last diagnosis IMPLEMENTATION_ERROR: the test still fails)"},
		{name: "stream ends with the job", agent: &fakeAgent{job: failed, end: true, events: []*agentv1.WatchJobResponse{thoughtEvent(1)}},
			lines: "QUEUED  (attempt 0)", afters: []int64{0},
			wantReason: "job FAILED: attempts spent (last diagnosis IMPLEMENTATION_ERROR: the test still fails)"},
		{name: "past the limit", agent: &fakeAgent{job: building, events: toReview[:4]}, limit: 300 * time.Millisecond,
			lines: "QUEUED  (attempt 0)|RUNNING  (attempt 0)|RUNNING CONTEXT (attempt 1)|RUNNING BUILDING (attempt 1)", afters: []int64{0},
			wantReason: "job stopped waiting in RUNNING BUILDING: job job-1 is still JOB_STATUS_RUNNING (JOB_PHASE_BUILDING) after 300ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := startFakeAgent(t, tc.agent)
			limit := tc.limit
			if limit == 0 {
				limit = 30 * time.Second
			}
			var lines []string
			job, err := r.waitJob(t.Context(), &agentv1.Job{Id: "job-1", Status: agentv1.JobStatus_JOB_STATUS_QUEUED},
				agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW, limit, func(j *agentv1.Job) {
					lines = append(lines, fmt.Sprintf("%s %s (attempt %d)", short(j.GetStatus()), short(j.GetPhase()), j.GetAttempt()))
				})
			if got := strings.Join(lines, "|"); got != tc.lines {
				t.Errorf("progress\n got %s\nwant %s", got, tc.lines)
			}
			tc.agent.mu.Lock()
			afters := slices.Clone(tc.agent.afters)
			tc.agent.mu.Unlock()
			if !slices.Equal(afters, tc.afters) {
				t.Errorf("streams opened after %v, want %v", afters, tc.afters)
			}
			if tc.wantReason == "" {
				if err != nil || job.GetReviewId() != tc.review {
					t.Fatalf("got %v, %v; want review %s", job, err, tc.review)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %v without an error", job)
			}
			if got := jobReason(job, err); got != tc.wantReason {
				t.Errorf("reason\n got %s\nwant %s", got, tc.wantReason)
			}
		})
	}
}

func TestWaitJobOfAnUnknownJobIsTheHarnesss(t *testing.T) {
	t.Parallel()
	r := startFakeAgent(t, &fakeAgent{job: &agentv1.Job{Id: "job-1"}})
	job, err := r.waitJob(t.Context(), &agentv1.Job{Id: "job-2"}, agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW, time.Minute, func(*agentv1.Job) {})
	if job != nil || err == nil {
		t.Fatalf("got %v, %v", job, err)
	}
	if got := jobReason(job, err); !strings.HasPrefix(got, "harness: ") {
		t.Errorf("reason %q", got)
	}
}
