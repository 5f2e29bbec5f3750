// Package server runs a TheFold service: the gRPC server with the shared interceptor chain,
// grpc.health.v1 and reflection, and the admin HTTP port with /healthz, /readyz and
// Prometheus /metrics. Shutdown is driven by health: the service reports NOT_SERVING, waits
// for in-flight work to drain under a timeout, then stops.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
)

// Config is the part of every service's configuration that the server reads.
type Config struct {
	// GRPCAddr is where the service serves gRPC (":9101"); required.
	GRPCAddr string `env:"THEFOLD_GRPC_ADDR"`
	// AdminAddr is the internal admin port: /healthz, /readyz, /metrics and, with
	// THEFOLD_PPROF, profiles; required.
	AdminAddr string `env:"THEFOLD_ADMIN_ADDR"`
	// ShutdownTimeout is how long in-flight work may drain after NOT_SERVING before the
	// server stops.
	ShutdownTimeout time.Duration `env:"THEFOLD_SHUTDOWN_TIMEOUT, default=15s"`
	// DrainDelay keeps serving after NOT_SERVING is reported, so load balancers and
	// clients watching health move away before connections close.
	DrainDelay time.Duration `env:"THEFOLD_DRAIN_DELAY, default=0s"`
	// Profiling serves Go's runtime profiles (net/http/pprof) under /debug/pprof/ on the
	// admin port, for finding where a service spends its time. The admin port is
	// internal, like /metrics; profiles show code paths and timings, never request data.
	Profiling bool `env:"THEFOLD_PPROF, default=false"`
	// Limits bound connections, messages and each caller's request rate (limits.go).
	Limits Limits
}

// Validate reports missing addresses (config.Load validates Limits on its own).
func (c *Config) Validate() error {
	var errList []error
	if c.GRPCAddr == "" {
		errList = append(errList, errors.New("THEFOLD_GRPC_ADDR: required"))
	}
	if c.AdminAddr == "" {
		errList = append(errList, errors.New("THEFOLD_ADMIN_ADDR: required"))
	}
	return errors.Join(errList...)
}

// Options configure a Server.
type Options struct {
	Name   string
	Config Config
	Logger *slog.Logger
	// Auth verifies every RPC. Required: TheFold has no unauthenticated services.
	Auth *auth.Authenticator
	// Ready reports whether dependencies (the database) are usable; /readyz calls it.
	Ready func(context.Context) error
	// Listener, when set, is used instead of listening on Config.GRPCAddr (tests).
	Listener net.Listener
}

// Server is a running service.
type Server struct {
	opts     Options
	grpc     *grpc.Server
	health   *health.Server
	registry *prometheus.Registry
	metrics  *rpcMetrics
	lis      net.Listener
	adminLis net.Listener
	// stopping is closed when shutdown begins; long-lived streams (Watch RPCs) end then
	// instead of holding GracefulStop until its timeout. Clients resume from their cursor.
	stopping chan struct{}
}

// New builds the gRPC server and its interceptor chain. Register services on GRPC()
// before Run.
func New(opts Options) (*Server, error) {
	if opts.Auth == nil {
		return nil, errors.New("server: an authenticator is required")
	}
	if opts.Logger == nil {
		// The logger is passed, never the process-wide default: see TestNoGlobalLoggers.
		return nil, errors.New("server: a logger is required")
	}
	log := opts.Logger
	rates, err := opts.Config.Limits.rates()
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	limiter := newLimiter(rates)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := newRPCMetrics(reg)

	srvStreams := &streamCanceler{}
	panicHandler := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		// Masked like any internal error: a reference in the answer, the panic in the log.
		return errs.Mask(ctx, log, "", codes.Internal, fmt.Errorf("panic in handler: %v\n%s", p, debug.Stack()))
	})
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}

	// Order matters, outermost first:
	//   recovery   – a panic anywhere below becomes Internal instead of killing the process;
	//   request id – every later log line and the response carry it;
	//   metrics    – counts what clients actually see (after error mapping below);
	//   logging    – one line per call with the final code;
	//   auth       – nothing below runs for an unauthenticated caller;
	//   rate limit – after auth, so a call spends its caller's budget (the principal's;
	//                the client address only for calls without one) and a caller cannot
	//                spend another's by claiming to be them; before any work is done;
	//   input      – NUL bytes and invalid UTF-8 are InvalidArgument naming the field
	//                (with inputCodec, which keeps grpc-go from calling them Internal);
	//   errors     – innermost, so everything above sees mapped, masked statuses.
	// Tracing is the otelgrpc stats handler, which wraps the whole chain.
	unary := []grpc.UnaryServerInterceptor{
		recovery.UnaryServerInterceptor(panicHandler),
		requestIDUnary(),
		metrics.unary(),
		logging.UnaryServerInterceptor(slogAdapter(log), logOpts...),
		opts.Auth.UnaryServerInterceptor(),
		limiter.unary(),
		inputUnary(),
		errs.UnaryServerInterceptor(log),
	}
	stream := []grpc.StreamServerInterceptor{
		srvStreams.interceptor(),
		recovery.StreamServerInterceptor(panicHandler),
		requestIDStream(),
		metrics.stream(),
		logging.StreamServerInterceptor(slogAdapter(log), logOpts...),
		opts.Auth.StreamServerInterceptor(),
		limiter.stream(),
		inputStream(),
		errs.StreamServerInterceptor(log),
	}
	// Connection and message limits and the keepalive policy: see Limits.
	grpcOpts := append(opts.Config.Limits.serverOptions(),
		grpc.StatsHandler(otelgrpc.NewServerHandler()),
		grpc.ForceServerCodecV2(newInputCodec()),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	)
	s := grpc.NewServer(grpcOpts...)
	srv := &Server{opts: opts, registry: reg, metrics: metrics, stopping: make(chan struct{})}
	srvStreams.stopping = srv.stopping
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	srv.grpc, srv.health = s, hs
	return srv, nil
}

