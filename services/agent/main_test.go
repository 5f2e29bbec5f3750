package main

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// Until its issue lands, every RPC of the contract is served and answers Unimplemented to an
// authenticated caller — whatever the input, malformed included — and Unauthenticated to
// a caller without a token.
func TestEveryRPCIsServedAndAuthenticated(t *testing.T) {
	grpctest.RequireServedAndAuthenticated(t, func(s *grpc.Server) {
		agentv1.RegisterAgentServiceServer(s, &agentService{})
		agentv1.RegisterReviewServiceServer(s, &reviewService{})
		agentv1.RegisterProjectServiceServer(s, &projectService{})
	}, codes.Unimplemented, agentv1.AgentService_ServiceDesc, agentv1.ReviewService_ServiceDesc, agentv1.ProjectService_ServiceDesc)
}
