package telemetry_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
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

// startCollector serves a collector on loopback for the test and returns its endpoint URL.
func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return col, "http://" + lis.Addr().String()
}

// Not parallel: Setup installs the global tracer provider.
func TestSpansAreExportedOverOTLPWhenConfigured(t *testing.T) {
	col, endpoint := startCollector(t)

	shutdown, err := telemetry.Setup(t.Context(), "tasks", telemetry.Config{OTLPEndpoint: endpoint})
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

// A process that exports records the traces that reach it unsampled: a process without an
// exporter (the gateway, say) passes its own traces on with the sampled flag off, and a
// service that exports must still record its part of them.
func TestExporterRecordsWhatAnUnexportingCallerPassedOn(t *testing.T) {
	col, endpoint := startCollector(t)

	// The caller: no exporter, so its root span is passed on unsampled.
	callerShutdown, err := telemetry.Setup(t.Context(), "gateway", telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := otel.Tracer("test").Start(context.Background(), "GET /v1/tasks/{id}")
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	root.End()
	_ = callerShutdown(t.Context())
	if tp := carrier["traceparent"]; !strings.HasSuffix(tp, "-00") {
		t.Fatalf("the unexporting caller passed on %q, want an unsampled traceparent", tp)
	}

	shutdown, err := telemetry.Setup(t.Context(), "tasks", telemetry.Config{OTLPEndpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	remote := otel.GetTextMapPropagator().Extract(context.Background(), carrier)
	_, span := otel.Tracer("test").Start(remote, "GetTask")
	if !span.IsRecording() {
		t.Error("the exporting service does not record a span of the caller's unsampled trace")
	}
	if span.SpanContext().TraceID() != root.SpanContext().TraceID() {
		t.Errorf("the span is in trace %s, not the caller's %s", span.SpanContext().TraceID(), root.SpanContext().TraceID())
	}
	span.End()
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.spans) != 1 || col.spans[0] != "GetTask" {
		t.Fatalf("collector got spans %v, want GetTask", col.spans)
	}
}

// TestNoExporterWithoutEndpoint: without a collector, spans carry trace ids (for logs and
// calls) but are not recorded; a trace a caller sampled is still recorded and passed on as
// sampled, so a service further down that exports still sees it.
func TestNoExporterWithoutEndpoint(t *testing.T) {
	shutdown, err := telemetry.Setup(t.Context(), "tasks", telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := otel.Tracer("test").Start(context.Background(), "x")
	if !span.SpanContext().IsValid() {
		t.Error("spans should still carry trace ids for logs and propagation")
	}
	if span.IsRecording() || span.SpanContext().IsSampled() {
		t.Error("a span nothing receives is recorded")
	}
	carrier := propagation.HeaderCarrier(http.Header{})
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if tp := carrier.Get("traceparent"); !strings.HasPrefix(tp, "00-"+span.SpanContext().TraceID().String()) || !strings.HasSuffix(tp, "-00") {
		t.Errorf("traceparent = %q, want the span's trace id, not sampled", tp)
	}
	span.End()

	// A caller's sampled trace.
	in := propagation.HeaderCarrier(http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}})
	ctx = otel.GetTextMapPropagator().Extract(context.Background(), in)
	ctx, child := otel.Tracer("test").Start(ctx, "y")
	if !child.IsRecording() || child.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Error("a child of a sampled caller's span is not recorded in the caller's trace")
	}
	out := propagation.HeaderCarrier(http.Header{})
	otel.GetTextMapPropagator().Inject(ctx, out)
	if tp := out.Get("traceparent"); !strings.HasSuffix(tp, "-01") {
		t.Errorf("traceparent passed on = %q, want it sampled", tp)
	}
	child.End()
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}
