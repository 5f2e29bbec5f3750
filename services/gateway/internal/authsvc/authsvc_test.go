package authsvc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
)

func TestAuthService(t *testing.T) {
	t.Parallel()
	env := grpctest.Start(t, func(s *grpc.Server) {
		gatewayv1.RegisterAuthServiceServer(s, &authsvc.Server{})
		gatewayv1.RegisterUserServiceServer(s, &authsvc.UserServer{})
	}, authsvc.PublicMethods...)
	c := gatewayv1.NewAuthServiceClient(env.Conn)
	user := env.Context(t, "u1")

	who, err := c.WhoAmI(user, &gatewayv1.WhoAmIRequest{})
	if err != nil || who.GetUserId() != "u1" || who.GetRole() != gatewayv1.Role_ROLE_MEMBER || who.GetTokenId() == "" || who.GetExpireTime() == nil {
		t.Fatalf("WhoAmI = %v, %v", who, err)
	}

	// Every RPC, with an empty (malformed) request: what a caller with and without a token gets.
	cases := []struct {
		name      string
		call      func(context.Context) error
		authed    codes.Code
		anonymous codes.Code
	}{
		{"RequestLoginCode", func(ctx context.Context) error {
			_, err := c.RequestLoginCode(ctx, &gatewayv1.RequestLoginCodeRequest{})
			return err
		}, codes.Unimplemented, codes.Unimplemented},
		{"VerifyLoginCode", func(ctx context.Context) error {
			_, err := c.VerifyLoginCode(ctx, &gatewayv1.VerifyLoginCodeRequest{})
			return err
		}, codes.Unimplemented, codes.Unimplemented},
		{"RefreshToken", func(ctx context.Context) error {
			_, err := c.RefreshToken(ctx, &gatewayv1.RefreshTokenRequest{})
			return err
		}, codes.Unimplemented, codes.Unimplemented},
		{"CreateAPIKey", func(ctx context.Context) error {
			_, err := c.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{})
			return err
		}, codes.Unimplemented, codes.Unauthenticated},
		{"ListAPIKeys", func(ctx context.Context) error {
			_, err := c.ListAPIKeys(ctx, &gatewayv1.ListAPIKeysRequest{})
			return err
		}, codes.Unimplemented, codes.Unauthenticated},
		{"RevokeAPIKey", func(ctx context.Context) error {
			_, err := c.RevokeAPIKey(ctx, &gatewayv1.RevokeAPIKeyRequest{})
			return err
		}, codes.Unimplemented, codes.Unauthenticated},
		{"RevokeToken", func(ctx context.Context) error {
			_, err := c.RevokeToken(ctx, &gatewayv1.RevokeTokenRequest{})
			return err
		}, codes.Unimplemented, codes.Unauthenticated},
		{"WhoAmI", func(ctx context.Context) error { _, err := c.WhoAmI(ctx, &gatewayv1.WhoAmIRequest{}); return err }, codes.OK, codes.Unauthenticated},
	}
	if len(cases) != len(gatewayv1.AuthService_ServiceDesc.Methods) {
		t.Fatalf("%d cases for %d RPCs", len(cases), len(gatewayv1.AuthService_ServiceDesc.Methods))
	}
	for _, tc := range cases {
		if got := status.Code(tc.call(user)); got != tc.authed {
			t.Errorf("%s with a token: %v, want %v", tc.name, got, tc.authed)
		}
		if got := status.Code(tc.call(t.Context())); got != tc.anonymous {
			t.Errorf("%s without a token: %v, want %v", tc.name, got, tc.anonymous)
		}
	}
	// UserService: admin RPCs, every one authenticated, none implemented yet.
	grpctest.CallEveryMethod(t, user, env.Conn, gatewayv1.UserService_ServiceDesc, codes.Unimplemented)
	grpctest.CallEveryMethod(t, t.Context(), env.Conn, gatewayv1.UserService_ServiceDesc, codes.Unauthenticated)
}
