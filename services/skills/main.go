// Command skills is TheFold's skills service. It starts, migrates its schema and serves
// health, reflection and metrics; its RPCs return Unimplemented until the issue that
// implements them lands (see README, "What is not done yet").
package main

import (
	"context"

	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	"github.com/thefold/thefold/pkg/platform"
)

// skillService returns Unimplemented for every RPC until its own issue lands.
type skillService struct {
	skillsv1.UnimplementedSkillServiceServer
}

func main() {
	platform.Main(platform.Service{
		Name:   "skills",
		Schema: "skills",
		Register: func(_ context.Context, d *platform.Deps) error {
			skillsv1.RegisterSkillServiceServer(d.Server.GRPC(), &skillService{})
			return nil
		},
	})
}
