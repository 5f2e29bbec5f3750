package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/contracts"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/platform"
)

func dial(t testing.TB, svc string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(mesh.GRPCAddr(svc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func authed(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func rest(t testing.TB, method, path, tok string, body any) (int, map[string]any) {
	t.Helper()
	return restAt(t, mesh.GatewayURL(), method, path, tok, body)
}

// restAt is rest against the gateway at base (another stack's, or a gateway replica).
func restAt(t testing.TB, base, method, path, tok string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

func TestEveryServiceIsHealthyWithMetricsAndReflection(t *testing.T) {
	parallel(t)
	for _, svc := range platform.ServiceNames {
		t.Run(svc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn := dial(t, svc)
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health = %v, %v", resp.GetStatus(), err)
			}
			stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
				t.Fatal(err)
			}
			r, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range r.GetListServicesResponse().GetService() {
				names = append(names, s.GetName())
			}
			if !strings.Contains(strings.Join(names, " "), "thefold."+svc+".v1.") {
				t.Errorf("reflection lists %v, no thefold.%s.v1 service", names, svc)
			}
			m, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", mesh.Ports.Admin[svc]))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(m.Body)
			m.Body.Close()
			if m.StatusCode != 200 || !strings.Contains(string(body), "go_goroutines") {
				t.Errorf("/metrics: %d", m.StatusCode)
			}
		})
	}
}

func TestTaskCreatedOverRESTIsReadOverGRPC(t *testing.T) {
	parallel(t)
	code, body := rest(t, "POST", "/v1/tasks", token, map[string]any{"title": "x", "repo": "local/demo"})
	if code != http.StatusOK {
		t.Fatalf("POST /v1/tasks = %d %v", code, body)
	}
	task, _ := body["task"].(map[string]any)
	id, _ := task["id"].(string)
	if id == "" {
		t.Fatalf("no id in %v", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := tasksv1.NewTaskServiceClient(dial(t, "tasks")).GetTask(authed(ctx), &tasksv1.GetTaskRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetTask().GetTitle() != "x" || got.GetTask().GetRepo() != "local/demo" || got.GetTask().GetOwnerId() != "admin" {
		t.Fatalf("task over gRPC = %v", got.GetTask())
	}
}

func TestTaskCreatedOverGRPCIsReadOverREST(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	created, err := tasksv1.NewTaskServiceClient(dial(t, "tasks")).CreateTask(authed(ctx), &tasksv1.CreateTaskRequest{
		Title: "from gRPC", Repo: "local/demo", Labels: []string{"e2e"},
	})
	if err != nil {
		t.Fatal(err)
	}
	code, body := rest(t, "GET", "/v1/tasks/"+created.GetTask().GetId(), token, nil)
	if code != http.StatusOK {
		t.Fatalf("GET = %d %v", code, body)
	}
	task, _ := body["task"].(map[string]any)
	if task["title"] != "from gRPC" || task["status"] != "TASK_STATUS_BACKLOG" {
		t.Fatalf("task over REST = %v", task)
	}
}

func TestRequestsWithoutValidTokenAreRefused(t *testing.T) {
	parallel(t)
	for name, tok := range map[string]string{"no token": "", "garbage token": "not-a-jwt"} {
		t.Run("REST "+name, func(t *testing.T) {
			code, body := rest(t, "POST", "/v1/tasks", tok, map[string]any{"title": "x", "repo": "local/demo"})
			if code != http.StatusUnauthorized {
				t.Fatalf("code = %d %v, want 401", code, body)
			}
		})
	}
	// Every RPC of every service, called directly over gRPC without a token.
	for _, svc := range platform.ServiceNames {
		conn := dial(t, svc)
		c, _ := contracts.For(svc)
		for _, sd := range c.Services {
			t.Run("gRPC "+sd.ServiceName, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if sd.ServiceName == gatewayv1.AuthService_ServiceDesc.ServiceName {
					// Login RPCs are public by design; the rest need a token.
					_, err := gatewayv1.NewAuthServiceClient(conn).WhoAmI(ctx, &gatewayv1.WhoAmIRequest{})
					if status.Code(err) != codes.Unauthenticated {
						t.Fatalf("WhoAmI without token: %v", err)
					}
					return
				}
				grpctest.CallEveryMethod(t, ctx, conn, sd, codes.Unauthenticated)
			})
		}
	}
}

func TestGatewayFrontsEveryServiceAndServesOpenAPI(t *testing.T) {
	parallel(t)
	// The github, memory, skills, builder and agent services answer.
	for _, path := range []string{"/v1/repos", "/v1/memories", "/v1/skills", "/v1/builds", "/v1/jobs", "/v1/reviews", "/v1/audit-log", "/v1/projects"} {
		if code, body := rest(t, "GET", path, token, nil); code != http.StatusOK {
			t.Errorf("GET %s = %d %v", path, code, body)
		}
	}
	// The ai service's registry is served (admin).
	code, body := rest(t, "GET", "/v1/ai/providers?name=anthropic", token, nil)
	if ps, _ := body["providers"].([]any); code != http.StatusOK || len(ps) != 1 {
		t.Errorf("GET /v1/ai/providers?name=anthropic = %d %v", code, body)
	}
	code, body = rest(t, "GET", "/v1/auth/whoami", token, nil)
	if code != http.StatusOK || body["user_id"] != "admin" {
		t.Errorf("whoami = %d %v", code, body)
	}
	resp, err := http.Get(mesh.GatewayURL() + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var spec struct {
		Paths map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&spec); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/v1/tasks", "/v1/tasks/{id}", "/v1/jobs", "/v1/skills"} {
		if _, ok := spec.Paths[p]; !ok {
			t.Errorf("openapi.json lacks %s", p)
		}
	}
	if _, ok := spec.Paths["/v1/builds:start"]; ok {
		t.Error("internal RPC exposed")
	}
	if r, err := http.Get(mesh.GatewayURL() + "/healthz"); err != nil || r.StatusCode != 200 {
		t.Errorf("/healthz: %v %v", r, err)
	}
}

func TestWatchTasksSeesChangesMadeThroughTheGateway(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(30*time.Second))
	defer cancel()
	client := tasksv1.NewTaskServiceClient(dial(t, "tasks"))
	stream, err := client.WatchTasks(ctx, &tasksv1.WatchTasksRequest{Repo: "local/watched"})
	if err != nil {
		t.Fatal(err)
	}
	code, body := rest(t, "POST", "/v1/tasks", token, map[string]any{"title": "watch me", "repo": "local/watched"})
	if code != http.StatusOK {
		t.Fatalf("POST = %d %v", code, body)
	}
	id := body["task"].(map[string]any)["id"].(string)
	code, body = rest(t, "POST", "/v1/tasks/"+id+":setStatus", token, map[string]any{"status": "TASK_STATUS_IN_PROGRESS"})
	if code != http.StatusOK {
		t.Fatalf("set status = %d %v", code, body)
	}
	var last int64
	for _, want := range []tasksv1.TaskEventType{tasksv1.TaskEventType_TASK_EVENT_TYPE_CREATED, tasksv1.TaskEventType_TASK_EVENT_TYPE_STATUS_CHANGED} {
		ev, err := recvEvent(stream)
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetType() != want || ev.GetTaskId() != id || ev.GetId() <= last {
			t.Fatalf("event = %v, want %v for %s after %d", ev, want, id, last)
		}
		last = ev.GetId()
	}
	// An illegal transition through the edge is 400 FailedPrecondition naming both states.
	code, body = rest(t, "POST", "/v1/tasks/"+id+":setStatus", token, map[string]any{"status": "TASK_STATUS_PLANNED"})
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["message"]), "in_progress") {
		t.Fatalf("illegal transition = %d %v", code, body)
	}
}

// TestTaskRESTSurface walks the tasks REST mapping end to end: the paths, query parameters,
// PATCH with an inferred field mask, and the status codes of the error mapping.
func TestTaskRESTSurface(t *testing.T) {
	parallel(t)
	repo := "local/rest-surface"
	create := func(title string) string {
		code, body := rest(t, "POST", "/v1/tasks", token, map[string]any{"title": title, "repo": repo, "labels": []string{"api"}})
		if code != http.StatusOK {
			t.Fatalf("create = %d %v", code, body)
		}
		return body["task"].(map[string]any)["id"].(string)
	}
	a, b := create("a"), create("b")

	// Another user cannot see, change or delete them.
	priv, err := auth.LoadPrivateKey(filepath.Join(mesh.KeyDir(), auth.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	bob, _, err := auth.NewSigner(priv).Issue("bob", []string{auth.RoleUser}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ method, path string }{{"GET", "/v1/tasks/" + a}, {"PATCH", "/v1/tasks/" + a}, {"DELETE", "/v1/tasks/" + a}} {
		if code, body := rest(t, r.method, r.path, bob, map[string]any{"title": "mine"}); code != http.StatusNotFound {
			t.Errorf("bob %s %s = %d %v, want 404", r.method, r.path, code, body)
		}
	}
	if code, body := rest(t, "GET", "/v1/tasks?repo="+repo, bob, nil); code != http.StatusOK || body["tasks"] != nil {
		t.Errorf("bob lists %d %v, want nothing", code, body)
	}

	code, body := rest(t, "PATCH", "/v1/tasks/"+a, token, map[string]any{"title": "a2", "priority": "PRIORITY_HIGH"})
	if task, _ := body["task"].(map[string]any); code != http.StatusOK || task["title"] != "a2" || task["priority"] != "PRIORITY_HIGH" || task["labels"] == nil {
		t.Fatalf("PATCH = %d %v", code, body)
	}
	if code, body = rest(t, "POST", "/v1/tasks/"+a+"/dependencies", token, map[string]any{"blocked_by_id": b}); code != http.StatusOK {
		t.Fatalf("add dependency = %d %v", code, body)
	}
	if code, body = rest(t, "POST", "/v1/tasks/"+b+"/dependencies", token, map[string]any{"blocked_by_id": a}); code != http.StatusBadRequest {
		t.Fatalf("cycle = %d %v, want 400 (FailedPrecondition)", code, body)
	}
	code, body = rest(t, "GET", "/v1/tasks:graph?repo="+repo, token, nil)
	if order, _ := body["order"].([]any); code != http.StatusOK || len(order) != 2 || order[0] != b {
		t.Fatalf("graph = %d %v", code, body)
	}
	code, body = rest(t, "GET", "/v1/tasks?repo="+repo+"&label=api&page_size=1", token, nil)
	if tasks, _ := body["tasks"].([]any); code != http.StatusOK || len(tasks) != 1 || body["next_page_token"] == "" {
		t.Fatalf("list page 1 = %d %v", code, body)
	}
	code, body = rest(t, "GET", "/v1/tasks:stats?repo="+repo, token, nil)
	if code != http.StatusOK || body["total"] != "2" {
		t.Fatalf("stats = %d %v", code, body)
	}
	if code, body = rest(t, "DELETE", "/v1/tasks/"+a+"/dependencies/"+b, token, nil); code != http.StatusOK {
		t.Fatalf("remove dependency = %d %v", code, body)
	}
	if code, body = rest(t, "DELETE", "/v1/tasks/"+a, token, nil); code != http.StatusOK {
		t.Fatalf("delete = %d %v", code, body)
	}
	for _, tc := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"GET", "/v1/tasks/" + a, nil, http.StatusNotFound},
		{"GET", "/v1/tasks/not-a-uuid", nil, http.StatusBadRequest},
		{"GET", "/v1/tasks?page_size=1000", nil, http.StatusBadRequest},
		{"POST", "/v1/tasks", map[string]any{"repo": repo}, http.StatusBadRequest},
		{"POST", "/v1/tasks", map[string]any{"title": "x", "repo": repo, "status": "TASK_STATUS_NOPE"}, http.StatusBadRequest},
		{"POST", "/v1/tasks:planOrder", map[string]any{}, http.StatusBadRequest},
		// No open task: an empty order, and no model call (TestTasksPlanTaskOrderThroughAI
		// orders real tasks).
		{"POST", "/v1/tasks:planOrder", map[string]any{"repo": "e2e/nothing-open"}, http.StatusOK},
	} {
		if code, body := rest(t, tc.method, tc.path, token, tc.body); code != tc.want {
			t.Errorf("%s %s = %d %v, want %d", tc.method, tc.path, code, body, tc.want)
		}
	}
}

// TestWatchTasksOverREST follows the server stream through the gateway: newline-delimited
// JSON, one {"result": …} object per message. A heartbeat opens the stream (so the headers go
// out at once), the history after the cursor follows, then live events on the open stream.
func TestWatchTasksOverREST(t *testing.T) {
	parallel(t)
	repo := "local/rest-stream"
	create := func(title string) {
		if code, body := rest(t, "POST", "/v1/tasks", token, map[string]any{"title": title, "repo": repo}); code != http.StatusOK {
			t.Fatalf("create = %d %v", code, body)
		}
	}
	create("before")
	ctx, cancel := context.WithTimeout(context.Background(), liveness(30*time.Second))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", mesh.GatewayURL()+"/v1/tasks:watch?after_id=0&repo="+repo, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch = %d", resp.StatusCode)
	}
	dec := json.NewDecoder(resp.Body)
	heartbeats := 0
	next := func() (string, string) {
		for {
			var msg struct {
				Result struct {
					Type      string         `json:"type"`
					Task      map[string]any `json:"task"`
					Heartbeat map[string]any `json:"heartbeat"`
				} `json:"result"`
			}
			if err := dec.Decode(&msg); err != nil {
				t.Fatal(err)
			}
			if msg.Result.Heartbeat != nil {
				heartbeats++
				continue
			}
			title, _ := msg.Result.Task["title"].(string)
			return msg.Result.Type, title
		}
	}
	if typ, title := next(); typ != "TASK_EVENT_TYPE_CREATED" || title != "before" || heartbeats != 1 {
		t.Fatalf("history event = %s %q after %d heartbeats, want one heartbeat first", typ, title, heartbeats)
	}
	create("live")
	if typ, title := next(); typ != "TASK_EVENT_TYPE_CREATED" || title != "live" {
		t.Fatalf("live event = %s %q", typ, title)
	}
}

