package service_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/db/dbtest"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/skills/internal/service"
	"github.com/thefold/thefold/services/skills/internal/store"
	"github.com/thefold/thefold/services/skills/migrations"
)

// env is a skills server on its own database, reached over loopback gRPC, and the agent
// service it checks jobs with: a small AgentService on the same server (the real agent is
// another module, which a service never imports), reached with the caller's token
// forwarded as the real skills server reaches the agent.
type env struct {
	client skillsv1.SkillServiceClient
	srv    *service.Server
	pool   *pgxpool.Pool
	agents *agentJobs
	admin  context.Context
	alice  context.Context
	anon   context.Context
	// agent is the agent service acting for alice, as it does when it logs a job's result.
	agent context.Context
	grpc  *grpctest.Env
}

func start(t testing.TB) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "skills", migrations.FS)
	conn := &lazy{}
	jobs := &agentJobs{jobs: map[string]*agentv1.Job{}}
	srv := service.New(store.New(pool), service.WithJobs(agentv1.NewAgentServiceClient(conn)))
	e := grpctest.Start(t, func(s *grpc.Server) {
		skillsv1.RegisterSkillServiceServer(s, srv)
		agentv1.RegisterAgentServiceServer(s, jobs)
	})
	cc, err := grpcclient.Dial(e.Server.Addr(), grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	conn.cc = cc
	return &env{client: skillsv1.NewSkillServiceClient(e.Conn), srv: srv, pool: pool, agents: jobs,
		admin: e.Context(t, "root", "admin"), alice: e.Context(t, "alice"), anon: context.Background(),
		agent: e.ServiceContext(t, "agent", "alice"), grpc: e}
}

// job adds a job of owner to the agent service and returns its id.
func (e *env) job(owner string) string {
	id := uuid.NewString()
	e.agents.mu.Lock()
	defer e.agents.mu.Unlock()
	e.agents.jobs[id] = &agentv1.Job{Id: id, OwnerId: owner, TaskId: uuid.NewString()}
	return id
}

// agentJobs answers GetJob as the agent service does: the caller's own jobs, another's or
// an unknown one NOT_FOUND. It records who asked.
type agentJobs struct {
	agentv1.UnimplementedAgentServiceServer
	mu     sync.Mutex
	jobs   map[string]*agentv1.Job
	askers []string // "<service>/<user>" of each GetJob
	down   bool     // answer UNAVAILABLE, as an agent service that is down
}

func (a *agentJobs) GetJob(ctx context.Context, req *agentv1.GetJobRequest) (*agentv1.GetJobResponse, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.askers = append(a.askers, p.Service+"/"+p.UserID)
	if a.down {
		return nil, status.Error(codes.Unavailable, "agent is down")
	}
	j, ok := a.jobs[req.GetId()]
	if !ok || j.GetOwnerId() != p.UserID {
		return nil, status.Errorf(codes.NotFound, "job %q not found", req.GetId())
	}
	return &agentv1.GetJobResponse{Job: j}, nil
}

// lazy is a client connection set once the test server listens.
type lazy struct{ cc grpc.ClientConnInterface }

func (l *lazy) Invoke(ctx context.Context, m string, a, r any, o ...grpc.CallOption) error {
	return l.cc.Invoke(ctx, m, a, r, o...)
}

func (l *lazy) NewStream(ctx context.Context, d *grpc.StreamDesc, m string, o ...grpc.CallOption) (grpc.ClientStream, error) {
	return l.cc.NewStream(ctx, d, m, o...)
}

func (e *env) create(t testing.TB, sk *skillsv1.Skill) *skillsv1.Skill {
	t.Helper()
	resp, err := e.client.CreateSkill(e.admin, &skillsv1.CreateSkillRequest{Skill: sk})
	if err != nil {
		t.Fatalf("CreateSkill %s: %v", sk.GetName(), err)
	}
	return resp.GetSkill()
}

func inject(name, fragment string, priority int32, r *skillsv1.SkillRouting) *skillsv1.Skill {
	return &skillsv1.Skill{Name: name, Phase: skillsv1.SkillPhase_SKILL_PHASE_INJECT, PromptFragment: fragment,
		Priority: priority, Routing: r, Enabled: true}
}

func wantCode(t testing.TB, err error, code codes.Code, field string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	if field != "" && !strings.Contains(status.Convert(err).Message(), field) {
		t.Fatalf("error %q does not name %q", status.Convert(err).Message(), field)
	}
}

func names(rs []*skillsv1.ResolvedSkill) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.GetName()
	}
	return out
}
