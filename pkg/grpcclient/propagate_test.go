package grpcclient_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/telemetry"
)

type traceRecorder struct {
	tasksv1.UnimplementedTaskServiceServer
	traceparent chan []string
}

func (r *traceRecorder) GetTask(ctx context.Context, _ *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.traceparent <- md.Get("traceparent")
	return &tasksv1.GetTaskResponse{}, nil
}

// TestPropagatesTraceWithoutExporter: without an exporter (telemetry.Setup with no
// endpoint) a call carries the caller's trace context, once, replacing a traceparent the
// caller's outgoing metadata already had.
func TestPropagatesTraceWithoutExporter(t *testing.T) {
	// Not parallel: it installs the global tracer provider and propagator.
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	shutdown, err := telemetry.Setup(context.Background(), "test", telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = shutdown(context.Background())
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})
	if telemetry.Exporting() {
		t.Fatal("Exporting without an endpoint")
	}
	rec := &traceRecorder{traceparent: make(chan []string, 1)}
	addr := serveTasks(t, rec)
	conn, err := grpcclient.Dial(addr, grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := tasksv1.NewTaskServiceClient(conn)

	ctx, span := otel.Tracer("test").Start(context.Background(), "caller")
	defer span.End()
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-00"
	for name, ctx := range map[string]context.Context{
		"plain":  ctx,
		"forged": metadata.AppendToOutgoingContext(ctx, "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
		"forged in md": metadata.NewOutgoingContext(ctx, metadata.Pairs("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"x-request-id", "r1")),
	} {
		if _, err := client.GetTask(ctx, &tasksv1.GetTaskRequest{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := <-rec.traceparent; len(got) != 1 || got[0] != want {
			t.Errorf("%s: traceparent %q, want [%q]", name, got, want)
		}
	}
	if _, err := client.GetTask(context.Background(), &tasksv1.GetTaskRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := <-rec.traceparent; len(got) != 0 {
		t.Errorf("a call outside any trace carries traceparent %q", got)
	}
	if sc := trace.SpanContextFromContext(ctx); !strings.Contains(want, sc.TraceID().String()) {
		t.Fatal("test setup: the caller's span is not in ctx")
	}
}

func serveTasks(t *testing.T, srv tasksv1.TaskServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	tasksv1.RegisterTaskServiceServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}
