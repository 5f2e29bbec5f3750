package auth

import (
	"strings"
	"testing"

	// The scopes read each method's idempotency_level from the registered descriptors.
	_ "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	_ "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	_ "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

func TestCheckScopes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		scopes []string
		ok     bool
	}{
		{nil, true},
		{[]string{}, true},
		{[]string{"tasks:read"}, true},
		{[]string{"tasks:write", "agent:read", "auth:read"}, true},
		{[]string{"*:read"}, true},
		{[]string{"*:write"}, true},
		{[]string{"builder:read", "github:read", "memory:read", "skills:read", "ai:read", "sandbox:read"}, true},
		{[]string{"tasks"}, false},
		{[]string{"tasks:"}, false},
		{[]string{":read"}, false},
		{[]string{""}, false},
		{[]string{"tasks:admin"}, false},
		{[]string{"tasks:Read"}, false},
		{[]string{"Tasks:read"}, false},
		{[]string{"gateway:read"}, false}, // the gateway's area is "auth"
		{[]string{"tasks:read:write"}, false},
		{[]string{"*"}, false},
		{[]string{"tasks:read", "nowhere:write"}, false},
	}
	for _, tc := range cases {
		err := CheckScopes(tc.scopes)
		if (err == nil) != tc.ok {
			t.Errorf("CheckScopes(%q) = %v, want ok=%v", tc.scopes, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "<area>:<read|write>") {
			t.Errorf("CheckScopes(%q) = %v: does not say what is expected", tc.scopes, err)
		}
	}
}

func TestScopesAllow(t *testing.T) {
	t.Parallel()
	const (
		getTask        = "/thefold.tasks.v1.TaskService/GetTask"
		listTasks      = "/thefold.tasks.v1.TaskService/ListTasks"
		watchTasks     = "/thefold.tasks.v1.TaskService/WatchTasks" // a read-only stream
		createTask     = "/thefold.tasks.v1.TaskService/CreateTask"
		unknownTask    = "/thefold.tasks.v1.TaskService/NoSuchMethod"
		getJob         = "/thefold.agent.v1.AgentService/GetJob"
		startTask      = "/thefold.agent.v1.AgentService/StartTask"
		listAPIKeys    = "/thefold.gateway.v1.AuthService/ListAPIKeys"
		createAPIKey   = "/thefold.gateway.v1.AuthService/CreateAPIKey"
		whoAmI         = "/thefold.gateway.v1.AuthService/WhoAmI"
		listUsers      = "/thefold.gateway.v1.UserService/ListUsers"
		updateUser     = "/thefold.gateway.v1.UserService/UpdateUser"
		health         = "/grpc.health.v1.Health/Check"
		reflection     = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
		unknownService = "/thefold.nowhere.v1.Nothing/Do"
	)
	cases := []struct {
		scopes []string
		method string
		want   bool
	}{
		// No scopes: no narrowing.
		{nil, createTask, true},
		{[]string{}, updateUser, true},

		{[]string{"tasks:read"}, getTask, true},
		{[]string{"tasks:read"}, listTasks, true},
		{[]string{"tasks:read"}, watchTasks, true},
		{[]string{"tasks:read"}, createTask, false},
		{[]string{"tasks:read"}, unknownTask, false}, // not known to be read-only: a write
		{[]string{"tasks:read"}, getJob, false},      // another area
		{[]string{"tasks:write"}, getTask, true},     // write includes read
		{[]string{"tasks:write"}, createTask, true},
		{[]string{"tasks:write"}, unknownTask, true},
		{[]string{"tasks:write"}, startTask, false},

		{[]string{"agent:read"}, getJob, true},
		{[]string{"agent:read"}, startTask, false},
		{[]string{"tasks:read", "agent:write"}, startTask, true},
		{[]string{"tasks:read", "agent:write"}, createTask, false},

		// The gateway's services are the "auth" area.
		{[]string{"auth:read"}, listAPIKeys, true},
		{[]string{"auth:read"}, listUsers, true},
		{[]string{"auth:read"}, createAPIKey, false},
		{[]string{"auth:write"}, updateUser, true},
		{[]string{"tasks:write"}, listAPIKeys, false},

		// "*" is every area.
		{[]string{"*:read"}, getTask, true},
		{[]string{"*:read"}, getJob, true},
		{[]string{"*:read"}, listUsers, true},
		{[]string{"*:read"}, createTask, false},
		{[]string{"*:write"}, createTask, true},
		{[]string{"*:write"}, createAPIKey, true},
		{[]string{"*:write"}, unknownService, true},
		{[]string{"*:read"}, unknownService, false},

		// Asking who you are is always allowed; so are methods outside TheFold's packages.
		{[]string{"tasks:read"}, whoAmI, true},
		{[]string{"tasks:read"}, health, true},
		{[]string{"tasks:read"}, reflection, true},
		{[]string{"tasks:write"}, unknownService, false},
	}
	for _, tc := range cases {
		// Twice: the second answer comes from the per-method cache.
		for range 2 {
			if got := ScopesAllow(tc.scopes, tc.method); got != tc.want {
				t.Errorf("ScopesAllow(%q, %s) = %v, want %v", tc.scopes, tc.method, got, tc.want)
			}
		}
	}
}
