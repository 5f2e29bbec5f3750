// Command github is TheFold's github service. It starts, migrates its schema and serves
// health, reflection and metrics; its RPCs return Unimplemented until the issue that
// implements them lands (see README, "What is not done yet").
package main

import (
	"context"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/platform"
)

// repoService returns Unimplemented for every RPC until its own issue lands.
type repoService struct {
	githubv1.UnimplementedRepoServiceServer
}

func main() {
	platform.Main(platform.Service{
		Name:   "github",
		Schema: "github",
		Register: func(_ context.Context, d *platform.Deps) error {
			githubv1.RegisterRepoServiceServer(d.Server.GRPC(), &repoService{})
			return nil
		},
	})
}
