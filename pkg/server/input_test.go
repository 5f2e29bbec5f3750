package server_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/errs"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/grpctest"
)

// rawCodec sends bytes as they are, so a test can put on the wire what a well-behaved
// client's marshaling refuses to produce (invalid UTF-8).
type rawCodec struct{}

type raw struct{ b []byte }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(*raw).b)}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	v.(*raw).b = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "proto" }

// badField returns the field named by err, which must be InvalidArgument.
func badField(t *testing.T, err error) string {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			return br.FieldViolations[0].Field
		}
	}
	t.Fatalf("no BadRequest detail in %v", err)
	return ""
}

// corrupt marshals m and replaces the placeholder PLACE in it with invalid UTF-8.
func corrupt(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.ReplaceAll(string(b), "PLACE", "PL\xffCE"))
}

// TestBadBytesAreInvalidArgument: a NUL byte or invalid UTF-8 in any string of a request is
// InvalidArgument naming the field, on unary and streaming RPCs, instead of Internal
// ("grpc: failed to unmarshal …") or a handler storing it.
func TestBadBytesAreInvalidArgument(t *testing.T) {
	t.Parallel()
	env := grpctest.Start(t, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, probe{}) })
	ctx := env.Context(t, "u1")
	c := tasksv1.NewTaskServiceClient(env.Conn)
	rawOpt := grpc.ForceCodecV2(rawCodec{})

	t.Run("invalid UTF-8 on the wire", func(t *testing.T) {
		cases := []struct {
			name, method string
			body         []byte
			want         string
		}{
			{"top level", tasksv1.TaskService_CreateTask_FullMethodName, corrupt(t, &tasksv1.CreateTaskRequest{Title: "PLACE"}), "title"},
			{"nested", tasksv1.TaskService_UpdateTask_FullMethodName, corrupt(t, &tasksv1.UpdateTaskRequest{Id: "x", Task: &tasksv1.Task{Labels: []string{"a", "PLACE"}}}), "task.labels[1]"},
			{"not protobuf at all", tasksv1.TaskService_CreateTask_FullMethodName, []byte{0xff, 0xff, 0xff}, "request"},
		}
		for _, tc := range cases {
			err := env.Conn.Invoke(ctx, tc.method, &raw{tc.body}, &raw{}, rawOpt)
			if got := badField(t, err); got != tc.want {
				t.Errorf("%s: field %q, want %q (%v)", tc.name, got, tc.want, err)
			}
		}
		// A server stream: the request is read inside the handler, through the interceptor.
		desc := &grpc.StreamDesc{StreamName: "WatchTasks", ServerStreams: true}
		s, err := env.Conn.NewStream(ctx, desc, tasksv1.TaskService_WatchTasks_FullMethodName, rawOpt)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMsg(&raw{corrupt(t, &tasksv1.WatchTasksRequest{Repo: "PLACE"})}); err != nil {
			t.Fatal(err)
		}
		_ = s.CloseSend()
		if got := badField(t, s.RecvMsg(&raw{})); got != "repo" {
			t.Errorf("stream: field %q, want repo", got)
		}
	})

	t.Run("NUL", func(t *testing.T) {
		_, err := c.CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "a\x00b"})
		if got := badField(t, err); got != "title" {
			t.Errorf("field %q, want title", got)
		}
		_, err = c.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Task: &tasksv1.Task{Title: "ok", Description: "\x00"}})
		if got := badField(t, err); got != "task.description" {
			t.Errorf("field %q, want task.description", got)
		}
	})

	t.Run("invalid UTF-8 from a Go client", func(t *testing.T) {
		// grpc-go refuses to marshal it; the client names the field instead of INTERNAL.
		_, err := c.CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "a\xffb"})
		if got := badField(t, err); got != "title" {
			t.Errorf("field %q, want title", got)
		}
	})
}

// relay is a SkillService whose GetSkill calls TaskService.GetTask (a downstream) and
// returns the error as it is; its ListSkills returns a wrapped driver error.
type relay struct {
	skillsv1.UnimplementedSkillServiceServer
	tasks tasksv1.TaskServiceClient
}

func (r *relay) GetSkill(ctx context.Context, _ *skillsv1.GetSkillRequest) (*skillsv1.GetSkillResponse, error) {
	_, err := r.tasks.GetTask(ctx, &tasksv1.GetTaskRequest{Id: "t1"})
	return nil, err
}

func (r *relay) ListSkills(ctx context.Context, _ *skillsv1.ListSkillsRequest) (*skillsv1.ListSkillsResponse, error) {
	return nil, fmt.Errorf("store: %w", &pgconn.PgError{Code: "42P01", Message: `relation "secret_table" does not exist`})
}

// DeleteSkill converts the downstream error explicitly.
func (r *relay) DeleteSkill(ctx context.Context, _ *skillsv1.DeleteSkillRequest) (*skillsv1.DeleteSkillResponse, error) {
	_, err := r.tasks.GetTask(ctx, &tasksv1.GetTaskRequest{Id: "t1"})
	if errs.DownstreamCode(err) == codes.NotFound {
		return nil, errs.Public(codes.NotFound, "skill's task t1 not found").Wrap(err)
	}
	return nil, err
}

type downstreamTasks struct {
	tasksv1.UnimplementedTaskServiceServer
}

func (downstreamTasks) GetTask(context.Context, *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	return nil, status.Error(codes.NotFound, "task t1 not found (dial tcp 10.0.0.3:9090)")
}

// TestErrorsThroughTheMesh: what a caller of a service sees when the service's handler
// fails with a driver error or with a downstream service's status.
func TestErrorsThroughTheMesh(t *testing.T) {
	t.Parallel()
	r := &relay{}
	env := grpctest.Start(t, func(s *grpc.Server) {
		tasksv1.RegisterTaskServiceServer(s, downstreamTasks{})
		skillsv1.RegisterSkillServiceServer(s, r)
	})
	conn, err := grpcclient.Dial(env.Server.Addr(), grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r.tasks = tasksv1.NewTaskServiceClient(conn)
	ctx := env.Context(t, "u1")
	skills := skillsv1.NewSkillServiceClient(env.Conn)

	_, err = skills.GetSkill(ctx, &skillsv1.GetSkillRequest{})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || strings.Contains(st.Message(), "10.0.0.3") || strings.Contains(st.Message(), "t1") {
		t.Errorf("downstream NotFound passed on as %v; want FailedPrecondition without its text", err)
	}
	_, err = skills.DeleteSkill(ctx, &skillsv1.DeleteSkillRequest{})
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != "skill's task t1 not found" {
		t.Errorf("explicit conversion: %v", err)
	}
	_, err = skills.ListSkills(ctx, &skillsv1.ListSkillsRequest{})
	if st := status.Convert(err); st.Code() != codes.Internal || strings.Contains(st.Message(), "secret_table") || !strings.Contains(st.Message(), "ref ") {
		t.Errorf("driver error: %v; want Internal with only a reference", err)
	}
	// The stream side: io.EOF stays the end of a stream, errors are the downstream's.
	w, err := tasksv1.NewTaskServiceClient(conn).WatchTasks(ctx, &tasksv1.WatchTasksRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	if err == io.EOF || errs.DownstreamCode(err) != codes.Unimplemented {
		t.Errorf("stream error = %v, want a downstream Unimplemented", err)
	}
}
