package grpcclient_test

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/thefold/thefold/pkg/grpcclient"
)

// retryPkg is a contract made up for this test: its method names say the opposite of
// its options, so only a policy that reads the options passes.
const retryPkg = "thefold.retrytest.v1"

var registerRetryFile = sync.OnceValue(func() error {
	method := func(name string, level descriptorpb.MethodOptions_IdempotencyLevel) *descriptorpb.MethodDescriptorProto {
		m := &descriptorpb.MethodDescriptorProto{
			Name:       proto.String(name),
			InputType:  proto.String(".google.protobuf.Empty"),
			OutputType: proto.String(".google.protobuf.Empty"),
		}
		if level != descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN {
			m.Options = &descriptorpb.MethodOptions{IdempotencyLevel: level.Enum()}
		}
		return m
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("thefold/retrytest/v1/retrytest.proto"),
		Package:    proto.String(retryPkg),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/protobuf/empty.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("RetryService"),
			Method: []*descriptorpb.MethodDescriptorProto{
				method("GetThing", descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN),
				method("GetOrCreateThing", descriptorpb.MethodOptions_IDEMPOTENT),
				method("SummarizeThings", descriptorpb.MethodOptions_NO_SIDE_EFFECTS),
			},
		}},
	}
	_ = emptypb.Empty{} // links google/protobuf/empty.proto into GlobalFiles
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		return err
	}
	return protoregistry.GlobalFiles.RegisterFile(fd)
})

func TestRetryPolicyFollowsIdempotencyOption(t *testing.T) {
	t.Parallel()
	if err := registerRetryFile(); err != nil {
		t.Fatal(err)
	}
	retry := grpcclient.ReadOnlyMethods(retryPkg)

	// Every call fails UNAVAILABLE; the server counts attempts per method.
	var mu sync.Mutex
	calls := map[string]int{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		m, _ := grpc.MethodFromServerStream(ss)
		// Read the request first, as generated handlers do: failing before that trips a
		// grpc-go quirk (the exhausted retry surfaces as "EOF", not the status).
		if err := ss.RecvMsg(&emptypb.Empty{}); err != nil {
			return err
		}
		mu.Lock()
		calls[m]++
		mu.Unlock()
		return status.Error(codes.Unavailable, "try again")
	}))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpcclient.Dial(lis.Addr().String(), grpcclient.Options{RetryMethods: retry})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	cases := []struct {
		method string
		want   int
	}{
		{"GetThing", 1},         // named like a read, but the contract does not say so
		{"GetOrCreateThing", 1}, // IDEMPOTENT has an effect: only NO_SIDE_EFFECTS is retried
		{"SummarizeThings", 4},  // NO_SIDE_EFFECTS: retried up to maxAttempts
	}
	for _, tc := range cases {
		full := "/" + retryPkg + ".RetryService/" + tc.method
		err := conn.Invoke(context.Background(), full, &emptypb.Empty{}, &emptypb.Empty{})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: %v, want Unavailable", tc.method, err)
		}
		mu.Lock()
		got := calls[full]
		mu.Unlock()
		if got != tc.want {
			t.Errorf("%s: %d attempts, want %d", tc.method, got, tc.want)
		}
	}
}
