package service_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/tasks/internal/service"
	"github.com/thefold/thefold/services/tasks/internal/store"
	"github.com/thefold/thefold/services/tasks/migrations"
)

// env is a tasks server on its own database, reached over loopback gRPC.
type env struct {
	client tasksv1.TaskServiceClient
	alice  context.Context
	bob    context.Context
	anon   context.Context
	pool   *pgxpool.Pool
	// server is the server the tasks service runs on; its signing key is the mesh's.
	server *grpctest.Env
}

func start(t *testing.T, opts ...service.Option) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "tasks", migrations.FS)
	hub := events.NewHub(pool)
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); _ = hub.Run(hubCtx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	srv := service.New(store.New(pool, hub), opts...)
	e := grpctest.Start(t, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, srv) })
	return &env{
		client: tasksv1.NewTaskServiceClient(e.Conn),
		alice:  e.Context(t, "alice"),
		bob:    e.Context(t, "bob"),
		anon:   t.Context(),
		pool:   pool,
		server: e,
	}
}

func (e *env) create(t *testing.T, ctx context.Context, req *tasksv1.CreateTaskRequest) *tasksv1.Task {
	t.Helper()
	if req.Repo == "" {
		req.Repo = "local/demo"
	}
	resp, err := e.client.CreateTask(ctx, req)
	if err != nil {
		t.Fatalf("CreateTask(%q): %v", req.Title, err)
	}
	return resp.Task
}

func (e *env) setStatus(t *testing.T, id string, to tasksv1.TaskStatus) *tasksv1.Task {
	t.Helper()
	resp, err := e.client.SetTaskStatus(e.alice, &tasksv1.SetTaskStatusRequest{Id: id, Status: to})
	if err != nil {
		t.Fatalf("SetTaskStatus(%v): %v", to, err)
	}
	return resp.Task
}

const (
	backlog    = tasksv1.TaskStatus_TASK_STATUS_BACKLOG
	planned    = tasksv1.TaskStatus_TASK_STATUS_PLANNED
	inProgress = tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS
	inReview   = tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW
	done       = tasksv1.TaskStatus_TASK_STATUS_DONE
	blocked    = tasksv1.TaskStatus_TASK_STATUS_BLOCKED
	cancelled  = tasksv1.TaskStatus_TASK_STATUS_CANCELLED
)

const missingID = "00000000-0000-4000-8000-000000000000"
