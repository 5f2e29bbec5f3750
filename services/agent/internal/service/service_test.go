package service_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/agent/internal/service"
	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

const (
	alice   = "user-alice"
	bob     = "user-bob"
	missing = "00000000-0000-4000-8000-000000000000"
	taskA   = "11111111-1111-4111-8111-111111111111"
)

// queue records the runs enqueued, in the caller's transaction.
type queue struct {
	mu  sync.Mutex
	ids []string
}

func (q *queue) Enqueue(_ context.Context, tx pgx.Tx, id string) error {
	if tx == nil {
		return errors.New("no transaction")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ids = append(q.ids, id)
	return nil
}

type env struct {
	st       *store.Store
	q        *queue
	conn     *grpc.ClientConn
	agent    agentv1.AgentServiceClient
	review   agentv1.ReviewServiceClient
	projects agentv1.ProjectServiceClient
	ctx      func(user string) context.Context
}

// newEnv serves AgentService, ReviewService and ProjectService over real gRPC on a fresh
// agent schema, with at most 4 watches. The downstream clients are nil: what these tests
// call never reaches them.
func newEnv(t *testing.T) *env { return newEnvWatches(t, 4) }

// newEnvWatches is newEnv with at most maxWatches watches.
func newEnvWatches(t *testing.T, maxWatches int) *env {
	t.Helper()
	st, _ := testStore(t)
	q := &queue{}
	srv := service.New(st, service.Options{Queue: q, Heartbeat: time.Second, MaxWatches: maxWatches})
	e := grpctest.Start(t, func(s *grpc.Server) {
		agentv1.RegisterAgentServiceServer(s, srv)
		agentv1.RegisterReviewServiceServer(s, srv.Reviews())
		agentv1.RegisterProjectServiceServer(s, srv.Projects())
	})
	return &env{st: st, q: q, conn: e.Conn, agent: agentv1.NewAgentServiceClient(e.Conn), review: agentv1.NewReviewServiceClient(e.Conn),
		projects: agentv1.NewProjectServiceClient(e.Conn), ctx: func(user string) context.Context { return e.Context(t, user) }}
}

// testStore is a store over a fresh agent schema with its events hub running.
func testStore(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	hub := events.NewHub(pool, events.WithPollInterval(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = hub.Run(ctx) }()
	return store.New(pool, hub), pool
}

// job creates a QUEUED job of owner through the store (StartTask needs the tasks service).
func (e *env) job(t *testing.T, owner, task string) *agentv1.Job {
	t.Helper()
	rec, created, err := e.st.Create(context.Background(), &agentv1.Job{OwnerId: owner, TaskId: task, Repo: "local/r", BaseBranch: "main",
		Budget: &typev1.Budget{MaxTokens: 1000}}, "", nil, store.RateLimit{}, e.q.Enqueue)
	if err != nil || !created {
		t.Fatalf("create job: %v (created %v)", err, created)
	}
	return rec.Job
}

func TestMalformedInputOnEveryRPC(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx(alice)
	long := strings.Repeat("x", 20000)
	cases := []struct {
		method string
		field  string
		call   func() error
	}{
		{"StartTask", "task_id", func() error { _, err := e.agent.StartTask(ctx, &agentv1.StartTaskRequest{}); return err }},
		{"StartTask", "task_id", func() error { _, err := e.agent.StartTask(ctx, &agentv1.StartTaskRequest{TaskId: "nope"}); return err }},
		{"StartTask", "request_id", func() error {
			_, err := e.agent.StartTask(ctx, &agentv1.StartTaskRequest{TaskId: taskA, RequestId: strings.Repeat("r", 200)})
			return err
		}},
		{"StartTask", "base_branch", func() error {
			_, err := e.agent.StartTask(ctx, &agentv1.StartTaskRequest{TaskId: taskA, BaseBranch: "a..b"})
			return err
		}},
		{"StartTask", "budget.max_tokens", func() error {
			_, err := e.agent.StartTask(ctx, &agentv1.StartTaskRequest{TaskId: taskA, Budget: &typev1.Budget{MaxTokens: -1}})
			return err
		}},
		{"StartTask", "model", func() error {
			_, err := e.agent.StartTask(ctx, &agentv1.StartTaskRequest{TaskId: taskA, Model: long})
			return err
		}},
		{"GetJob", "id", func() error { _, err := e.agent.GetJob(ctx, &agentv1.GetJobRequest{Id: "x"}); return err }},
		{"ListJobs", "task_id", func() error { _, err := e.agent.ListJobs(ctx, &agentv1.ListJobsRequest{TaskId: "x"}); return err }},
		{"ListJobs", "repo", func() error { _, err := e.agent.ListJobs(ctx, &agentv1.ListJobsRequest{Repo: "no slash"}); return err }},
		{"ListJobs", "statuses[0]", func() error {
			_, err := e.agent.ListJobs(ctx, &agentv1.ListJobsRequest{Statuses: []agentv1.JobStatus{99}})
			return err
		}},
		{"ListJobs", "page_size", func() error { _, err := e.agent.ListJobs(ctx, &agentv1.ListJobsRequest{PageSize: 500}); return err }},
		{"ListJobs", "page_token", func() error {
			_, err := e.agent.ListJobs(ctx, &agentv1.ListJobsRequest{PageToken: "garbage"})
			return err
		}},
		{"CancelJob", "id", func() error { _, err := e.agent.CancelJob(ctx, &agentv1.CancelJobRequest{}); return err }},
		{"CancelJob", "reason", func() error {
			_, err := e.agent.CancelJob(ctx, &agentv1.CancelJobRequest{Id: missing, Reason: long})
			return err
		}},
		{"PauseJob", "id", func() error { _, err := e.agent.PauseJob(ctx, &agentv1.PauseJobRequest{Id: "1"}); return err }},
		{"ResumeJob", "id", func() error { _, err := e.agent.ResumeJob(ctx, &agentv1.ResumeJobRequest{}); return err }},
		{"ResumeJob", "guidance", func() error {
			_, err := e.agent.ResumeJob(ctx, &agentv1.ResumeJobRequest{Id: missing, Guidance: long})
			return err
		}},
		{"SkipTask", "id", func() error { _, err := e.agent.SkipTask(ctx, &agentv1.SkipTaskRequest{}); return err }},
		{"ResolveTask", "note", func() error { _, err := e.agent.ResolveTask(ctx, &agentv1.ResolveTaskRequest{Id: missing}); return err }},
		{"ResolveTask", "id", func() error {
			_, err := e.agent.ResolveTask(ctx, &agentv1.ResolveTaskRequest{Note: "done"})
			return err
		}},
		{"RespondToClarification", "answer", func() error {
			_, err := e.agent.RespondToClarification(ctx, &agentv1.RespondToClarificationRequest{Id: missing, Answer: "  "})
			return err
		}},
		{"RespondToClarification", "id", func() error {
			_, err := e.agent.RespondToClarification(ctx, &agentv1.RespondToClarificationRequest{Answer: "yes"})
			return err
		}},
		{"WatchJob", "id", func() error {
			s, err := e.agent.WatchJob(ctx, &agentv1.WatchJobRequest{Id: "x"})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"WatchJob", "after_id", func() error {
			s, err := e.agent.WatchJob(ctx, &agentv1.WatchJobRequest{AfterId: -1})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"GetJobMetrics", "id", func() error { _, err := e.agent.GetJobMetrics(ctx, &agentv1.GetJobMetricsRequest{}); return err }},
		{"ListAuditLog", "job_id", func() error {
			_, err := e.agent.ListAuditLog(ctx, &agentv1.ListAuditLogRequest{JobId: "x"})
			return err
		}},
		{"ListAuditLog", "action", func() error {
			_, err := e.agent.ListAuditLog(ctx, &agentv1.ListAuditLogRequest{Action: "Drop Table"})
			return err
		}},
		{"ListAuditLog", "end_time", func() error {
			now := time.Now()
			_, err := e.agent.ListAuditLog(ctx, &agentv1.ListAuditLogRequest{StartTime: timestamppb.New(now), EndTime: timestamppb.New(now.Add(-time.Hour))})
			return err
		}},
		{"ListAuditLog", "page_size", func() error {
			_, err := e.agent.ListAuditLog(ctx, &agentv1.ListAuditLogRequest{PageSize: -1})
			return err
		}},
		{"GetReview", "id", func() error { _, err := e.review.GetReview(ctx, &agentv1.GetReviewRequest{}); return err }},
		{"ListReviews", "job_id", func() error { _, err := e.review.ListReviews(ctx, &agentv1.ListReviewsRequest{JobId: "x"}); return err }},
		{"ListReviews", "statuses[0]", func() error {
			_, err := e.review.ListReviews(ctx, &agentv1.ListReviewsRequest{Statuses: []agentv1.ReviewStatus{0}})
			return err
		}},
		{"ApproveReview", "id", func() error {
			_, err := e.review.ApproveReview(ctx, &agentv1.ApproveReviewRequest{Id: "x"})
			return err
		}},
		{"RequestChanges", "feedback", func() error {
			_, err := e.review.RequestChanges(ctx, &agentv1.RequestChangesRequest{Id: missing})
			return err
		}},
		{"RequestChanges", "project_task_ids[0]", func() error {
			_, err := e.review.RequestChanges(ctx, &agentv1.RequestChangesRequest{Id: missing, Feedback: "more", ProjectTaskIds: []string{""}})
			return err
		}},
		{"RejectReview", "id", func() error { _, err := e.review.RejectReview(ctx, &agentv1.RejectReviewRequest{}); return err }},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.method+"/"+c.field, func(t *testing.T) {
			grpctest.WantInvalid(t, c.call(), c.field)
		})
		covered[c.method] = true
	}
	for _, sd := range []grpc.ServiceDesc{agentv1.AgentService_ServiceDesc, agentv1.ReviewService_ServiceDesc} {
		for _, m := range sd.Methods {
			if !covered[m.MethodName] {
				t.Errorf("%s.%s has no malformed-input case", sd.ServiceName, m.MethodName)
			}
		}
		for _, m := range sd.Streams {
			if !covered[m.StreamName] {
				t.Errorf("%s.%s has no malformed-input case", sd.ServiceName, m.StreamName)
			}
		}
	}
	// No RPC answers a caller without a token.
	_, err := e.agent.GetJob(context.Background(), &agentv1.GetJobRequest{Id: missing})
	grpctest.WantCode(t, err, codes.Unauthenticated)
}

func TestAnotherUsersJobIsNotFound(t *testing.T) {
	e := newEnv(t)
	j := e.job(t, alice, taskA)
	ctx := e.ctx(bob)
	_, err := e.agent.GetJob(ctx, &agentv1.GetJobRequest{Id: j.Id})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.agent.PauseJob(ctx, &agentv1.PauseJobRequest{Id: j.Id})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.agent.CancelJob(ctx, &agentv1.CancelJobRequest{Id: j.Id})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.agent.GetJobMetrics(ctx, &agentv1.GetJobMetricsRequest{Id: j.Id})
	grpctest.WantCode(t, err, codes.NotFound)
	list, err := e.agent.ListJobs(ctx, &agentv1.ListJobsRequest{})
	if err != nil || len(list.Jobs) != 0 {
		t.Fatalf("bob lists %v, %v", list, err)
	}
	got, err := e.agent.GetJob(e.ctx(alice), &agentv1.GetJobRequest{Id: j.Id})
	if err != nil || got.Job.Status != agentv1.JobStatus_JOB_STATUS_QUEUED {
		t.Fatalf("alice gets %v, %v", got, err)
	}
}

// The human controls check the job's status and say which it is.
func TestControlsCheckTheJobsStatus(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx(alice)
	j := e.job(t, alice, taskA)
	_, err := e.agent.SkipTask(ctx, &agentv1.SkipTaskRequest{Id: j.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "queued", "human_needed")
	_, err = e.agent.RespondToClarification(ctx, &agentv1.RespondToClarificationRequest{Id: j.Id, Answer: "yes"})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "waiting_clarification")
	p, err := e.agent.PauseJob(ctx, &agentv1.PauseJobRequest{Id: j.Id, Reason: "lunch"})
	if err != nil || p.Job.Status != agentv1.JobStatus_JOB_STATUS_PAUSED || p.Job.StatusReason != "lunch" {
		t.Fatalf("pause: %v, %v", p, err)
	}
	_, err = e.agent.PauseJob(ctx, &agentv1.PauseJobRequest{Id: j.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "paused")
	before := len(e.q.ids)
	r, err := e.agent.ResumeJob(ctx, &agentv1.ResumeJobRequest{Id: j.Id})
	// A job paused before it started goes back to the queue, and a run is queued.
	if err != nil || r.Job.Status != agentv1.JobStatus_JOB_STATUS_QUEUED || len(e.q.ids) != before+1 {
		t.Fatalf("resume: %v, %v (queued %d → %d)", r, err, before, len(e.q.ids))
	}
	c, err := e.agent.CancelJob(ctx, &agentv1.CancelJobRequest{Id: j.Id})
	if err != nil || c.Job.Status != agentv1.JobStatus_JOB_STATUS_CANCELLED || c.Job.EndTime == nil {
		t.Fatalf("cancel: %v, %v", c, err)
	}
	_, err = e.agent.CancelJob(ctx, &agentv1.CancelJobRequest{Id: j.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "cancelled")
	// Every control is in the audit log, as the person who did it.
	audit, err := e.agent.ListAuditLog(ctx, &agentv1.ListAuditLogRequest{JobId: j.Id})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range audit.Entries {
		if a.Actor != "user:"+alice {
			t.Errorf("actor %q", a.Actor)
		}
		actions = append(actions, a.Action)
	}
	if !slices.Equal(actions, []string{"job_cancelled", "job_resumed", "job_paused"}) {
		t.Errorf("audit actions %v", actions)
	}
	// The job's events tell the story in order.
	s, err := e.agent.WatchJob(ctx, &agentv1.WatchJobRequest{Id: j.Id})
	if err != nil {
		t.Fatal(err)
	}
	var statuses []agentv1.JobStatus
	for {
		ev, err := s.Recv()
		if err != nil {
			break
		}
		if sc := ev.GetStatusChange(); sc != nil {
			statuses = append(statuses, sc.Status)
		}
	}
	want := []agentv1.JobStatus{agentv1.JobStatus_JOB_STATUS_PAUSED, agentv1.JobStatus_JOB_STATUS_QUEUED, agentv1.JobStatus_JOB_STATUS_CANCELLED}
	if !slices.Equal(statuses, want) {
		t.Errorf("watched statuses %v, want %v", statuses, want)
	}
	// Watching the finished job from past its end ends at once: the opening heartbeat, then
	// the end marker (before the one Watch handler it was an empty stream, no heartbeat).
	s, err = e.agent.WatchJob(ctx, &agentv1.WatchJobRequest{Id: j.Id, FromNow: true})
	if err != nil {
		t.Fatal(err)
	}
	var past []*agentv1.WatchJobResponse
	for {
		ev, err := s.Recv()
		if err != nil {
			if err != io.EOF {
				t.Fatalf("watch past the end: %v", err)
			}
			break
		}
		if ev.Id != 0 {
			t.Fatalf("event past the end: %v", ev)
		}
		past = append(past, ev)
	}
	if len(past) != 2 || past[0].GetHeartbeat() == nil || past[0].GetHeartbeat().End || !past[1].GetHeartbeat().GetEnd() {
		t.Errorf("watch past the end = %v, want a heartbeat and the end marker", past)
	}
	// A finished task may run again: one unfinished job per task.
	e.job(t, alice, taskA)
	_, _, err = e.st.Create(context.Background(), &agentv1.Job{OwnerId: alice, TaskId: taskA, Repo: "local/r"}, "", nil, store.RateLimit{}, e.q.Enqueue)
	if !errors.Is(err, errs.ErrAlreadyExists) {
		t.Fatalf("a second unfinished job of a task: %v", err)
	}
}

func TestRateLimitSaysWhenToRetry(t *testing.T) {
	e := newEnv(t)
	limit := store.RateLimit{PerHour: 2, PerDay: 100}
	for i, task := range []string{"aaaaaaaa-1111-4111-8111-111111111111", "bbbbbbbb-1111-4111-8111-111111111111"} {
		if _, _, err := e.st.Create(context.Background(), &agentv1.Job{OwnerId: alice, TaskId: task, Repo: "local/r"}, "", nil, limit, e.q.Enqueue); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	_, _, err := e.st.Create(context.Background(), &agentv1.Job{OwnerId: alice, TaskId: taskA, Repo: "local/r"}, "", nil, limit, e.q.Enqueue)
	var rl *store.RateLimitError
	if !errors.As(err, &rl) || rl.Limit != 2 || time.Until(rl.Retry) < 59*time.Minute || time.Until(rl.Retry) > time.Hour {
		t.Fatalf("third job in an hour: %v", err)
	}
	// Through the RPC: RESOURCE_EXHAUSTED with the time to retry, before anything is asked
	// of the tasks service.
	srv := service.New(e.st, service.Options{Queue: e.q, RateLimit: limit})
	env2 := grpctest.Start(t, func(s *grpc.Server) { agentv1.RegisterAgentServiceServer(s, srv) })
	_, err = agentv1.NewAgentServiceClient(env2.Conn).StartTask(env2.Context(t, alice), &agentv1.StartTaskRequest{TaskId: taskA})
	grpctest.WantCode(t, err, codes.ResourceExhausted, "2 tasks started in the last 1h0m0s")
	var retry *errdetails.RetryInfo
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			retry = r
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() < 59*time.Minute {
		t.Fatalf("no retry time: %v", status.Convert(err).Details())
	}
	// Another user is not limited by alice's jobs.
	if _, _, err := e.st.Create(context.Background(), &agentv1.Job{OwnerId: bob, TaskId: taskA, Repo: "local/r"}, "", nil, limit, e.q.Enqueue); err != nil {
		t.Fatalf("bob: %v", err)
	}
}

// A loop step's metrics add up per phase, with the model that did most of the work.
func TestPhaseMetricsAddUp(t *testing.T) {
	e := newEnv(t)
	j := e.job(t, alice, taskA)
	lease := "5d6f3c7e-8a9b-4c0d-9e1f-2a3b4c5d6e7f"
	rec, ok, err := e.st.Claim(context.Background(), j.Id, lease, time.Minute)
	if err != nil || !ok || rec.Job.Status != agentv1.JobStatus_JOB_STATUS_RUNNING {
		t.Fatalf("claim: %v %v %v", rec, ok, err)
	}
	plan := agentv1.JobPhase_JOB_PHASE_PLANNING
	for _, u := range []*typev1.Usage{{Model: "small", InputTokens: 10, OutputTokens: 5, CostMicros: 3, Calls: 1}, {Model: "big", InputTokens: 100, OutputTokens: 50, CostMicros: 30, Calls: 1}} {
		if err := e.st.Save(context.Background(), rec, lease, store.Step{Metrics: []store.Metric{{Phase: plan, Usage: u, Duration: time.Second}}}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := e.agent.GetJobMetrics(e.ctx(alice), &agentv1.GetJobMetricsRequest{Id: j.Id})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Phases) != 1 || m.Phases[0].Usage.InputTokens != 110 || m.Phases[0].Usage.Model != "big" || m.Phases[0].Duration.AsDuration() != 2*time.Second ||
		!slices.Equal(m.Phases[0].Models, []string{"big", "small"}) || m.Total.CostMicros != 33 {
		t.Fatalf("metrics %v", m)
	}
	// Another lease cannot write.
	err = e.st.Save(context.Background(), rec, "6d6f3c7e-8a9b-4c0d-9e1f-2a3b4c5d6e7f", store.Step{})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("save with a foreign lease: %v", err)
	}
}

// One job at a time per repository branch: the second waits QUEUED until the first ends;
// the reaper finds queued jobs and jobs whose worker stopped renewing.
func TestBranchLockAndReaper(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	first := e.job(t, alice, taskA)
	second := e.job(t, alice, "22222222-2222-4222-8222-222222222222")
	leaseA, leaseB := "5d6f3c7e-8a9b-4c0d-9e1f-2a3b4c5d6e7f", "6d6f3c7e-8a9b-4c0d-9e1f-2a3b4c5d6e7f"
	if _, ok, err := e.st.Claim(ctx, first.Id, leaseA, time.Minute); err != nil || !ok {
		t.Fatalf("claim first: %v %v", ok, err)
	}
	if _, ok, err := e.st.Claim(ctx, first.Id, leaseB, time.Minute); err != nil || ok {
		t.Fatalf("a held job was claimed again: %v %v", ok, err)
	}
	if _, ok, err := e.st.Claim(ctx, second.Id, leaseB, time.Minute); err != nil || ok {
		t.Fatalf("the second job ran while the branch was locked: %v %v", ok, err)
	}
	if ids, err := e.st.TakeStale(ctx, time.Minute, 10); err != nil || !slices.Equal(ids, []string{second.Id}) {
		t.Fatalf("stale = %v, %v; want the queued job only", ids, err)
	}
	// The first worker dies: after the expiry its job is stale, and another worker takes it.
	time.Sleep(1100 * time.Millisecond)
	if ids, err := e.st.TakeStale(ctx, time.Second, 10); err != nil || !slices.Contains(ids, first.Id) {
		t.Fatalf("stale after expiry = %v, %v", ids, err)
	}
	if _, ok, err := e.st.Claim(ctx, first.Id, leaseB, time.Second); err != nil || !ok {
		t.Fatalf("take over a dead worker's job: %v %v", ok, err)
	}
	if err := e.st.Renew(ctx, first.Id, leaseA); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the dead worker renewed: %v", err)
	}
	if _, err := e.agent.CancelJob(e.ctx(alice), &agentv1.CancelJobRequest{Id: first.Id}); err != nil {
		t.Fatal(err)
	}
	rec, ok, err := e.st.Claim(ctx, second.Id, leaseA, time.Minute)
	if err != nil || !ok || rec.Job.Status != agentv1.JobStatus_JOB_STATUS_RUNNING || rec.Job.StartTime == nil {
		t.Fatalf("the second job after the first ended: %v %v %v", rec, ok, err)
	}
}

// A job paused by an open breaker resumes by itself once the breaker's wait is over.
func TestBreakerPausedJobResumesWhenDue(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	j := e.job(t, alice, taskA)
	lease := "5d6f3c7e-8a9b-4c0d-9e1f-2a3b4c5d6e7f"
	rec, ok, err := e.st.Claim(ctx, j.Id, lease, time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	rec.Job.Status, rec.State.AutoResumeAt = agentv1.JobStatus_JOB_STATUS_PAUSED, time.Now().Add(time.Second)
	if err := e.st.Save(ctx, rec, lease, store.Step{}); err != nil {
		t.Fatal(err)
	}
	if ids, err := e.st.ResumeDue(ctx, 10, e.q.Enqueue); err != nil || len(ids) != 0 {
		t.Fatalf("resumed before due: %v %v", ids, err)
	}
	time.Sleep(1100 * time.Millisecond)
	before := len(e.q.ids)
	if ids, err := e.st.ResumeDue(ctx, 10, e.q.Enqueue); err != nil || !slices.Equal(ids, []string{j.Id}) || len(e.q.ids) != before+1 {
		t.Fatalf("resume due: %v %v", ids, err)
	}
	got, err := e.agent.GetJob(e.ctx(alice), &agentv1.GetJobRequest{Id: j.Id})
	if err != nil || got.Job.Status != agentv1.JobStatus_JOB_STATUS_RUNNING {
		t.Fatalf("after resume: %v %v", got, err)
	}
	if ids, err := e.st.ResumeDue(ctx, 10, e.q.Enqueue); err != nil || len(ids) != 0 {
		t.Fatalf("resumed twice: %v %v", ids, err)
	}
}

// Listing jobs and the audit log pages newest first through their filters.
func TestListingPagesThroughFilters(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx(alice)
	const taskB = "22222222-2222-4222-8222-222222222222"
	ids := []string{e.job(t, alice, taskA).Id}
	if _, err := e.agent.CancelJob(ctx, &agentv1.CancelJobRequest{Id: ids[0]}); err != nil { // one unfinished job a task
		t.Fatal(err)
	}
	ids = append(ids, e.job(t, alice, taskB).Id, e.job(t, alice, taskA).Id)
	const bobsTask = "33333333-3333-4333-8333-333333333333"
	e.job(t, bob, bobsTask) // not alice's
	page := func(req *agentv1.ListJobsRequest) []string {
		t.Helper()
		var got []string
		req.PageSize = 1
		for {
			resp, err := e.agent.ListJobs(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range resp.Jobs {
				got = append(got, j.Id)
			}
			if resp.NextPageToken == "" {
				return got
			}
			req.PageToken = resp.NextPageToken
		}
	}
	if got, want := page(&agentv1.ListJobsRequest{}), []string{ids[2], ids[1], ids[0]}; !slices.Equal(got, want) {
		t.Errorf("all of alice's jobs, a page at a time = %v, want %v", got, want)
	}
	if got, want := page(&agentv1.ListJobsRequest{TaskId: taskA}), []string{ids[2], ids[0]}; !slices.Equal(got, want) {
		t.Errorf("task A's = %v, want %v", got, want)
	}
	if got, want := page(&agentv1.ListJobsRequest{Statuses: []agentv1.JobStatus{agentv1.JobStatus_JOB_STATUS_QUEUED}, Repo: "local/r"}),
		[]string{ids[2], ids[1]}; !slices.Equal(got, want) {
		t.Errorf("queued ones = %v, want %v", got, want)
	}
	// The audit log: alice's one control, through a filter that matches and one that does not.
	audit, err := e.agent.ListAuditLog(ctx, &agentv1.ListAuditLogRequest{Action: "job_cancelled", PageSize: 1})
	if err != nil || len(audit.Entries) != 1 || audit.Entries[0].JobId != ids[0] {
		t.Fatalf("cancellations = %v, %v", audit, err)
	}
	if audit.NextPageToken != "" {
		next, err := e.agent.ListAuditLog(ctx, &agentv1.ListAuditLogRequest{Action: "job_cancelled", PageSize: 1, PageToken: audit.NextPageToken})
		if err != nil || len(next.Entries) != 0 {
			t.Errorf("second page = %v, %v", next, err)
		}
	}
	none, err := e.agent.ListAuditLog(ctx, &agentv1.ListAuditLogRequest{TaskId: taskB, FailuresOnly: true})
	if err != nil || len(none.Entries) != 0 {
		t.Errorf("failures of task B = %v, %v", none, err)
	}
}
