// Command skills is TheFold's skills service: prompt fragments and deterministic checks
// routed to a task within a token budget, run before an AI call (forbidden paths, the
// project's toolchain) and after it (secrets, dangerous APIs, configured rules), and scored
// by how the jobs that used them went; over gRPC in its own PostgreSQL schema.
package main

import (
	"context"
	"fmt"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	"github.com/thefold/thefold/pkg/platform"

	"github.com/thefold/thefold/services/skills/internal/seed"
	"github.com/thefold/thefold/services/skills/internal/service"
	"github.com/thefold/thefold/services/skills/internal/store"
	"github.com/thefold/thefold/services/skills/migrations"
)

func main() { platform.Main(skillsService()) }

// skillsService wires pool → store → service (with a client of the agent service, which
// LogResult checks jobs with) and seeds the built-in skills.
func skillsService() platform.Service {
	return platform.Service{
		Name:       "skills",
		Schema:     "skills",
		Migrations: migrations.FS,
		Register: func(ctx context.Context, d *platform.Deps) error {
			// LogResult checks each job with the agent service, as the agent acting for the
			// job's owner (its token is forwarded).
			if addr, _ := d.Lookup.Lookup(platform.AddrEnv("agent")); addr == "" {
				return fmt.Errorf("skills checks the jobs whose results are logged with the agent service: set %s", platform.AddrEnv("agent"))
			}
			conn, err := d.Conn(ctx, "agent")
			if err != nil {
				return err
			}
			svc := service.New(store.New(d.Pool), service.WithJobs(agentv1.NewAgentServiceClient(conn)), service.WithLogger(d.Logger))
			if err := svc.Seed(ctx, seed.Builtin()); err != nil {
				return err
			}
			skillsv1.RegisterSkillServiceServer(d.Server.GRPC(), svc)
			return nil
		},
	}
}
