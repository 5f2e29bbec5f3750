package grpctest

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// CallEveryMethod calls every RPC of the service described by sd with an empty request on
// conn, as ctx's caller, and checks each answers want. It is how a service whose RPCs are
// not implemented yet proves it serves its whole contract (and authenticates first).
func CallEveryMethod(t *testing.T, ctx context.Context, conn *grpc.ClientConn, sd grpc.ServiceDesc, want codes.Code) {
	t.Helper()
	svc, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(sd.ServiceName))
	if err != nil {
		t.Fatalf("%s: %v", sd.ServiceName, err)
	}
	methods := svc.(protoreflect.ServiceDescriptor).Methods()
	if n := len(sd.Methods) + len(sd.Streams); n != methods.Len() {
		t.Fatalf("%s: descriptor has %d methods, service desc %d", sd.ServiceName, methods.Len(), n)
	}
	for i := 0; i < methods.Len(); i++ {
		m := methods.Get(i)
		full := "/" + sd.ServiceName + "/" + string(m.Name())
		t.Run(string(m.Name()), func(t *testing.T) {
			req := dynamicpb.NewMessage(m.Input())
			resp := dynamicpb.NewMessage(m.Output())
			var err error
			if m.IsStreamingServer() || m.IsStreamingClient() {
				var s grpc.ClientStream
				s, err = conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: m.IsStreamingServer(), ClientStreams: m.IsStreamingClient()}, full)
				if err == nil {
					if err = s.SendMsg(req); err == nil {
						_ = s.CloseSend()
						err = s.RecvMsg(resp)
					}
				}
			} else {
				err = conn.Invoke(ctx, full, req, resp)
			}
			if status.Code(err) != want {
				t.Fatalf("%s: %v, want %v", full, err, want)
			}
		})
	}
}

// RequireServedAndAuthenticated runs the services that register registers behind the real
// server and checks every RPC of each of sds: Unauthenticated without a token, and want
// for an authenticated caller sending an empty (for most RPCs, malformed) request.
func RequireServedAndAuthenticated(t *testing.T, register func(*grpc.Server), want codes.Code, sds ...grpc.ServiceDesc) {
	t.Helper()
	env := Start(t, register)
	for _, sd := range sds {
		t.Run(sd.ServiceName+"/authenticated", func(t *testing.T) {
			CallEveryMethod(t, env.Context(t, "u1"), env.Conn, sd, want)
		})
		t.Run(sd.ServiceName+"/anonymous", func(t *testing.T) {
			CallEveryMethod(t, t.Context(), env.Conn, sd, codes.Unauthenticated)
		})
	}
}
