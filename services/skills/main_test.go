package main

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// Until its issue lands, every RPC of the contract is served and answers Unimplemented to an
// authenticated caller — whatever the input, malformed included — and Unauthenticated to
// a caller without a token.
func TestEveryRPCIsServedAndAuthenticated(t *testing.T) {
	grpctest.RequireServedAndAuthenticated(t, func(s *grpc.Server) {
		skillsv1.RegisterSkillServiceServer(s, &skillService{})
	}, codes.Unimplemented, skillsv1.SkillService_ServiceDesc)
}
