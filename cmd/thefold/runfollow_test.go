package main

import (
	"bufio"
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// fakeJobs is an AgentService whose WatchJob sends events and ends, and whose GetJob answers
// with job.
type fakeJobs struct {
	agentv1.UnimplementedAgentServiceServer
	job    *agentv1.Job
	events []*agentv1.WatchJobResponse
}

func (f *fakeJobs) GetJob(context.Context, *agentv1.GetJobRequest) (*agentv1.GetJobResponse, error) {
	return &agentv1.GetJobResponse{Job: f.job}, nil
}

func (f *fakeJobs) WatchJob(_ *agentv1.WatchJobRequest, stream grpc.ServerStreamingServer[agentv1.WatchJobResponse]) error {
	for _, ev := range f.events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	return nil
}

// serveAgent serves what register registers on a real gRPC server and points the command
// line at it as the agent, logged in as alice (a configuration directory of the test's own).
func serveAgent(t *testing.T, register func(s *grpc.Server)) {
	t.Helper()
	env := grpctest.Start(t, register)
	tok, _, err := env.Signer.Issue("alice", []string{auth.RoleUser}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("THEFOLD_CONFIG_DIR", t.TempDir())
	t.Setenv("THEFOLD_TOKEN", tok)
	t.Setenv("THEFOLD_API_KEY", "")
	t.Setenv("THEFOLD_AGENT_ADDR", env.Conn.Target())
}

// follow runs against an AgentService over a real gRPC connection and returns what it printed.
func follow(t *testing.T, fake *fakeJobs) string {
	t.Helper()
	serveAgent(t, func(s *grpc.Server) { agentv1.RegisterAgentServiceServer(s, fake) })
	var out bytes.Buffer
	g := &globals{out: &out, errOut: &out, in: strings.NewReader("")}
	c, _, err := g.connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := &runner{g: g, c: c, in: bufio.NewReader(g.in)}
	if err := r.follow(t.Context(), &agentv1.Job{Id: fake.job.GetId()}); err != nil {
		t.Fatalf("follow: %v\n%s", err, out.String())
	}
	return out.String()
}

// A job can be done before the watch has read its pull request's event: a phase change read
// late finds the job COMPLETED. The run still shows the pull request, from the job.
func TestRunShowsThePullRequestOfAJobDoneBeforeItsEvent(t *testing.T) {
	job := &agentv1.Job{Id: "5f0c0f5e-0000-4000-8000-000000000001", Status: agentv1.JobStatus_JOB_STATUS_COMPLETED,
		PullRequest: &typev1.PullRequestRef{Number: 7, Url: "http://forge/acme/api/pulls/7"}}
	out := follow(t, &fakeJobs{job: job, events: []*agentv1.WatchJobResponse{
		{Id: 1, Payload: &agentv1.WatchJobResponse_PhaseChanged{PhaseChanged: &agentv1.JobPhaseChange{Phase: agentv1.JobPhase_JOB_PHASE_REVIEWING}}},
		{Id: 2, Payload: &agentv1.WatchJobResponse_PullRequest{PullRequest: job.PullRequest}},
	}})
	if strings.Count(out, "Pull request: http://forge/acme/api/pulls/7") != 1 || !strings.Contains(out, "is done") {
		t.Fatalf("want the pull request once, then done:\n%s", out)
	}
	if strings.Index(out, "Pull request:") > strings.Index(out, "is done") {
		t.Fatalf("the pull request after done:\n%s", out)
	}
}

// The pull request's event read before the job is done is shown once, not again at the end.
func TestRunShowsThePullRequestOnce(t *testing.T) {
	pr := &typev1.PullRequestRef{Number: 8, Url: "http://forge/acme/api/pulls/8"}
	job := &agentv1.Job{Id: "5f0c0f5e-0000-4000-8000-000000000002", Status: agentv1.JobStatus_JOB_STATUS_COMPLETED, PullRequest: pr}
	out := follow(t, &fakeJobs{job: job, events: []*agentv1.WatchJobResponse{
		{Id: 1, Payload: &agentv1.WatchJobResponse_PullRequest{PullRequest: pr}},
		{Id: 2, Payload: &agentv1.WatchJobResponse_StatusChange{StatusChange: &agentv1.JobStatusChange{Status: agentv1.JobStatus_JOB_STATUS_COMPLETED}}},
	}})
	if strings.Count(out, "Pull request: http://forge/acme/api/pulls/8") != 1 || !strings.Contains(out, "is done") {
		t.Fatalf("want the pull request once, then done:\n%s", out)
	}
}
