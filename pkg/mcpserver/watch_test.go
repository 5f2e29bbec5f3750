package mcpserver

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/client"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// Jobs of the fake agent.
const (
	// movingJob runs, then stops at the review gate while watched.
	movingJob = "11111111-1111-4111-8111-111111111111"
	// stuckJob runs and never stops.
	stuckJob = "22222222-2222-4222-8222-222222222222"
	// refusedJob is refused with a field violation.
	refusedJob = "33333333-3333-4333-8333-333333333333"
)

// fakeAgent is an AgentService with three jobs (above); any other job is NOT_FOUND.
type fakeAgent struct {
	agentv1.UnimplementedAgentServiceServer
	mu     sync.Mutex
	status map[string]agentv1.JobStatus
	// read is closed when movingJob was first read after its stream began, so that its
	// events come after that read.
	read     chan struct{}
	readOnce sync.Once
	watching bool
}

func newFakeAgent() *fakeAgent {
	return &fakeAgent{read: make(chan struct{}), status: map[string]agentv1.JobStatus{
		movingJob: agentv1.JobStatus_JOB_STATUS_RUNNING, stuckJob: agentv1.JobStatus_JOB_STATUS_RUNNING}}
}

func (f *fakeAgent) GetJob(_ context.Context, req *agentv1.GetJobRequest) (*agentv1.GetJobResponse, error) {
	if req.Id == refusedJob {
		return nil, errs.Invalid("id", "scripted refusal")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.status[req.Id]
	if !ok {
		return nil, errs.NotFound("job", req.Id)
	}
	if req.Id == movingJob && f.watching {
		f.readOnce.Do(func() { close(f.read) })
	}
	j := &agentv1.Job{Id: req.Id, TaskId: "t", Repo: "local/demo", Status: st, Phase: agentv1.JobPhase_JOB_PHASE_BUILDING,
		Usage: &typev1.Usage{CostMicros: 42_100}}
	if st == agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW {
		j.Phase, j.ReviewId = agentv1.JobPhase_JOB_PHASE_REVIEWING, "44444444-4444-4444-8444-444444444444"
	}
	return &agentv1.GetJobResponse{Job: j}, nil
}

func (f *fakeAgent) WatchJob(req *agentv1.WatchJobRequest, s grpc.ServerStreamingServer[agentv1.WatchJobResponse]) error {
	if !req.FromNow {
		return errs.Invalid("from_now", "the tool watches from now")
	}
	beat := &agentv1.WatchJobResponse{Payload: &agentv1.WatchJobResponse_Heartbeat{Heartbeat: &typev1.Heartbeat{Cursor: 10}}}
	if req.Id != movingJob {
		if err := s.Send(beat); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	}
	f.mu.Lock()
	f.watching = true
	f.mu.Unlock()
	if err := s.Send(beat); err != nil {
		return err
	}
	select {
	case <-f.read:
	case <-s.Context().Done():
		return nil
	}
	events := []*agentv1.WatchJobResponse{
		{Id: 11, Type: agentv1.JobEventType_JOB_EVENT_TYPE_PHASE_CHANGED, Payload: &agentv1.WatchJobResponse_PhaseChanged{
			PhaseChanged: &agentv1.JobPhaseChange{Phase: agentv1.JobPhase_JOB_PHASE_VALIDATING, Attempt: 1}}},
		{Id: 12, Type: agentv1.JobEventType_JOB_EVENT_TYPE_THOUGHT, Payload: &agentv1.WatchJobResponse_Thought{Thought: &agentv1.JobThought{Text: "the tests pass"}}},
		{Id: 13, Type: agentv1.JobEventType_JOB_EVENT_TYPE_STATUS_CHANGED, Payload: &agentv1.WatchJobResponse_StatusChange{
			StatusChange: &agentv1.JobStatusChange{Status: agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW}}},
	}
	for _, e := range events {
		if e.GetStatusChange() != nil {
			f.mu.Lock()
			f.status[movingJob] = e.GetStatusChange().GetStatus()
			f.mu.Unlock()
		}
		if err := s.Send(e); err != nil {
			return err
		}
	}
	// The stream of a job at the review gate stays open: the tool stops on the event.
	<-s.Context().Done()
	return nil
}

// agentClient is a client of a fake agent behind the real server chain, as user u1.
func agentClient(t *testing.T, f *fakeAgent) *client.Client {
	t.Helper()
	env := grpctest.Start(t, func(s *grpc.Server) { agentv1.RegisterAgentServiceServer(s, f) })
	tok, _, err := env.Signer.Issue("u1", []string{auth.RoleUser}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Config{Token: tok, Addrs: map[string]string{"agent": env.Conn.Target()}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func call(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("%s: %v", params.Name, err)
	}
	return res
}

// structured is a result's structured content decoded into out.
func structured(t *testing.T, res *mcp.CallToolResult, out any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// watch_job follows the stream until the job stops, sending the events as progress.
func TestWatchJobStops(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		messages []string
	)
	cs := connect(t, agentClient(t, newFakeAgent()), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if r.Params.ProgressToken == "watch-1" {
				messages = append(messages, r.Params.Message)
			}
		}})
	params := &mcp.CallToolParams{Name: "watch_job", Arguments: map[string]any{"job_id": movingJob, "timeout_seconds": 30}}
	params.SetProgressToken("watch-1")
	start := time.Now()
	res := call(t, cs, params)
	if res.IsError {
		t.Fatalf("watch_job: %s", text(res))
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("watch_job took %s: it waited past the stop", time.Since(start))
	}
	var got WatchResult
	structured(t, res, &got)
	if got.TimedOut || !got.Job.Stopped || got.Job.Status != "pending_review" || got.Job.ReviewID == "" || got.Events != 3 || got.Job.Cost != "$0.0421" {
		t.Fatalf("watch_job = %+v", got)
	}
	if !strings.Contains(text(res), "get_review") {
		t.Errorf("text %q does not say how to go on", text(res))
	}
	// The SDK's client hands notifications to their handler in order but on its own
	// goroutine: the last may be handled after the call returned.
	want := []string{"phase: validating (attempt 1)", "the tests pass", "status: pending_review"}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(messages)
	}
	eventually(t, func() bool { return len(seen()) >= len(want) })
	if !slices.Equal(seen(), want) {
		t.Errorf("progress = %q, want %q", seen(), want)
	}
}

