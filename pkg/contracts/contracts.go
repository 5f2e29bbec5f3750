// Package contracts lists, per TheFold service, the gRPC services of its v1 contract and the
// grpc-gateway registrations of their public RPCs: the one table the REST edge and the
// end-to-end tests read, so a service added to the mesh is added in one place.
package contracts

import (
	"context"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// RegisterHandler registers REST handlers that call a service over conn.
type RegisterHandler func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error

// Contract is one TheFold service's v1 surface.
type Contract struct {
	// Service is the service's name: "tasks", "agent", ….
	Service string
	// Services are the gRPC services it serves.
	Services []grpc.ServiceDesc
	// Handlers register its public RPCs on the REST edge.
	Handlers []RegisterHandler
}

// All lists every service's contract.
var All = []Contract{
	{"gateway",
		[]grpc.ServiceDesc{gatewayv1.AuthService_ServiceDesc, gatewayv1.UserService_ServiceDesc},
		[]RegisterHandler{gatewayv1.RegisterAuthServiceHandler, gatewayv1.RegisterUserServiceHandler}},
	{"tasks", []grpc.ServiceDesc{tasksv1.TaskService_ServiceDesc}, []RegisterHandler{tasksv1.RegisterTaskServiceHandler}},
	{"agent",
		[]grpc.ServiceDesc{agentv1.AgentService_ServiceDesc, agentv1.ReviewService_ServiceDesc, agentv1.ProjectService_ServiceDesc, agentv1.ChatService_ServiceDesc, agentv1.PreferencesService_ServiceDesc,
			agentv1.RepoEventService_ServiceDesc, agentv1.RepoHealthService_ServiceDesc, agentv1.LinearService_ServiceDesc},
		[]RegisterHandler{agentv1.RegisterAgentServiceHandler, agentv1.RegisterReviewServiceHandler, agentv1.RegisterProjectServiceHandler, agentv1.RegisterChatServiceHandler, agentv1.RegisterPreferencesServiceHandler,
			agentv1.RegisterRepoEventServiceHandler, agentv1.RegisterRepoHealthServiceHandler, agentv1.RegisterLinearServiceHandler}},
	{"builder", []grpc.ServiceDesc{builderv1.BuilderService_ServiceDesc}, []RegisterHandler{builderv1.RegisterBuilderServiceHandler}},
	{"ai",
		[]grpc.ServiceDesc{aiv1.AIService_ServiceDesc, aiv1.ModelRegistryService_ServiceDesc},
		[]RegisterHandler{aiv1.RegisterAIServiceHandler, aiv1.RegisterModelRegistryServiceHandler}},
	{"sandbox", []grpc.ServiceDesc{sandboxv1.SandboxService_ServiceDesc}, []RegisterHandler{sandboxv1.RegisterSandboxServiceHandler}},
	{"memory", []grpc.ServiceDesc{memoryv1.MemoryService_ServiceDesc}, []RegisterHandler{memoryv1.RegisterMemoryServiceHandler}},
	{"github", []grpc.ServiceDesc{githubv1.RepoService_ServiceDesc}, []RegisterHandler{githubv1.RegisterRepoServiceHandler}},
	{"skills", []grpc.ServiceDesc{skillsv1.SkillService_ServiceDesc}, []RegisterHandler{skillsv1.RegisterSkillServiceHandler}},
}

// For returns the contract of service, and false when there is none.
func For(service string) (Contract, bool) {
	for _, c := range All {
		if c.Service == service {
			return c, true
		}
	}
	return Contract{}, false
}
