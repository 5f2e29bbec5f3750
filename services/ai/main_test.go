package main

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// Until its issue lands, every RPC of the contract is served and answers Unimplemented to an
// authenticated caller — whatever the input, malformed included — and Unauthenticated to
// a caller without a token.
func TestEveryRPCIsServedAndAuthenticated(t *testing.T) {
	grpctest.RequireServedAndAuthenticated(t, func(s *grpc.Server) {
		aiv1.RegisterAIServiceServer(s, &aIService{})
		aiv1.RegisterModelRegistryServiceServer(s, &modelRegistryService{})
	}, codes.Unimplemented, aiv1.AIService_ServiceDesc, aiv1.ModelRegistryService_ServiceDesc)
}
