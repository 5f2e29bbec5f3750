package server

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// rpcMetrics are the standard gRPC server metrics of go-grpc-middleware's Prometheus
// provider: grpc_server_started_total, grpc_server_handled_total,
// grpc_server_msg_{received,sent}_total and grpc_server_handling_seconds, labelled
// grpc_type, grpc_service, grpc_method (and grpc_code where it applies). The standard names
// and labels are what existing dashboards and alerts (the grpc-ecosystem mixins) expect, so
// we use the provider instead of our own collectors.
type rpcMetrics struct {
	m *grpcprom.ServerMetrics
}

// handlingBuckets span 0.5 ms to ~30 min: most RPCs take milliseconds, Watch streams live
// for their whole connection (the provider's default buckets stop at 10 s).
var handlingBuckets = prometheus.ExponentialBuckets(0.0005, 2.5, 14)

func newRPCMetrics(reg prometheus.Registerer) *rpcMetrics {
	m := grpcprom.NewServerMetrics(
		grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(handlingBuckets)),
	)
	reg.MustRegister(m)
	return &rpcMetrics{m: m}
}

func (m *rpcMetrics) unary() grpc.UnaryServerInterceptor   { return m.m.UnaryServerInterceptor() }
func (m *rpcMetrics) stream() grpc.StreamServerInterceptor { return m.m.StreamServerInterceptor() }

// initialize creates every registered method's series at zero, so a rate over an RPC that
// has not been called yet is 0 rather than absent. It runs once services are registered.
func (m *rpcMetrics) initialize(s *grpc.Server) { m.m.InitializeMetrics(s) }
