package grpctest_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/thefold/thefold/pkg/grpctest"
)

// echo answers UnaryCall with the request's payload.
type echo struct {
	testgrpc.UnimplementedTestServiceServer
}

func (echo) UnaryCall(_ context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Payload: req.GetPayload()}, nil
}

// BenchmarkUnaryCall is what one authenticated unary call costs through the platform's
// server (every interceptor, authentication included) and client (grpcclient.Dial), against
// a bare grpc-go server and client over the same loopback TCP: the fixed cost every RPC of
// every service pays beyond gRPC's own, in time and allocations per call.
func BenchmarkUnaryCall(b *testing.B) {
	req := &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: make([]byte, 256)}}
	b.Run("bare", func(b *testing.B) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		s := grpc.NewServer()
		testgrpc.RegisterTestServiceServer(s, echo{})
		go func() { _ = s.Serve(lis) }()
		b.Cleanup(s.Stop)
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cc.Close() })
		call(b, context.Background(), testgrpc.NewTestServiceClient(cc), req)
	})
	b.Run("platform", func(b *testing.B) {
		// e.Conn is the platform's client (grpcclient.Dial).
		e := grpctest.Start(b, func(s *grpc.Server) { testgrpc.RegisterTestServiceServer(s, echo{}) })
		call(b, e.Context(b, "alice"), testgrpc.NewTestServiceClient(e.Conn), req)
	})
}

func call(b *testing.B, ctx context.Context, c testgrpc.TestServiceClient, req *testgrpc.SimpleRequest) {
	for range 100 { // connected and warm
		if _, err := c.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.UnaryCall(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
