// Package edge is the gateway's REST edge: grpc-gateway handlers for every public RPC of
// every service, each dialing its service, with the caller's Authorization header forwarded
// as gRPC metadata; Watch routes as NDJSON or server-sent events; plus /openapi.json,
// /healthz and /readyz.
package edge

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/thefold/thefold/pkg/contracts"
	"github.com/thefold/thefold/pkg/gen/openapi"
	"github.com/thefold/thefold/pkg/validate"
)

// Services lists the services the edge fronts.
func Services() []string {
	out := make([]string, 0, len(contracts.All))
	for _, c := range contracts.All {
		out = append(out, c.Service)
	}
	return out
}

// New returns the edge handler. conns has a client connection for each service in
// Services(); the caller owns them. Request metrics are registered on reg.
func New(ctx context.Context, log *slog.Logger, reg prometheus.Registerer, conns map[string]*grpc.ClientConn, lim Limits) (http.Handler, error) {
	metrics, err := newHTTPMetrics(reg, log)
	if err != nil {
		return nil, fmt.Errorf("edge: metrics: %w", err)
	}
	mux := runtime.NewServeMux(
		runtime.WithMiddlewares(metrics.middleware),
		runtime.WithErrorHandler(errorHandler),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}),
		runtime.WithMetadata(func(ctx context.Context, r *http.Request) metadata.MD {
			return metadata.Pairs("x-request-id", r.Header.Get("X-Request-Id"))
		}),
	)
	for _, c := range contracts.All {
		conn, ok := conns[c.Service]
		if !ok {
			return nil, fmt.Errorf("edge: no connection for service %s", c.Service)
		}
		for _, reg := range c.Handlers {
			if err := reg(ctx, mux, conn); err != nil {
				return nil, fmt.Errorf("edge: register %s: %w", c.Service, err)
			}
		}
	}

	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	root.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var down []string
		for svc, conn := range conns {
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				down = append(down, svc)
			}
		}
		if len(down) > 0 {
			http.Error(w, "not ready: "+strings.Join(down, ", "), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	root.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openapi.Spec)
	})
	root.Handle("/", mux)
	return streamDeadlines(otelhttp.NewHandler(withRequestID(securityHeaders(guard(lim, serverSentEvents(root)))), "gateway")), nil
}

// withRequestID gives every request an id (the caller's X-Request-Id when sensible: at most
// 128 bytes of printable ASCII, which gRPC metadata and log lines carry safely), echoed in
// the response and passed to the services, so one request can be followed in every log.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 || !validate.PrintableASCII(id, true) {
			id = uuid.NewString()
		}
		r.Header.Set("X-Request-Id", id) // one value, the one echoed
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r)
	})
}

// securityHeaders sets the headers every API response should carry.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}
