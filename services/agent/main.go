// Command agent is TheFold's agent service. It starts, migrates its schema and serves
// health, reflection and metrics; its RPCs return Unimplemented until the issue that
// implements them lands (see README, "What is not done yet").
package main

import (
	"context"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/platform"
)

// agentService returns Unimplemented for every RPC until its own issue lands.
type agentService struct {
	agentv1.UnimplementedAgentServiceServer
}

// reviewService returns Unimplemented for every RPC until its own issue lands.
type reviewService struct {
	agentv1.UnimplementedReviewServiceServer
}

// projectService returns Unimplemented for every RPC until its own issue lands.
type projectService struct {
	agentv1.UnimplementedProjectServiceServer
}

func main() {
	platform.Main(platform.Service{
		Name:   "agent",
		Schema: "agent",
		Register: func(_ context.Context, d *platform.Deps) error {
			agentv1.RegisterAgentServiceServer(d.Server.GRPC(), &agentService{})
			agentv1.RegisterReviewServiceServer(d.Server.GRPC(), &reviewService{})
			agentv1.RegisterProjectServiceServer(d.Server.GRPC(), &projectService{})
			return nil
		},
	})
}