// eventually waits up to five seconds for cond.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Error("condition not met within 5s")
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A job that keeps moving is returned at the timeout, as still moving.
func TestWatchJobTimesOut(t *testing.T) {
	t.Parallel()
	cs := connect(t, agentClient(t, newFakeAgent()), nil)
	res := call(t, cs, &mcp.CallToolParams{Name: "watch_job", Arguments: map[string]any{"job_id": stuckJob, "timeout_seconds": 1}})
	if res.IsError {
		t.Fatalf("watch_job: %s", text(res))
	}
	var got WatchResult
	structured(t, res, &got)
	if !got.TimedOut || got.Job.Status != "running" || got.Job.Stopped {
		t.Fatalf("watch_job = %+v", got)
	}
	if !strings.Contains(text(res), "call watch_job again") {
		t.Errorf("text = %q", text(res))
	}
}

// A status the agent answers with becomes a tool error with its code, message and fields.
func TestAgentErrorsAreToolErrors(t *testing.T) {
	t.Parallel()
	cs := connect(t, agentClient(t, newFakeAgent()), nil)
	cases := []struct {
		tool string
		job  string
		want []string
	}{
		{"get_job", "55555555-5555-4555-8555-555555555555", []string{"could not get the job: NOT_FOUND:", "not found", "not the person's"}},
		{"get_job", refusedJob, []string{"INVALID_ARGUMENT: id: scripted refusal"}},
		{"watch_job", "55555555-5555-4555-8555-555555555555", []string{"NOT_FOUND"}},
	}
	for _, tc := range cases {
		res := call(t, cs, &mcp.CallToolParams{Name: tc.tool, Arguments: map[string]any{"job_id": tc.job}})
		if !res.IsError {
			t.Errorf("%s %s: not an error: %s", tc.tool, tc.job, text(res))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(text(res), w) {
				t.Errorf("%s %s: %q does not contain %q", tc.tool, tc.job, text(res), w)
			}
		}
	}
}
