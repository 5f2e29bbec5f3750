package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/db/dbtest"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/skills/internal/service"
	"github.com/thefold/thefold/services/skills/internal/store"
	"github.com/thefold/thefold/services/skills/migrations"
)

// env is a skills server on its own database, reached over loopback gRPC.
type env struct {
	client skillsv1.SkillServiceClient
	srv    *service.Server
	pool   *pgxpool.Pool
	admin  context.Context
	alice  context.Context
	anon   context.Context
}

func start(t testing.TB) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "skills", migrations.FS)
	srv := service.New(store.New(pool))
	e := grpctest.Start(t, func(s *grpc.Server) { skillsv1.RegisterSkillServiceServer(s, srv) })
	return &env{client: skillsv1.NewSkillServiceClient(e.Conn), srv: srv, pool: pool,
		admin: e.Context(t, "root", "admin"), alice: e.Context(t, "alice"), anon: context.Background()}
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
