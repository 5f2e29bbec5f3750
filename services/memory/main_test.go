package main

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// Until its issue lands, every RPC of the contract is served and answers Unimplemented to an
// authenticated caller — whatever the input, malformed included — and Unauthenticated to
// a caller without a token.
func TestEveryRPCIsServedAndAuthenticated(t *testing.T) {
	grpctest.RequireServedAndAuthenticated(t, func(s *grpc.Server) {
		memoryv1.RegisterMemoryServiceServer(s, &memoryService{})
	}, codes.Unimplemented, memoryv1.MemoryService_ServiceDesc)
}
