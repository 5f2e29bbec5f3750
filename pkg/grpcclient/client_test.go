package grpcclient_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
)

// flaky fails GetTask with UNAVAILABLE until it has been called failFirst times, and
// records what each call carried.
type flaky struct {
	tasksv1.UnimplementedTaskServiceServer
	failFirst    int32
	getCalls     atomic.Int32
	deleteCalls  atomic.Int32
	lastAuth     atomic.Value
	lastDeadline atomic.Value
}

func (f *flaky) GetTask(ctx context.Context, _ *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.lastAuth.Store(md.Get("authorization"))
	dl, _ := ctx.Deadline()
	f.lastDeadline.Store(dl)
	if f.getCalls.Add(1) <= f.failFirst {
		return nil, status.Error(codes.Unavailable, "try again")
	}
	return &tasksv1.GetTaskResponse{Task: &tasksv1.Task{Id: "t"}}, nil
}

func (f *flaky) DeleteTask(context.Context, *tasksv1.DeleteTaskRequest) (*tasksv1.DeleteTaskResponse, error) {
	f.deleteCalls.Add(1)
	return nil, status.Error(codes.Unavailable, "try again")
}

func serve(t *testing.T, f *flaky) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	tasksv1.RegisterTaskServiceServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func TestRetriesIdempotentMethodsOnly(t *testing.T) {
	t.Parallel()
	f := &flaky{failFirst: 2}
	conn, err := grpcclient.Dial(serve(t, f), grpcclient.Options{RetryMethods: []string{"thefold.tasks.v1.TaskService/GetTask"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := tasksv1.NewTaskServiceClient(conn)
	if _, err := c.GetTask(context.Background(), &tasksv1.GetTaskRequest{}); err != nil {
		t.Fatalf("GetTask after retries: %v", err)
	}
	if got := f.getCalls.Load(); got != 3 {
		t.Errorf("GetTask attempts = %d, want 3", got)
	}
	if _, err := c.DeleteTask(context.Background(), &tasksv1.DeleteTaskRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("DeleteTask: %v", err)
	}
	if got := f.deleteCalls.Load(); got != 1 {
		t.Errorf("DeleteTask (not idempotent) attempts = %d, want 1", got)
	}
}

func TestForwardsIdentityAndSetsDefaultDeadline(t *testing.T) {
	t.Parallel()
	f := &flaky{}
	conn, err := grpcclient.Dial(serve(t, f), grpcclient.Options{Timeout: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{UserID: "u1", Token: "tok-123"})
	before := time.Now()
	if _, err := tasksv1.NewTaskServiceClient(conn).GetTask(ctx, &tasksv1.GetTaskRequest{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.lastAuth.Load().([]string); len(got) != 1 || got[0] != "Bearer tok-123" {
		t.Errorf("authorization forwarded = %v", got)
	}
	dl, _ := f.lastDeadline.Load().(time.Time)
	if dl.IsZero() || dl.Before(before.Add(6*time.Second)) || dl.After(before.Add(8*time.Second)) {
		t.Errorf("deadline = %v, want about now+7s", dl)
	}
}

func TestReadOnlyMethods(t *testing.T) {
	t.Parallel()
	got := map[string]bool{}
	for _, m := range grpcclient.ReadOnlyMethods("thefold.tasks.v1") {
		got[m] = true
	}
	for _, m := range []string{"thefold.tasks.v1.TaskService/GetTask", "thefold.tasks.v1.TaskService/ListTasks", "thefold.tasks.v1.TaskService/WatchTasks", "thefold.tasks.v1.TaskService/GetTaskStats"} {
		if !got[m] {
			t.Errorf("%s not retried", m)
		}
	}
	for _, m := range []string{"thefold.tasks.v1.TaskService/CreateTask", "thefold.tasks.v1.TaskService/DeleteTask", "thefold.tasks.v1.TaskService/SetTaskStatus"} {
		if got[m] {
			t.Errorf("%s (changes state) would be retried", m)
		}
	}
	if len(grpcclient.ReadOnlyMethods("thefold.nothing.v1")) != 0 {
		t.Error("methods for an unknown package")
	}
}
