package edge_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/telemetry"
	"github.com/thefold/thefold/services/gateway/internal/edge"
)

type fixedTasks struct {
	tasksv1.UnimplementedTaskServiceServer
	task *tasksv1.Task
}

func (f *fixedTasks) GetTask(context.Context, *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	return &tasksv1.GetTaskResponse{Task: f.task}, nil
}

// BenchmarkGetTaskThroughEdge is GetTask over REST through the edge in front of a real gRPC
// server (the platform's interceptors, over loopback TCP) whose GetTask answers a fixed task:
// the edge's own cost, with client and server in the same process. "tracing=off" has no
// tracer provider or propagator installed; "tracing=no-exporter" installs them as a service
// does by default (telemetry.Setup without an OTLP endpoint: spans with ids, W3C
// propagation, nothing recorded), which is what the gateway runs with.
func BenchmarkGetTaskThroughEdge(b *testing.B) {
	b.Run("tracing=off", benchmarkGetTaskThroughEdge)
	b.Run("tracing=no-exporter", func(b *testing.B) {
		prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
		shutdown, err := telemetry.Setup(context.Background(), "gateway", telemetry.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = shutdown(context.Background())
			otel.SetTracerProvider(prevTP)
			otel.SetTextMapPropagator(prevProp)
		})
		benchmarkGetTaskThroughEdge(b)
	})
}

func benchmarkGetTaskThroughEdge(b *testing.B) {
	now := timestamppb.New(time.Now())
	svc := &fixedTasks{task: &tasksv1.Task{Id: "0196a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b", OwnerId: "u7", Repo: "local/bench", Title: "bench",
		Description: "a task the benchmark reads", Status: tasksv1.TaskStatus_TASK_STATUS_BACKLOG, Labels: []string{"bench"},
		CreateTime: now, UpdateTime: now}}
	env := grpctest.Start(b, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, svc) })
	conns := map[string]*grpc.ClientConn{}
	for _, s := range edge.Services() {
		conns[s] = env.Conn
	}
	h, err := edge.New(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), conns, edge.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	tok, _, err := env.Signer.Issue("u7", []string{"user"}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	url := srv.URL + "/v1/tasks/" + svc.task.Id
	get := func() {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	get()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			get()
		}
	})
}
