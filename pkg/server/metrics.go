package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// rpcMetrics counts handled RPCs and their latency by method and status code.
type rpcMetrics struct {
	handled *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func newRPCMetrics(reg prometheus.Registerer) *rpcMetrics {
	m := &rpcMetrics{
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grpc_server_handled_total",
			Help: "RPCs completed on the server, by method and status code.",
		}, []string{"grpc_method", "grpc_code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "grpc_server_handling_seconds",
			Help:    "Time to handle an RPC (for streams, its whole life).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"grpc_method"}),
	}
	reg.MustRegister(m.handled, m.latency)
	return m
}

func (m *rpcMetrics) observe(method string, start time.Time, err error) {
	m.handled.WithLabelValues(method, status.Code(err).String()).Inc()
	m.latency.WithLabelValues(method).Observe(time.Since(start).Seconds())
}

func (m *rpcMetrics) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := h(ctx, req)
		m.observe(info.FullMethod, start, err)
		return resp, err
	}
}

func (m *rpcMetrics) stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		start := time.Now()
		err := h(srv, ss)
		m.observe(info.FullMethod, start, err)
		return err
	}
}