// TestWatchResumesAcrossARestartOfTasks restarts the tasks process under an open stream: the
// stream ends, the gateway reconnects by itself, and a client resuming from its last event id
// gets exactly what happened since.
func TestWatchResumesAcrossARestartOfTasks(t *testing.T) {
	alone(t)
	repo := "local/restart"
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(2*time.Minute))
	defer cancel()
	client := tasksv1.NewTaskServiceClient(dial(t, "tasks"))
	a, err := client.CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "before restart", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.WatchTasks(ctx, &tasksv1.WatchTasksRequest{Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := recvEvent(stream)
	if err != nil || ev.GetTaskId() != a.GetTask().GetId() {
		t.Fatalf("first event = %v, %v", ev, err)
	}
	cursor := ev.GetId()

	if err := mesh.Restart(ctx, "tasks", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := recvEvent(stream); err == nil {
		t.Fatal("stream survived its server's restart")
	}

	code, body := rest(t, "POST", "/v1/tasks", token, map[string]any{"title": "after restart", "repo": repo})
	if code != http.StatusOK {
		t.Fatalf("create through the gateway after the restart = %d %v", code, body)
	}
	resumed, err := client.WatchTasks(ctx, &tasksv1.WatchTasksRequest{Repo: repo, AfterId: cursor})
	if err != nil {
		t.Fatal(err)
	}
	ev, err = recvEvent(resumed)
	if err != nil || ev.GetTask().GetTitle() != "after restart" || ev.GetId() <= cursor {
		t.Fatalf("resumed event = %v, %v; want the task created after the restart", ev, err)
	}
}

// recvEvent receives the next event of a task stream, skipping heartbeats.
func recvEvent(s grpc.ServerStreamingClient[tasksv1.WatchTasksResponse]) (*tasksv1.WatchTasksResponse, error) {
	for {
		ev, err := s.Recv()
		if err != nil || ev.GetHeartbeat() == nil {
			return ev, err
		}
	}
}
