// Package telemetry sets up OpenTelemetry tracing. With no OTLP endpoint configured, spans
// are still created and propagated (trace ids reach the logs and the next hop) but not exported.
package telemetry

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// Config selects the exporter. The other standard OTEL_EXPORTER_OTLP_* variables (headers,
// timeout, certificates) apply as well.
type Config struct {
	// OTLPEndpoint is an OTLP/gRPC collector URL, e.g. http://collector:4317 (http:// means
	// plaintext). Empty: spans carry trace ids (for logs and propagation) but are neither
	// recorded nor exported, unless a caller's trace is sampled.
	OTLPEndpoint string `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
}

// exporting is whether Setup installed an exporter.
var exporting atomic.Bool

// Exporting reports whether Setup installed an exporter, so spans this process records
// leave it. Without one, work that only feeds recorded spans (a client span per outgoing
// call, its attributes and events) can be skipped; trace context is still propagated.
func Exporting() bool { return exporting.Load() }

// Setup installs a global tracer provider and W3C propagation for service and returns a
// shutdown function that flushes spans. Call it before dialing other services (grpcclient
// decides at dial time whether calls get client spans).
func Setup(ctx context.Context, service string, cfg Config) (func(context.Context) error, error) {
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("thefold-"+service))
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if cfg.OTLPEndpoint != "" {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.OTLPEndpoint))
		if err != nil {
			return nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
		}
		// Every trace this process takes part in is recorded, also one whose caller passed it
		// on unsampled: a process without an exporter passes on its own traces unsampled
		// (below), and honouring that flag here recorded nothing of a REST request when only
		// the services downstream of the gateway exported.
		opts = append(opts, sdktrace.WithBatcher(exp),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample(), sdktrace.WithRemoteParentNotSampled(sdktrace.AlwaysSample()))))
	} else {
		// Nothing would receive the spans: do not record them (a recorded span and its
		// attributes and events cost the gateway about a fifth of its CPU per REST call).
		// Spans still get trace and span ids, which logs and outgoing calls carry; a trace a
		// caller sampled is still recorded and passed on as sampled (ParentBased), so a
		// service further down with an exporter still sees it.
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	exporting.Store(cfg.OTLPEndpoint != "")
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}
