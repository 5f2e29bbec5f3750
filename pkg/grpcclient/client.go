// Package grpcclient dials other TheFold services: OpenTelemetry propagation, the caller's
// identity forwarded, a default deadline for calls that have none, and a retry policy for
// idempotent (read-only) RPCs on transient failures.
package grpcclient

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/telemetry"
)

// DefaultTimeout bounds calls whose context has no deadline.
const DefaultTimeout = 30 * time.Second

// Options tune a connection.
type Options struct {
	// Timeout for unary calls without a deadline; 0 means DefaultTimeout.
	Timeout time.Duration
	// RetryMethods are idempotent RPCs retried on UNAVAILABLE, as "package.Service/Method"
	// or "package.Service" for a whole service.
	RetryMethods []string
	// Extra dial options (tests add a bufconn dialer).
	DialOptions []grpc.DialOption
}

// Dial connects to target lazily; the connection is established on first use. target is
// "host:port", a gRPC target such as "dns:///tasks:9101", or a comma-separated list of
// host:port (one per replica of the service): calls are spread over what the target
// resolves to (round_robin), and an address that is down is skipped.
func Dial(target string, o Options) (*grpc.ClientConn, error) {
	target, listOpts, err := listTarget(target)
	if err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	sc, err := serviceConfig(o.RetryMethods)
	if err != nil {
		return nil, err
	}
	// Outermost first: errors of the call (whatever failed below) are marked as a
	// downstream's; a FailFast context turns WaitForReady off before anything waits.
	unary := []grpc.UnaryClientInterceptor{downstreamUnary(), failFastUnary(), deadlineUnary(timeout), auth.UnaryClientInterceptor()}
	stream := []grpc.StreamClientInterceptor{downstreamStream(), failFastStream(), auth.StreamClientInterceptor()}
	opts := []grpc.DialOption{
		// Transport security is provided by the deployment (mesh / private network);
		// identity is the bearer token on every call.
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sc),
		// A service restarting (deploy, crash) is absorbed: calls wait for the connection
		// within their deadline instead of failing at once while it reconnects. Callers
		// that answer people (the REST edge) opt out per call with FailFast.
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)),
		// A peer that comes back is found again within seconds: gRPC's default reconnect
		// backoff grows to two minutes, long enough for a waiting call to time out and for a
		// stream that must be followed (token revocations) to fall minutes behind.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
	// Client spans when this process exports spans (telemetry.Setup with an endpoint, which
	// runs before any dial); otherwise only the trace context is passed on (propagate.go).
	if telemetry.Exporting() {
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler()))
	} else {
		unary = append(unary, propagateUnary())
		stream = append(stream, propagateStream())
	}
	opts = append(opts, grpc.WithChainUnaryInterceptor(unary...), grpc.WithChainStreamInterceptor(stream...))
	opts = append(opts, listOpts...)
	opts = append(opts, o.DialOptions...)
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("grpcclient: dial %s: %w", target, err)
	}
	return conn, nil
}

func deadlineUnary(d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

type methodName struct {
	Service string `json:"service"`
	Method  string `json:"method,omitempty"`
}

func serviceConfig(retry []string) (string, error) {
	var names []methodName
	for _, m := range retry {
		svc, meth := m, ""
		for i := len(m) - 1; i >= 0; i-- {
			if m[i] == '/' {
				svc, meth = m[:i], m[i+1:]
				break
			}
		}
		names = append(names, methodName{Service: svc, Method: meth})
	}
	cfg := map[string]any{"loadBalancingPolicy": "round_robin"}
	if len(names) > 0 {
		cfg["methodConfig"] = []any{map[string]any{
			"name": names,
			"retryPolicy": map[string]any{
				"maxAttempts":          4,
				"initialBackoff":       "0.1s",
				"maxBackoff":           "2s",
				"backoffMultiplier":    2.0,
				"retryableStatusCodes": []string{"UNAVAILABLE"},
			},
		}}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("grpcclient: service config: %w", err)
	}
	return string(b), nil
}

// ReadOnlyMethods returns "package.Service/Method" for every RPC of the services in proto
// package pkg (e.g. "thefold.tasks.v1") linked into this binary whose contract declares
// `option idempotency_level = NO_SIDE_EFFECTS`. The contract says what is safe to retry,
// not the method's name: a GetOrCreate… or a Get… with a side effect is not retried unless
// its proto says so, and anything that changes state (Create, Update, Start, Commit, …) is
// never retried by the transport: its own request_id decides.
func ReadOnlyMethods(pkg string) []string {
	return readOnlyMethodsIn(protoregistry.GlobalFiles, pkg)
}

func readOnlyMethodsIn(files *protoregistry.Files, pkg string) []string {
	var out []string
	files.RangeFilesByPackage(protoreflect.FullName(pkg), func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				md := sd.Methods().Get(j)
				if noSideEffects(md) {
					out = append(out, string(sd.FullName())+"/"+string(md.Name()))
				}
			}
		}
		return true
	})
	return out
}

// noSideEffects reports whether md's options say it only reads. IDEMPOTENT (repeatable,
// but with an effect) is deliberately not enough: the conventions retry only reads.
func noSideEffects(md protoreflect.MethodDescriptor) bool {
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	return ok && opts.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
}
