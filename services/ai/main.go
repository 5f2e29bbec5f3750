// Command ai is TheFold's ai service. It starts, migrates its schema and serves
// health, reflection and metrics; its RPCs return Unimplemented until the issue that
// implements them lands (see README, "What is not done yet").
package main

import (
	"context"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/platform"
)

// aIService returns Unimplemented for every RPC until its own issue lands.
type aIService struct {
	aiv1.UnimplementedAIServiceServer
}

// modelRegistryService returns Unimplemented for every RPC until its own issue lands.
type modelRegistryService struct {
	aiv1.UnimplementedModelRegistryServiceServer
}

func main() {
	platform.Main(platform.Service{
		Name:   "ai",
		Schema: "ai",
		Register: func(_ context.Context, d *platform.Deps) error {
			aiv1.RegisterAIServiceServer(d.Server.GRPC(), &aIService{})
			aiv1.RegisterModelRegistryServiceServer(d.Server.GRPC(), &modelRegistryService{})
			return nil
		},
	})
}
