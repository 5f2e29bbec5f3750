package app

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// Until its issue lands, every ProjectService RPC is served and answers Unimplemented to an
// authenticated caller — whatever the input, malformed included — and Unauthenticated to
// a caller without a token. AgentService and ReviewService are tested in
// internal/service.
func TestProjectServiceIsServedAndAuthenticated(t *testing.T) {
	grpctest.RequireServedAndAuthenticated(t, func(s *grpc.Server) {
		agentv1.RegisterProjectServiceServer(s, &projectService{})
	}, codes.Unimplemented, agentv1.ProjectService_ServiceDesc)
}

func TestConfigValidate(t *testing.T) {
	ok := Config{MaxJobs: 1, LeaseExpiry: 3e9, MaxAttempts: 5, InterveneAfter: 3, MaxTokens: 1, MaxCostMicros: 1, MaxWallTime: 1e9,
		ContextTokens: 1, MaxWatches: 1, MaxWatchesPerUser: 1, WatchHeartbeat: 1e9, CallTimeout: 1e9}
	ok.Events.Every, ok.Events.MaxAge = 3600e9, 3600e9
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	bad := ok
	bad.LeaseExpiry, bad.TasksPerHour = 1e9, -1
	if err := bad.Validate(); err == nil {
		t.Fatal("a 1s lease and a negative rate limit were accepted")
	}
}
