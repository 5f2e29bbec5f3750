// Command builder is TheFold's builder service. It starts, migrates its schema and serves
// health, reflection and metrics; its RPCs return Unimplemented until the issue that
// implements them lands (see README, "What is not done yet").
package main

import (
	"context"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	"github.com/thefold/thefold/pkg/platform"
)

// builderService returns Unimplemented for every RPC until its own issue lands.
type builderService struct {
	builderv1.UnimplementedBuilderServiceServer
}

func main() {
	platform.Main(platform.Service{
		Name:   "builder",
		Schema: "builder",
		Register: func(_ context.Context, d *platform.Deps) error {
			builderv1.RegisterBuilderServiceServer(d.Server.GRPC(), &builderService{})
			return nil
		},
	})
}
