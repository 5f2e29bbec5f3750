package main

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// Until its issue lands, every RPC of the contract is served and answers Unimplemented to an
// authenticated caller — whatever the input, malformed included — and Unauthenticated to
// a caller without a token.
func TestEveryRPCIsServedAndAuthenticated(t *testing.T) {
	grpctest.RequireServedAndAuthenticated(t, func(s *grpc.Server) {
		githubv1.RegisterRepoServiceServer(s, &repoService{})
	}, codes.Unimplemented, githubv1.RepoService_ServiceDesc)
}
