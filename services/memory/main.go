// Command memory is TheFold's memory service. It starts, migrates its schema and serves
// health, reflection and metrics; its RPCs return Unimplemented until the issue that
// implements them lands (see README, "What is not done yet").
package main

import (
	"context"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	"github.com/thefold/thefold/pkg/platform"
)

// memoryService returns Unimplemented for every RPC until its own issue lands.
type memoryService struct {
	memoryv1.UnimplementedMemoryServiceServer
}

func main() {
	platform.Main(platform.Service{
		Name:   "memory",
		Schema: "memory",
		Register: func(_ context.Context, d *platform.Deps) error {
			memoryv1.RegisterMemoryServiceServer(d.Server.GRPC(), &memoryService{})
			return nil
		},
	})
}
