// Command sandbox is TheFold's sandbox service. It starts, migrates its schema and serves
// health, reflection and metrics; its RPCs return Unimplemented until the issue that
// implements them lands (see README, "What is not done yet").
package main

import (
	"context"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/platform"

	"github.com/thefold/thefold/services/sandbox/migrations"
)

// sandboxService returns Unimplemented for every RPC until its own issue lands.
type sandboxService struct {
	sandboxv1.UnimplementedSandboxServiceServer
}

func main() {
	platform.Main(platform.Service{
		Name:       "sandbox",
		Schema:     "sandbox",
		Migrations: migrations.FS,
		Register: func(_ context.Context, d *platform.Deps) error {
			sandboxv1.RegisterSandboxServiceServer(d.Server.GRPC(), &sandboxService{})
			return nil
		},
	})
}
