// Package authsvc implements the gateway's AuthService. WhoAmI is served now; login codes,
// API keys and revocation come with the gateway issue and return Unimplemented until then.
package authsvc

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
)

// PublicMethods are the RPCs a caller uses before it has a token.
var PublicMethods = []string{
	gatewayv1.AuthService_RequestLoginCode_FullMethodName,
	gatewayv1.AuthService_VerifyLoginCode_FullMethodName,
	gatewayv1.AuthService_RefreshToken_FullMethodName,
}

// UserServer is the UserService: user administration arrives with the gateway issue and
// answers Unimplemented until then.
type UserServer struct {
	gatewayv1.UnimplementedUserServiceServer
}

// Server is the AuthService.
type Server struct {
	gatewayv1.UnimplementedAuthServiceServer
}

// WhoAmI returns the caller as every service sees it.
func (s *Server) WhoAmI(ctx context.Context, _ *gatewayv1.WhoAmIRequest) (*gatewayv1.WhoAmIResponse, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return nil, err
	}
	role := gatewayv1.Role_ROLE_MEMBER
	if p.HasRole(auth.RoleAdmin) {
		role = gatewayv1.Role_ROLE_ADMIN
	}
	resp := &gatewayv1.WhoAmIResponse{UserId: p.UserID, Role: role, TokenId: p.TokenID}
	if !p.ExpiresAt.IsZero() {
		resp.ExpireTime = timestamppb.New(p.ExpiresAt)
	}
	return resp, nil
}
