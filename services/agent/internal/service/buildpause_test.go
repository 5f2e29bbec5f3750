package service_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/agent/internal/service"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// builds is a builder client that records PauseBuild and CancelBuild and answers them with
// err (nil: the build as asked).
type builds struct {
	builderv1.BuilderServiceClient
	err error

	mu    sync.Mutex
	calls []string
}

func (b *builds) PauseBuild(_ context.Context, req *builderv1.PauseBuildRequest, _ ...grpc.CallOption) (*builderv1.PauseBuildResponse, error) {
	b.record("pause " + req.Id + " " + req.Reason)
	if b.err != nil {
		return nil, b.err
	}
	return &builderv1.PauseBuildResponse{Build: &builderv1.BuildJob{Id: req.Id, Status: builderv1.BuildStatus_BUILD_STATUS_PAUSED}}, nil
}

func (b *builds) CancelBuild(_ context.Context, req *builderv1.CancelBuildRequest, _ ...grpc.CallOption) (*builderv1.CancelBuildResponse, error) {
	b.record("cancel " + req.Id)
	return &builderv1.CancelBuildResponse{Build: &builderv1.BuildJob{Id: req.Id, Status: builderv1.BuildStatus_BUILD_STATUS_CANCELLED}}, nil
}

func (b *builds) record(c string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, c)
}

func (b *builds) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// A paused job pauses the build it follows (a build of another phase, or of none, is left
// alone), whatever the builder answers; the job cancelled later cancels its paused build.
func TestPauseJobPausesItsBuild(t *testing.T) {
	const buildID = "55555555-5555-4555-8555-555555555555"
	for _, c := range []struct {
		name    string
		phase   agentv1.JobPhase
		buildID string
		// builderErr is the builder's answer to PauseBuild.
		builderErr error
		want       []string
	}{
		{"building", agentv1.JobPhase_JOB_PHASE_BUILDING, buildID, nil,
			[]string{"pause " + buildID + " job paused: lunch", "cancel " + buildID}},
		{"the build ended meanwhile", agentv1.JobPhase_JOB_PHASE_BUILDING, buildID, status.Error(codes.FailedPrecondition, "build is completed"),
			[]string{"pause " + buildID + " job paused: lunch", "cancel " + buildID}},
		{"the builder is down", agentv1.JobPhase_JOB_PHASE_BUILDING, buildID, status.Error(codes.Unavailable, "no builder"),
			[]string{"pause " + buildID + " job paused: lunch", "cancel " + buildID}},
		{"validating", agentv1.JobPhase_JOB_PHASE_VALIDATING, buildID, nil, []string{"cancel " + buildID}},
		{"no build yet", agentv1.JobPhase_JOB_PHASE_BUILDING, "", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st, _ := testStore(t)
			q, b := &queue{}, &builds{err: c.builderErr}
			srv := service.New(st, service.Options{Queue: q, Heartbeat: time.Second, MaxWatches: 4, Builder: b})
			g := grpctest.Start(t, func(s *grpc.Server) { agentv1.RegisterAgentServiceServer(s, srv) })
			agent, ctx := agentv1.NewAgentServiceClient(g.Conn), g.Context(t, alice)
			e := &env{st: st, q: q}
			j := e.job(t, alice, taskA)
			if _, err := st.Mutate(ctx, alice, j.Id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
				rec.Job.Phase, rec.Job.BuildId = c.phase, c.buildID
				return store.Step{}, nil
			}, nil); err != nil {
				t.Fatal(err)
			}

			p, err := agent.PauseJob(ctx, &agentv1.PauseJobRequest{Id: j.Id, Reason: "lunch"})
			if err != nil || p.Job.Status != agentv1.JobStatus_JOB_STATUS_PAUSED {
				t.Fatalf("PauseJob = %v, %v", p, err)
			}
			if _, err := agent.CancelJob(ctx, &agentv1.CancelJobRequest{Id: j.Id}); err != nil {
				t.Fatal(err)
			}
			if got := b.got(); !slices.Equal(got, c.want) {
				t.Errorf("builder calls %q, want %q", got, c.want)
			}
		})
	}
}
