package authsvc_test

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/validate"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
)

// recvFirst opens a WatchRevocations stream and returns the error of its first message.
func recvFirst(ctx context.Context, c gatewayv1.IdentityServiceClient, req *gatewayv1.WatchRevocationsRequest) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := c.WatchRevocations(ctx, req)
	if err != nil {
		return err
	}
	_, err = s.Recv()
	if err == io.EOF {
		return nil
	}
	return err
}

// TestBadInput sends malformed requests to every RPC of the three services: each is
// INVALID_ARGUMENT naming the field at fault.
func TestBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	a, u, id := h.auth, h.users, h.identity
	_, _, member := h.member(t, "bad-input@example.com")
	long := func(n int) string { return strings.Repeat("x", n) }

	type tc struct {
		method string // the RPC's name in its service
		name   string
		field  string
		call   func() error
	}
	auth := func(name, field string, call func() error) tc { return tc{"AuthService/", name, field, call} }
	cases := []tc{
		// AuthService.
		auth("RequestLoginCode", "email", func() error {
			_, err := a.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{})
			return err
		}),
		auth("RequestLoginCode", "email", func() error {
			_, err := a.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{Email: "not-an-address"})
			return err
		}),
		auth("RequestLoginCode", "email", func() error {
			_, err := a.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{Email: "Bob <bob@example.com>"})
			return err
		}),
		auth("RequestLoginCode", "email", func() error {
			_, err := a.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{Email: long(250) + "@example.com"})
			return err
		}),
		auth("VerifyLoginCode", "email", func() error {
			_, err := a.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Code: "123456"})
			return err
		}),
		auth("VerifyLoginCode", "code", func() error {
			_, err := a.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "bob@example.com"})
			return err
		}),
		auth("VerifyLoginCode", "code", func() error {
			_, err := a.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "bob@example.com", Code: "12345"})
			return err
		}),
		auth("VerifyLoginCode", "code", func() error {
			_, err := a.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "bob@example.com", Code: "12a456"})
			return err
		}),
		auth("RefreshToken", "refresh_token", func() error {
			_, err := a.RefreshToken(h.anon, &gatewayv1.RefreshTokenRequest{})
			return err
		}),
		auth("RefreshToken", "refresh_token", func() error {
			_, err := a.RefreshToken(h.anon, &gatewayv1.RefreshTokenRequest{RefreshToken: "not-a-refresh-token"})
			return err
		}),
		auth("RefreshToken", "refresh_token", func() error {
			_, err := a.RefreshToken(h.anon, &gatewayv1.RefreshTokenRequest{RefreshToken: "tfr_" + long(200)})
			return err
		}),
		auth("CreateAPIKey", "name", func() error {
			_, err := a.CreateAPIKey(member, &gatewayv1.CreateAPIKeyRequest{})
			return err
		}),
		auth("CreateAPIKey", "name", func() error {
			_, err := a.CreateAPIKey(member, &gatewayv1.CreateAPIKeyRequest{Name: long(101)})
			return err
		}),
		auth("CreateAPIKey", "scopes", func() error {
			_, err := a.CreateAPIKey(member, &gatewayv1.CreateAPIKeyRequest{Name: "ci", Scopes: []string{"tasks:read", "foo:bar"}})
			return err
		}),
		auth("CreateAPIKey", "scopes", func() error {
			_, err := a.CreateAPIKey(member, &gatewayv1.CreateAPIKeyRequest{Name: "ci", Scopes: []string{"tasks:admin"}})
			return err
		}),
		auth("CreateAPIKey", "scopes", func() error {
			_, err := a.CreateAPIKey(member, &gatewayv1.CreateAPIKeyRequest{Name: "ci", Scopes: slices.Repeat([]string{"tasks:read"}, 21)})
			return err
		}),
		auth("CreateAPIKey", "expire_time", func() error {
			_, err := a.CreateAPIKey(member, &gatewayv1.CreateAPIKeyRequest{Name: "ci", ExpireTime: timestamppb.New(time.Now().Add(-time.Minute))})
			return err
		}),
		auth("CreateAPIKey", "expire_time", func() error {
			_, err := a.CreateAPIKey(member, &gatewayv1.CreateAPIKeyRequest{Name: "ci", ExpireTime: &timestamppb.Timestamp{Seconds: 1 << 40, Nanos: -1}})
			return err
		}),
		auth("CreateAPIKey", "expire_time", func() error {
			_, err := a.CreateAPIKey(member, &gatewayv1.CreateAPIKeyRequest{Name: "ci", ExpireTime: timestamppb.New(time.Now().Add(10 * 365 * 24 * time.Hour))})
			return err
		}),
		auth("CreateAPIKey", "request_id", func() error {
			_, err := a.CreateAPIKey(member, &gatewayv1.CreateAPIKeyRequest{Name: "ci", RequestId: long(validate.MaxRequestID + 1)})
			return err
		}),
		auth("CreateAPIKey", "request_id", func() error {
			_, err := a.CreateAPIKey(member, &gatewayv1.CreateAPIKeyRequest{Name: "ci", RequestId: "has a space"})
			return err
		}),
		auth("ListAPIKeys", "page_size", func() error {
			_, err := a.ListAPIKeys(member, &gatewayv1.ListAPIKeysRequest{PageSize: -1})
			return err
		}),
		auth("ListAPIKeys", "page_size", func() error {
			_, err := a.ListAPIKeys(member, &gatewayv1.ListAPIKeysRequest{PageSize: 201})
			return err
		}),
		auth("ListAPIKeys", "page_token", func() error {
			_, err := a.ListAPIKeys(member, &gatewayv1.ListAPIKeysRequest{PageToken: "garbage!"})
			return err
		}),
		auth("ListAPIKeys", "page_token", func() error {
			// A ListUsers token is not a ListAPIKeys token.
			_, err := a.ListAPIKeys(member, &gatewayv1.ListAPIKeysRequest{PageToken: validate.EncodePageToken("u1", "bob@example.com")})
			return err
		}),
		auth("RevokeAPIKey", "id", func() error {
			_, err := a.RevokeAPIKey(member, &gatewayv1.RevokeAPIKeyRequest{})
			return err
		}),
		auth("RevokeAPIKey", "id", func() error {
			_, err := a.RevokeAPIKey(member, &gatewayv1.RevokeAPIKeyRequest{Id: "not-a-uuid"})
			return err
		}),
		auth("RevokeToken", "token", func() error {
			_, err := a.RevokeToken(member, &gatewayv1.RevokeTokenRequest{Token: "garbage"})
			return err
		}),
		auth("RevokeToken", "token", func() error {
			_, err := a.RevokeToken(member, &gatewayv1.RevokeTokenRequest{Token: "tfr_unknown"})
			return err
		}),
		auth("RevokeToken", "token", func() error {
			_, err := a.RevokeToken(member, &gatewayv1.RevokeTokenRequest{Token: "tfk_an-api-key"})
			return err
		}),
		// The server refuses a NUL byte in any string, naming the field, before the handler.
		auth("RequestLoginCode", "email", func() error {
			_, err := a.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{Email: "bob\x00@example.com"})
			return err
		}),

		// UserService (as the admin, who may call every RPC).
		{"UserService/", "CreateUser", "email", func() error {
			_, err := u.CreateUser(h.admin, &gatewayv1.CreateUserRequest{})
			return err
		}},
		{"UserService/", "CreateUser", "email", func() error {
			_, err := u.CreateUser(h.admin, &gatewayv1.CreateUserRequest{Email: "bob@"})
			return err
		}},
		{"UserService/", "CreateUser", "role", func() error {
			_, err := u.CreateUser(h.admin, &gatewayv1.CreateUserRequest{Email: "bob@example.com", Role: gatewayv1.Role(7)})
			return err
		}},
		{"UserService/", "CreateUser", "display_name", func() error {
			_, err := u.CreateUser(h.admin, &gatewayv1.CreateUserRequest{Email: "bob@example.com", DisplayName: "Bob\nSmith"})
			return err
		}},
		{"UserService/", "CreateUser", "display_name", func() error {
			_, err := u.CreateUser(h.admin, &gatewayv1.CreateUserRequest{Email: "bob@example.com", DisplayName: long(201)})
			return err
		}},
		{"UserService/", "GetUser", "id", func() error {
			_, err := u.GetUser(h.admin, &gatewayv1.GetUserRequest{})
			return err
		}},
		{"UserService/", "GetUser", "id", func() error {
			_, err := u.GetUser(h.admin, &gatewayv1.GetUserRequest{Id: "not-a-uuid"})
			return err
		}},
		{"UserService/", "ListUsers", "page_token", func() error {
			_, err := u.ListUsers(h.admin, &gatewayv1.ListUsersRequest{PageToken: "garbage!"})
			return err
		}},
		{"UserService/", "ListUsers", "page_token", func() error {
			_, err := u.ListUsers(h.admin, &gatewayv1.ListUsersRequest{PageToken: validate.EncodePageToken("k1", "x", "y")})
			return err
		}},
		{"UserService/", "ListUsers", "page_size", func() error {
			_, err := u.ListUsers(h.admin, &gatewayv1.ListUsersRequest{PageSize: 500})
			return err
		}},
		{"UserService/", "ListUsers", "role", func() error {
			_, err := u.ListUsers(h.admin, &gatewayv1.ListUsersRequest{Role: gatewayv1.Role(9)})
			return err
		}},
		{"UserService/", "UpdateUser", "id", func() error {
			_, err := u.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"display_name"}}})
			return err
		}},
		{"UserService/", "UpdateUser", "update_mask", func() error {
			// No mask and no updatable field set (an empty mask means the fields present).
			_, err := u.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: authsvc.AdminUserID, User: &gatewayv1.User{Id: authsvc.AdminUserID}})
			return err
		}},
		{"UserService/", "UpdateUser", "update_mask", func() error {
			_, err := u.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: authsvc.AdminUserID, User: &gatewayv1.User{Email: "root@example.com"},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"email"}}})
			return err
		}},
		{"UserService/", "UpdateUser", "user.id", func() error {
			_, err := u.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: authsvc.AdminUserID, User: &gatewayv1.User{Id: "someone-else", DisplayName: "Root"},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"display_name"}}})
			return err
		}},
		{"UserService/", "UpdateUser", "user.display_name", func() error {
			_, err := u.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: authsvc.AdminUserID, User: &gatewayv1.User{DisplayName: "  "},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"display_name"}}})
			return err
		}},
		{"UserService/", "UpdateUser", "user.role", func() error {
			_, err := u.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: authsvc.AdminUserID, User: &gatewayv1.User{},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"role"}}})
			return err
		}},
		{"UserService/", "ListLoginAttempts", "email", func() error {
			_, err := u.ListLoginAttempts(h.admin, &gatewayv1.ListLoginAttemptsRequest{Email: "not an address"})
			return err
		}},
		{"UserService/", "ListLoginAttempts", "outcome", func() error {
			_, err := u.ListLoginAttempts(h.admin, &gatewayv1.ListLoginAttemptsRequest{Outcome: gatewayv1.LoginOutcome(42)})
			return err
		}},
		{"UserService/", "ListLoginAttempts", "start_time", func() error {
			_, err := u.ListLoginAttempts(h.admin, &gatewayv1.ListLoginAttemptsRequest{StartTime: &timestamppb.Timestamp{Nanos: -1}})
			return err
		}},
		{"UserService/", "ListLoginAttempts", "page_size", func() error {
			_, err := u.ListLoginAttempts(h.admin, &gatewayv1.ListLoginAttemptsRequest{PageSize: -3})
			return err
		}},
		{"UserService/", "ListLoginAttempts", "page_token", func() error {
			_, err := u.ListLoginAttempts(h.admin, &gatewayv1.ListLoginAttemptsRequest{PageToken: validate.EncodePageToken("la1", "-5")})
			return err
		}},
		{"UserService/", "ListLoginAttempts", "page_token", func() error {
			// A ListUsers token is not a ListLoginAttempts token.
			_, err := u.ListLoginAttempts(h.admin, &gatewayv1.ListLoginAttemptsRequest{PageToken: validate.EncodePageToken("u1", "a@b.c")})
			return err
		}},
		{"UserService/", "GetLoginReport", "window", func() error {
			_, err := u.GetLoginReport(h.admin, &gatewayv1.GetLoginReportRequest{Window: durationpb.New(time.Second)})
			return err
		}},
		{"UserService/", "GetLoginReport", "window", func() error {
			_, err := u.GetLoginReport(h.admin, &gatewayv1.GetLoginReportRequest{Window: durationpb.New(100 * 24 * time.Hour)})
			return err
		}},
		{"UserService/", "GetLoginReport", "min_failures", func() error {
			_, err := u.GetLoginReport(h.admin, &gatewayv1.GetLoginReportRequest{MinFailures: 1001})
			return err
		}},

		// IdentityService (WatchRevocations: services only; ExchangeAPIKey: public).
		{"IdentityService/", "WatchRevocations", "after_id", func() error {
			return recvFirst(h.asService(t, h.anon, "agent"), id, &gatewayv1.WatchRevocationsRequest{AfterId: -1})
		}},
		{"IdentityService/", "ExchangeAPIKey", "api_key", func() error {
			_, err := id.ExchangeAPIKey(h.anon, &gatewayv1.ExchangeAPIKeyRequest{})
			return err
		}},
	}

	covered := map[string]bool{}
	for _, c := range cases {
		covered["thefold.gateway.v1."+c.method+c.name] = true
		t.Run(c.name+"/"+c.field, func(t *testing.T) {
			grpctest.WantInvalid(t, c.call(), c.field)
		})
	}
	for _, sd := range []grpc.ServiceDesc{gatewayv1.AuthService_ServiceDesc, gatewayv1.UserService_ServiceDesc, gatewayv1.IdentityService_ServiceDesc} {
		var names []string
		for _, m := range sd.Methods {
			names = append(names, m.MethodName)
		}
		for _, s := range sd.Streams {
			names = append(names, s.StreamName)
		}
		for _, n := range names {
			if n == "WhoAmI" {
				continue // it has no input to get wrong
			}
			if !covered[sd.ServiceName+"/"+n] {
				t.Errorf("no bad-input case for %s/%s", sd.ServiceName, n)
			}
		}
	}

	// Nothing above left a trace: no user, no key, no mail.
	list, err := u.ListUsers(h.admin, &gatewayv1.ListUsersRequest{})
	if err != nil || len(list.GetUsers()) != 2 {
		t.Errorf("ListUsers after bad input = %v, %v; want the admin and bad-input@", list, err)
	}
	keys, err := a.ListAPIKeys(member, &gatewayv1.ListAPIKeysRequest{ShowInactive: true})
	if err != nil || len(keys.GetApiKeys()) != 0 {
		t.Errorf("ListAPIKeys after bad input = %v, %v; want none", keys, err)
	}
}

