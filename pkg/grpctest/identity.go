package grpctest

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/thefold/thefold/pkg/auth"
)

// The identity probe is a one-method service answering with the principal its handler
// sees, so tests observe identity exactly where a real handler would, without depending
// on any service's contract.
const whoAmIMethod = "/thefold.test.IdentityProbe/WhoAmI"

var identityProbeDesc = grpc.ServiceDesc{
	ServiceName: "thefold.test.IdentityProbe",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "WhoAmI",
		Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, _ any) (any, error) {
				p, err := auth.MustFromContext(ctx)
				if err != nil {
					return nil, err
				}
				return structpb.NewStruct(map[string]any{"user": p.UserID, "service": p.Service, "admin": p.HasRole(auth.RoleAdmin)})
			}
			if icpt == nil {
				return h(ctx, in)
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: whoAmIMethod}, h)
		},
	}},
}

// RegisterIdentityProbe adds the identity probe to s.
func RegisterIdentityProbe(s *grpc.Server) { s.RegisterService(&identityProbeDesc, struct{}{}) }

// Identity is what the probe's handler saw.
type Identity struct {
	UserID  string
	Service string
	Admin   bool
}

// WhoAmI calls the identity probe on conn as ctx's caller.
func WhoAmI(ctx context.Context, conn grpc.ClientConnInterface) (Identity, error) {
	out := new(structpb.Struct)
	if err := conn.Invoke(ctx, whoAmIMethod, &emptypb.Empty{}, out); err != nil {
		return Identity{}, err
	}
	m := out.AsMap()
	user, _ := m["user"].(string)
	service, _ := m["service"].(string)
	admin, _ := m["admin"].(bool)
	return Identity{UserID: user, Service: service, Admin: admin}, nil
}
