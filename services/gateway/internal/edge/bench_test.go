package edge_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
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
//
// "floor" is the same call through tests/e2e/bareproxy's handler instead of the edge (a
// plain grpc-go client, protojson out, nothing else): what the edge costs beyond it is the
// difference, in allocations and CPU per call. "grpc-gateway" is the call through
// grpc-gateway's generated handler alone (bareproxy -grpc-gateway): the part of that
// difference the library itself costs.
func BenchmarkGetTaskThroughEdge(b *testing.B) {
	b.Run("floor", func(b *testing.B) { benchmarkGetTaskThroughEdge(b, floorBare) })
	b.Run("grpc-gateway", func(b *testing.B) { benchmarkGetTaskThroughEdge(b, floorGRPCGateway) })
	b.Run("tracing=off", func(b *testing.B) { benchmarkGetTaskThroughEdge(b, floorNone) })
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
		benchmarkGetTaskThroughEdge(b, floorNone)
	})
}

// floorKind is what serves the route instead of the edge, if anything.
type floorKind int

const (
	floorNone        floorKind = iota // the edge
	floorBare                         // tests/e2e/bareproxy's hand-written handler
	floorGRPCGateway                  // grpc-gateway's generated handler alone
)

func benchmarkGetTaskThroughEdge(b *testing.B, floor floorKind) {
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
	switch floor {
	case floorBare:
		h = bareProxy(b, env.Server.Addr())
	case floorGRPCGateway:
		h = gatewayAlone(b, env.Server.Addr())
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
	// CPU time per call (the process's: client, edge and server), which the machine's
	// other load disturbs far less than the wall-clock ns/op.
	cpu0 := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			get()
		}
	})
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bareProxy is tests/e2e/bareproxy's handler: GET /v1/tasks/{id} over one plain grpc-go
// connection with the caller's Authorization, the answer as protojson.
func bareProxy(b *testing.B, addr string) http.Handler {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	client := tasksv1.NewTaskServiceClient(conn)
	marshal := protojson.MarshalOptions{UseProtoNames: true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/v1/tasks/")
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		ctx := metadata.AppendToOutgoingContext(r.Context(), "authorization", r.Header.Get("Authorization"))
		resp, err := client.GetTask(ctx, &tasksv1.GetTaskRequest{Id: id})
		if err != nil {
			http.Error(w, status.Convert(err).Message(), http.StatusBadGateway)
			return
		}
		out, err := marshal.Marshal(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// gatewayAlone is tests/e2e/bareproxy's -grpc-gateway handler: the route through
// grpc-gateway's generated handler over one plain grpc-go connection, with the edge's
// marshaler options and nothing else.
func gatewayAlone(b *testing.B, addr string) http.Handler {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	mux := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard,
		&runtime.JSONPb{MarshalOptions: protojson.MarshalOptions{UseProtoNames: true}}))
	if err := tasksv1.RegisterTaskServiceHandlerClient(context.Background(), mux, tasksv1.NewTaskServiceClient(conn)); err != nil {
		b.Fatal(err)
	}
	return mux
}
