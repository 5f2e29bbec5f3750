// Package edge is the gateway's REST edge: grpc-gateway handlers for every public RPC of
// every service, each dialing its service, with the caller's Authorization header forwarded
// as gRPC metadata; plus /openapi.json, /healthz and /readyz.
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

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/openapi"
)

type registerFunc func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error

// registrations maps each service to the handlers of its public RPCs.
var registrations = map[string][]registerFunc{
	"gateway": {gatewayv1.RegisterAuthServiceHandler},
	"tasks":   {tasksv1.RegisterTaskServiceHandler},
	"agent":   {agentv1.RegisterAgentServiceHandler, agentv1.RegisterReviewServiceHandler, agentv1.RegisterProjectServiceHandler},
	"builder": {builderv1.RegisterBuilderServiceHandler},
	"ai":      {aiv1.RegisterAIServiceHandler, aiv1.RegisterModelRegistryServiceHandler},
	"sandbox": {sandboxv1.RegisterSandboxServiceHandler},
	"memory":  {memoryv1.RegisterMemoryServiceHandler},
	"github":  {githubv1.RegisterRepoServiceHandler},
	"skills":  {skillsv1.RegisterSkillServiceHandler},
}

// Services lists the services the edge fronts.
func Services() []string {
	out := make([]string, 0, len(registrations))
	for s := range registrations {
		out = append(out, s)
	}
	return out
}

// New returns the edge handler. conns has a client connection for each service in
// Services(); the caller owns them. Request metrics are registered on reg.
func New(ctx context.Context, log *slog.Logger, reg prometheus.Registerer, conns map[string]*grpc.ClientConn) (http.Handler, error) {
	metrics, err := newHTTPMetrics(reg, log)
	if err != nil {
		return nil, fmt.Errorf("edge: metrics: %w", err)
	}
	mux := runtime.NewServeMux(
		runtime.WithMiddlewares(metrics.middleware),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}),
		runtime.WithMetadata(func(ctx context.Context, r *http.Request) metadata.MD {
			return metadata.Pairs("x-request-id", r.Header.Get("X-Request-Id"))
		}),
	)
	for svc, regs := range registrations {
		conn, ok := conns[svc]
		if !ok {
			return nil, fmt.Errorf("edge: no connection for service %s", svc)
		}
		for _, reg := range regs {
			if err := reg(ctx, mux, conn); err != nil {
				return nil, fmt.Errorf("edge: register %s: %w", svc, err)
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
	return otelhttp.NewHandler(withRequestID(securityHeaders(root)), "gateway"), nil
}

// withRequestID gives every request an id (the caller's X-Request-Id when sensible), echoed
// in the response and passed to the services, so one request can be followed in every log.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 {
			id = uuid.NewString()
			r.Header.Set("X-Request-Id", id)
		}
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