// TestAuthentication: every RPC but the public ones needs a valid token; the public ones
// work without one, and ignore a bad one.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	public := map[string]bool{}
	for _, m := range authsvc.PublicMethods {
		public[m] = true
	}
	garbage := bearer(t, "not.a.jwt")
	badKey := bearer(t, "tfk_not-a-key")
	for _, sd := range []grpc.ServiceDesc{gatewayv1.AuthService_ServiceDesc, gatewayv1.UserService_ServiceDesc} {
		for _, m := range sd.Methods {
			full := "/" + sd.ServiceName + "/" + m.MethodName
			if public[full] {
				continue
			}
			t.Run(m.MethodName, func(t *testing.T) {
				for name, ctx := range map[string]context.Context{"no token": h.anon, "garbage token": garbage, "unknown API key": badKey} {
					err := h.env.Conn.Invoke(ctx, full, emptyRequest(t, full), emptyResponse(t, full))
					if code(err) != codes.Unauthenticated {
						t.Errorf("%s with %s: %v, want Unauthenticated", full, name, err)
					}
				}
			})
		}
	}
	// Public RPCs answer without a token, and a bad token does not stand in the way.
	for name, ctx := range map[string]context.Context{"no token": h.anon, "garbage token": garbage, "unknown API key": badKey} {
		if _, err := h.auth.RequestLoginCode(ctx, &gatewayv1.RequestLoginCodeRequest{Email: "nobody@example.com"}); err != nil {
			t.Errorf("RequestLoginCode with %s: %v", name, err)
		}
		_, err := h.auth.VerifyLoginCode(ctx, &gatewayv1.VerifyLoginCodeRequest{Email: "nobody@example.com", Code: "123456"})
		grpctest.WantCode(t, err, codes.Unauthenticated, "invalid or expired code")
		_, err = h.auth.RefreshToken(ctx, &gatewayv1.RefreshTokenRequest{RefreshToken: "tfr_unknown"})
		grpctest.WantCode(t, err, codes.Unauthenticated, "invalid or expired refresh token")
		_, err = h.identity.ExchangeAPIKey(ctx, &gatewayv1.ExchangeAPIKeyRequest{ApiKey: "tfk_unknown"})
		grpctest.WantCode(t, err, codes.Unauthenticated)
		_, err = h.identity.ExchangeAPIKey(ctx, &gatewayv1.ExchangeAPIKeyRequest{ApiKey: "garbage"})
		grpctest.WantCode(t, err, codes.Unauthenticated)
		// The revocations are for services only (TestWatchRevocationsIsForServices).
		err = recvFirst(ctx, h.identity, &gatewayv1.WatchRevocationsRequest{})
		grpctest.WantCode(t, err, codes.Unauthenticated)
	}
}
