package telemetry_test

import (
	"context"
	"net"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/thefold/thefold/pkg/telemetry"
)

// collector is a minimal OTLP/gRPC trace collector that remembers what it received.
type collector struct {
	coltrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	services []string
	spans    []string
}

func (c *collector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				c.services = append(c.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.spans = append(c.spans, sp.GetName())
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// Not parallel: Setup installs the global tracer provider.
func TestSpansAreExportedOverOTLPWhenConfigured(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	shutdown, err := telemetry.Setup(t.Context(), "tasks", telemetry.Config{OTLPEndpoint: "http://" + lis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "GetTask")
	span.End()
	if err := shutdown(t.Context()); err != nil { // flushes the batch
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.spans) != 1 || col.spans[0] != "GetTask" {
		t.Fatalf("collector got spans %v", col.spans)
	}
	if len(col.services) == 0 || col.services[0] != "thefold-tasks" {
		t.Fatalf("collector got service names %v", col.services)
	}
}

func TestNoExporterWithoutEndpoint(t *testing.T) {
	shutdown, err := telemetry.Setup(t.Context(), "tasks", telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(context.Background(), "x")
	if !span.SpanContext().IsValid() {
		t.Error("spans should still carry trace ids for logs and propagation")
	}
	span.End()
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}
