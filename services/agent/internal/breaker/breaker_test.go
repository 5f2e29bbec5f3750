package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/services/agent/internal/breaker"
)

// flaky is a health service that answers with the error it is set to, counting calls.
type flaky struct {
	healthpb.UnimplementedHealthServer
	mu    sync.Mutex
	err   error
	calls atomic.Int32
}

func (f *flaky) set(err error) { f.mu.Lock(); f.err = err; f.mu.Unlock() }

func (f *flaky) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (f *flaky) Watch(_ *healthpb.HealthCheckRequest, s grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	f.calls.Add(1)
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
}

// serve runs f on a loopback gRPC server and returns a client whose calls go through
// the "ai" breaker of set.
func serve(t *testing.T, f *flaky, set *breaker.Set) healthpb.HealthClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), append(set.DialOptions("ai"), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func TestBreakerOpensOnFailuresAndClosesAfterATrial(t *testing.T) {
	var changes []string
	var mu sync.Mutex
	set := breaker.New(map[string]breaker.Config{"ai": {Failures: 3, Open: 300 * time.Millisecond}}, func(svc, from, to string) {
		mu.Lock()
		changes = append(changes, svc+":"+from+"->"+to)
		mu.Unlock()
	})
	f := &flaky{}
	c := serve(t, f, set)
	ctx := t.Context()
	check := func() error { _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); return err }

	if err := check(); err != nil {
		t.Fatal(err)
	}
	// Caller errors show the service up: they never open the breaker.
	f.set(status.Error(codes.InvalidArgument, "service: bad name"))
	for range 5 {
		if status.Code(check()) != codes.InvalidArgument {
			t.Fatal("a caller error was not passed through")
		}
	}
	if set.State("ai") != "closed" {
		t.Fatalf("state after caller errors = %s", set.State("ai"))
	}
	// A model that answered unusably is no outage of the ai service either.
	invalid, err := status.New(codes.Unavailable, "model m answered GenerateFile with output that cannot be used").WithDetails(
		&errdetails.ErrorInfo{Reason: "MODEL_OUTPUT_INVALID", Domain: "ai.thefold.dev"})
	if err != nil {
		t.Fatal(err)
	}
	f.set(invalid.Err())
	for range 5 {
		if status.Code(check()) != codes.Unavailable {
			t.Fatal("MODEL_OUTPUT_INVALID was not passed through")
		}
	}
	if set.State("ai") != "closed" {
		t.Fatalf("state after MODEL_OUTPUT_INVALID answers = %s", set.State("ai"))
	}
	// Three failures in a row open it; the fourth call does not reach the service.
	f.set(status.Error(codes.Unavailable, "down"))
	for range 3 {
		if status.Code(check()) != codes.Unavailable {
			t.Fatal("a failure was not passed through")
		}
	}
	before := f.calls.Load()
	err = check()
	var open *breaker.OpenError
	if !errors.As(err, &open) || open.Service != "ai" || open.Failures != 3 || status.Code(err) != codes.Unavailable {
		t.Fatalf("call on an open breaker: %v", err)
	}
	if until := time.Until(open.RetryAt); until <= 0 || until > 300*time.Millisecond {
		t.Errorf("retry at %v from now", until)
	}
	// Wrapped by the platform's interceptors, it travels as a status and is still known.
	wrapped := fmt.Errorf("downstream thefold.ai.v1.AIService/X: %w", status.ErrorProto(status.Convert(err).Proto()))
	if got, ok := breaker.Open(wrapped); !ok || got.Service != "ai" || got.Failures != 3 || !got.RetryAt.Equal(open.RetryAt.UTC()) {
		t.Errorf("Open(wrapped) = %v, %v", got, ok)
	}
	if _, ok := breaker.Open(status.Error(codes.Unavailable, "down")); ok {
		t.Error("a plain UNAVAILABLE was taken for an open breaker")
	}
	if f.calls.Load() != before {
		t.Error("an open breaker let the call through")
	}
	// Streams are refused too.
	if _, err := c.Watch(ctx, &healthpb.HealthCheckRequest{}); !errors.As(err, &open) {
		t.Fatalf("stream on an open breaker: %v", err)
	}
	// After the open period one trial goes through; its success closes the breaker.
	f.set(nil)
	time.Sleep(350 * time.Millisecond)
	if err := check(); err != nil {
		t.Fatalf("trial call: %v", err)
	}
	if set.State("ai") != "closed" {
		t.Errorf("state after a good trial = %s", set.State("ai"))
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"ai:closed->open", "ai:open->half-open", "ai:half-open->closed"}
	if len(changes) != len(want) {
		t.Fatalf("state changes %v, want %v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Fatalf("state changes %v, want %v", changes, want)
		}
	}
}

func TestCanceledCallsAndServicesWithoutABreaker(t *testing.T) {
	set := breaker.New(map[string]breaker.Config{"ai": {Failures: 1, Open: time.Minute}}, nil)
	f := &flaky{}
	c := serve(t, f, set)
	// A call the caller cancelled says nothing about the service.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Canceled {
		t.Fatalf("canceled call: %v", err)
	}
	if set.State("ai") != "closed" {
		t.Fatalf("a canceled call opened the breaker")
	}
	if set.State("github") != "" {
		t.Error("a service without a config has a breaker")
	}
	// A stream that opens counts as a success.
	s, err := c.Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	if breaker.Defaults["sandbox"].Failures != 3 || breaker.Defaults["ai"].Open != time.Minute {
		t.Errorf("defaults = %v", breaker.Defaults)
	}
}

func TestParseConfigs(t *testing.T) {
	got, err := breaker.ParseConfigs(" ai=2/3s , sandbox=1/500ms", breaker.Defaults)
	if err != nil {
		t.Fatal(err)
	}
	if got["ai"] != (breaker.Config{Failures: 2, Open: 3 * time.Second}) || got["sandbox"] != (breaker.Config{Failures: 1, Open: 500 * time.Millisecond}) ||
		got["github"] != breaker.Defaults["github"] {
		t.Errorf("configs %v", got)
	}
	if breaker.Defaults["ai"].Failures != 5 {
		t.Error("the defaults were changed")
	}
	for _, bad := range []string{"ai", "ai=5", "ai=x/1s", "ai=0/1s", "ai=5/-1s", "=5/1s"} {
		if _, err := breaker.ParseConfigs(bad, breaker.Defaults); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
