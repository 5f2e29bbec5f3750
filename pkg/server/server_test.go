package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// probe is a TaskService whose handlers misbehave on purpose.
type probe struct {
	tasksv1.UnimplementedTaskServiceServer
}

func (probe) GetTask(ctx context.Context, _ *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	panic("boom")
}

func (probe) ListTasks(ctx context.Context, _ *tasksv1.ListTasksRequest) (*tasksv1.ListTasksResponse, error) {
	return nil, errors.New(`ERROR: relation "tasks" does not exist (SQLSTATE 42P01)`)
}

func (probe) CreateTask(ctx context.Context, _ *tasksv1.CreateTaskRequest) (*tasksv1.CreateTaskResponse, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return nil, err
	}
	return &tasksv1.CreateTaskResponse{Task: &tasksv1.Task{OwnerId: p.UserID}}, nil
}

func TestInterceptorChain(t *testing.T) {
	t.Parallel()
	env := grpctest.Start(t, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, probe{}) })
	c := tasksv1.NewTaskServiceClient(env.Conn)
	ctx := env.Context(t, "u1")

	var hdr metadata.MD
	resp, err := c.CreateTask(ctx, &tasksv1.CreateTaskRequest{}, grpc.Header(&hdr))
	if err != nil || resp.GetTask().GetOwnerId() != "u1" {
		t.Fatalf("principal not passed to handler: %v %v", resp, err)
	}
	if len(hdr.Get("x-request-id")) != 1 {
		t.Errorf("no request id in response header: %v", hdr)
	}

	_, err = c.GetTask(ctx, &tasksv1.GetTaskRequest{})
	if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "boom") {
		t.Errorf("panic: %v, want masked Internal", err)
	}
	_, err = c.ListTasks(ctx, &tasksv1.ListTasksRequest{})
	if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "relation") || !strings.Contains(err.Error(), "ref ") {
		t.Errorf("raw error: %v, want masked Internal with a reference", err)
	}
	_, err = c.CreateTask(context.Background(), &tasksv1.CreateTaskRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("no token: %v", err)
	}
	_, err = c.DeleteTask(ctx, &tasksv1.DeleteTaskRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unimplemented: %v", err)
	}
	h, err := healthpb.NewHealthClient(env.Conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health without token: %v %v", h, err)
	}
}

func TestAdminEndpoints(t *testing.T) {
	t.Parallel()
	env := grpctest.StartWithAdmin(t, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, probe{}) })
	_, _ = tasksv1.NewTaskServiceClient(env.Conn).CreateTask(env.Context(t, "u1"), &tasksv1.CreateTaskRequest{})
	base := "http://" + env.Server.AdminAddr()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz = %d", code)
	}
	code, body := get("/metrics")
	want := `grpc_server_handled_total{grpc_code="OK",grpc_method="CreateTask",grpc_service="thefold.tasks.v1.TaskService",grpc_type="unary"} 1`
	if code != 200 || !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

func TestShutdownReportsNotServing(t *testing.T) {
	t.Parallel()
	env := grpctest.StartWithAdmin(t, func(s *grpc.Server) {})
	hc := healthpb.NewHealthClient(env.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first = %v %v", first, err)
	}
	env.Stop()
	// The watcher hears NOT_SERVING before the connection closes, or the stream ends.
	next, err := w.Recv()
	if err == nil && next.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("after stop: %v", next)
	}
}