// GRPC is the server to register services on.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Registry is the Prometheus registry served on /metrics; services add their own collectors.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Listen binds the gRPC and admin addresses (so callers learn the ports before Run).
func (s *Server) Listen() error {
	var err error
	if s.lis == nil {
		s.lis = s.opts.Listener
		if s.lis == nil {
			if s.lis, err = net.Listen("tcp", s.opts.Config.GRPCAddr); err != nil {
				return fmt.Errorf("server: listen gRPC %s: %w", s.opts.Config.GRPCAddr, err)
			}
		}
	}
	if s.adminLis == nil && s.opts.Config.AdminAddr != "" {
		if s.adminLis, err = net.Listen("tcp", s.opts.Config.AdminAddr); err != nil {
			_ = s.lis.Close() // a failed start leaves no port bound
			s.lis = nil
			return fmt.Errorf("server: listen admin %s: %w", s.opts.Config.AdminAddr, err)
		}
	}
	return nil
}

// Stopping is closed when shutdown begins (after the drain delay): other listeners of the
// service (the gateway's REST edge) stop taking requests then, while the gRPC server drains.
func (s *Server) Stopping() <-chan struct{} { return s.stopping }

// Addr is the bound gRPC address (after Listen).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// AdminAddr is the bound admin address (after Listen), "" when there is none.
func (s *Server) AdminAddr() string {
	if s.adminLis == nil {
		return ""
	}
	return s.adminLis.Addr().String()
}

// Run serves until ctx is done, then shuts down gracefully. Services registered after Run
// starts are not served.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	log := s.opts.Logger
	s.metrics.initialize(s.grpc) // every method's series exists (at 0) before its first call
	errc := make(chan error, 2)
	// SERVING before the first call can be accepted: a health watch that came in first saw
	// NOT_SERVING from a server that was up.
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	go func() { errc <- s.grpc.Serve(s.lis) }()

	var admin *http.Server
	if s.adminLis != nil {
		admin = &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := admin.Serve(s.adminLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("admin server: %w", err)
			}
		}()
	}
	log.Info("serving", "grpc", s.Addr(), "admin", s.AdminAddr())

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}

	// Health first: callers watching it stop sending new work.
	s.health.Shutdown()
	if s.opts.Config.DrainDelay > 0 && runErr == nil {
		time.Sleep(s.opts.Config.DrainDelay)
	}
	close(s.stopping)
	timeout := s.opts.Config.ShutdownTimeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		log.Warn("graceful stop timed out; closing connections", "timeout", timeout)
		s.grpc.Stop()
	}
	if admin != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = admin.Shutdown(sctx)
	}
	log.Info("stopped")
	return runErr
}

func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		resp, err := s.health.Check(r.Context(), &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		if s.opts.Ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := s.opts.Ready(ctx); err != nil {
				s.opts.Logger.WarnContext(ctx, "not ready", "err", err)
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))
	if s.opts.Config.Profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// streamCanceler ends every open stream when the server starts stopping.
type streamCanceler struct {
	stopping chan struct{}
}

func (c *streamCanceler) interceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, cancel := context.WithCancel(ss.Context())
		defer cancel()
		go func() {
			select {
			case <-c.stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
		return h(srv, &wrappedStream{ServerStream: ss, ctx: ctx})
	}
}
