package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/platform"
)

// meshClient is a pkg/client Client of the mesh with cfg's credentials.
func meshClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	cfg.Addrs = map[string]string{}
	for _, s := range platform.ServiceNames {
		cfg.Addrs[s] = mesh.GRPCAddr(s)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The Go client reaches every service with the caller's token, fills in a side-effecting
// request's request_id, and works with an API key exchanged for tokens.
func TestGoClient(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), liveness(time.Minute))
	defer cancel()
	c := meshClient(t, client.Config{Token: token})
	me, err := c.Auth().WhoAmI(ctx, &gatewayv1.WhoAmIRequest{})
	if err != nil || me.GetUserId() == "" {
		t.Fatalf("whoami: %v, %v", me, err)
	}
	repo := agentRepo(t, "client-"+time.Now().Format("150405.000000"))
	created, err := c.Tasks().CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "from the Go client", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Tasks().GetTask(ctx, &tasksv1.GetTaskRequest{Id: created.Task.Id})
	if err != nil || got.Task.Title != "from the Go client" {
		t.Fatalf("get: %v, %v", got, err)
	}
	if _, err := c.Agent().ListJobs(ctx, &agentv1.ListJobsRequest{PageSize: 1}); err != nil {
		t.Fatal(err)
	}

	userID, email := newUser(t, "go-client")
	access, _ := login(t, email, 0)
	code, body := rest(t, http.MethodPost, "/v1/auth/api-keys", access, map[string]any{"name": "go client"})
	if code != http.StatusOK {
		t.Fatalf("create an API key: %d %v", code, body)
	}
	byKey := meshClient(t, client.Config{APIKey: body["secret"].(string)})
	who, err := byKey.Auth().WhoAmI(ctx, &gatewayv1.WhoAmIRequest{})
	if err != nil || who.GetUserId() != userID {
		t.Fatalf("whoami by API key: %v, %v", who, err)
	}
	if _, err := meshClient(t, client.Config{APIKey: "tfk_nonsense"}).Tasks().ListTasks(ctx, &tasksv1.ListTasksRequest{}); err == nil {
		t.Fatal("a bad API key was taken")
	}
}

// A create sent while the tasks service is down waits for it (within its deadline), and its
// request_id makes the one task it creates, however often gRPC retried it.
func TestGoClientRidesOutARestart(t *testing.T) {
	alone(t)
	ctx, cancel := context.WithTimeout(context.Background(), liveness(time.Minute))
	defer cancel()
	c := meshClient(t, client.Config{Token: token})
	repo := agentRepo(t, "client-restart-"+time.Now().Format("150405.000000"))
	if err := mesh.Kill("tasks"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Tasks().CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "made across a restart", Repo: repo})
		done <- err
	}()
	time.Sleep(time.Second)
	startAgain(t)
	if err := <-done; err != nil {
		t.Fatalf("create across the restart: %v", err)
	}
	list, err := c.Tasks().ListTasks(ctx, &tasksv1.ListTasksRequest{Repo: repo})
	if err != nil || len(list.Tasks) != 1 {
		t.Fatalf("tasks of %s: %v, %v", repo, list, err)
	}
}
