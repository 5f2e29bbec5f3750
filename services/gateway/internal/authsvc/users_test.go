package authsvc_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
)

// TestUserAdministration: only an admin administers users; a member sees only themselves.
func TestUserAdministration(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	rita, _, ritaCtx := h.member(t, "rita@example.com")
	sam := h.createUser(t, "sam@example.com", gatewayv1.Role_ROLE_MEMBER)

	t.Run("member", func(t *testing.T) {
		_, err := h.users.CreateUser(ritaCtx, &gatewayv1.CreateUserRequest{Email: "new@example.com"})
		grpctest.WantCode(t, err, codes.PermissionDenied)
		_, err = h.users.ListUsers(ritaCtx, &gatewayv1.ListUsersRequest{})
		grpctest.WantCode(t, err, codes.PermissionDenied)
		for _, id := range []string{rita.GetId(), sam.GetId()} {
			_, err = h.users.UpdateUser(ritaCtx, &gatewayv1.UpdateUserRequest{Id: id, User: &gatewayv1.User{Role: gatewayv1.Role_ROLE_ADMIN},
				UpdateMask: mask("role")})
			grpctest.WantCode(t, err, codes.PermissionDenied)
		}
		// Reading: themselves, yes; anyone else (or no one) is NOT_FOUND alike.
		got, err := h.users.GetUser(ritaCtx, &gatewayv1.GetUserRequest{Id: rita.GetId()})
		if err != nil || got.GetUser().GetEmail() != "rita@example.com" {
			t.Errorf("GetUser of self = %v, %v", got, err)
		}
		for _, id := range []string{sam.GetId(), authsvc.AdminUserID, uuid.NewString()} {
			_, err := h.users.GetUser(ritaCtx, &gatewayv1.GetUserRequest{Id: id})
			grpctest.WantCode(t, err, codes.NotFound)
		}
		// Nothing changed.
		if got, err := h.users.GetUser(h.admin, &gatewayv1.GetUserRequest{Id: sam.GetId()}); err != nil || !proto.Equal(got.GetUser(), sam) {
			t.Errorf("sam after the member's attempts = %v, %v", got, err)
		}
	})

	t.Run("service", func(t *testing.T) {
		_, err := h.users.ListUsers(h.env.ServiceContext(t, "agent", authsvc.AdminUserID), &gatewayv1.ListUsersRequest{})
		grpctest.WantCode(t, err, codes.PermissionDenied)
	})

	t.Run("admin", func(t *testing.T) {
		got, err := h.users.GetUser(h.admin, &gatewayv1.GetUserRequest{Id: authsvc.AdminUserID})
		if err != nil || got.GetUser().GetEmail() != adminEmail || got.GetUser().GetRole() != gatewayv1.Role_ROLE_ADMIN {
			t.Errorf("GetUser(admin) = %v, %v", got, err)
		}
		_, err = h.users.GetUser(h.admin, &gatewayv1.GetUserRequest{Id: uuid.NewString()})
		grpctest.WantCode(t, err, codes.NotFound)
		_, err = h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: uuid.NewString(), User: &gatewayv1.User{DisplayName: "x"},
			UpdateMask: mask("display_name")})
		grpctest.WantCode(t, err, codes.NotFound)

		// A taken address, in any case, is ALREADY_EXISTS and creates nothing.
		_, err = h.users.CreateUser(h.admin, &gatewayv1.CreateUserRequest{Email: "SAM@example.com", DisplayName: "Another Sam"})
		grpctest.WantCode(t, err, codes.AlreadyExists)

		created, err := h.users.CreateUser(h.admin, &gatewayv1.CreateUserRequest{Email: "tina@example.com", DisplayName: " Tina T ",
			Role: gatewayv1.Role_ROLE_ADMIN})
		if err != nil || created.GetUser().GetDisplayName() != "Tina T" || created.GetUser().GetRole() != gatewayv1.Role_ROLE_ADMIN {
			t.Fatalf("CreateUser = %v, %v", created, err)
		}

		// UpdateUser changes the fields in the mask, only.
		upd, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: sam.GetId(),
			User:       &gatewayv1.User{Id: sam.GetId(), DisplayName: "Samuel", Role: gatewayv1.Role_ROLE_ADMIN, Disabled: true, Email: "x@example.com"},
			UpdateMask: mask("display_name")})
		if err != nil {
			t.Fatalf("UpdateUser: %v", err)
		}
		if u := upd.GetUser(); u.GetDisplayName() != "Samuel" || u.GetRole() != gatewayv1.Role_ROLE_MEMBER || u.GetDisabled() ||
			u.GetEmail() != "sam@example.com" || !u.GetUpdateTime().AsTime().After(sam.GetUpdateTime().AsTime()) {
			t.Errorf("UpdateUser = %v", u)
		}

		// The list: by address, filtered, in pages.
		var all []string
		tok := ""
		for range 10 {
			resp, err := h.users.ListUsers(h.admin, &gatewayv1.ListUsersRequest{PageSize: 2, PageToken: tok})
			if err != nil {
				t.Fatalf("ListUsers: %v", err)
			}
			for _, u := range resp.GetUsers() {
				all = append(all, u.GetEmail())
			}
			if tok = resp.GetNextPageToken(); tok == "" {
				break
			}
		}
		if want := []string{adminEmail, "rita@example.com", "sam@example.com", "tina@example.com"}; strings.Join(all, " ") != strings.Join(want, " ") {
			t.Errorf("ListUsers pages = %v, want %v", all, want)
		}
		admins, err := h.users.ListUsers(h.admin, &gatewayv1.ListUsersRequest{Role: gatewayv1.Role_ROLE_ADMIN})
		if err != nil || len(admins.GetUsers()) != 2 || admins.GetUsers()[0].GetId() != authsvc.AdminUserID ||
			admins.GetUsers()[1].GetEmail() != "tina@example.com" {
			t.Errorf("ListUsers(admins) = %v, %v", admins, err)
		}
		if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: rita.GetId(), User: &gatewayv1.User{Disabled: true},
			UpdateMask: mask("disabled")}); err != nil {
			t.Fatal(err)
		}
		yes, no := true, false
		disabled, err := h.users.ListUsers(h.admin, &gatewayv1.ListUsersRequest{Disabled: &yes})
		if err != nil || len(disabled.GetUsers()) != 1 || disabled.GetUsers()[0].GetId() != rita.GetId() || !disabled.GetUsers()[0].GetDisabled() {
			t.Errorf("ListUsers(disabled) = %v, %v", disabled, err)
		}
		enabled, err := h.users.ListUsers(h.admin, &gatewayv1.ListUsersRequest{Disabled: &no, Role: gatewayv1.Role_ROLE_MEMBER})
		if err != nil || len(enabled.GetUsers()) != 1 || enabled.GetUsers()[0].GetId() != sam.GetId() {
			t.Errorf("ListUsers(enabled members) = %v, %v", enabled, err)
		}
	})
}

// TestLastAdmin: the last enabled admin can be neither disabled nor demoted.
func TestLastAdmin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, c := range []struct {
		path string
		user *gatewayv1.User
	}{{"disabled", &gatewayv1.User{Disabled: true}}, {"role", &gatewayv1.User{Role: gatewayv1.Role_ROLE_MEMBER}}} {
		_, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: authsvc.AdminUserID, User: c.user, UpdateMask: mask(c.path)})
		grpctest.WantCode(t, err, codes.FailedPrecondition, "last enabled admin")
	}
	// A disabled admin does not count.
	other := h.createUser(t, "uma@example.com", gatewayv1.Role_ROLE_ADMIN)
	if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: other.GetId(), User: &gatewayv1.User{Disabled: true},
		UpdateMask: mask("disabled")}); err != nil {
		t.Fatal(err)
	}
	_, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: authsvc.AdminUserID, User: &gatewayv1.User{Disabled: true},
		UpdateMask: mask("disabled")})
	grpctest.WantCode(t, err, codes.FailedPrecondition)
	// With another enabled admin, the first may go.
	if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: other.GetId(), User: &gatewayv1.User{Disabled: false},
		UpdateMask: mask("disabled")}); err != nil {
		t.Fatal(err)
	}
	upd, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: authsvc.AdminUserID, User: &gatewayv1.User{Role: gatewayv1.Role_ROLE_MEMBER},
		UpdateMask: mask("role")})
	if err != nil || upd.GetUser().GetRole() != gatewayv1.Role_ROLE_MEMBER {
		t.Fatalf("demoting the first admin with another admin enabled = %v, %v", upd, err)
	}
	// …and now the other is the last.
	uma := h.login(t, "uma@example.com")
	_, err = h.users.UpdateUser(bearer(t, uma.GetTokens().GetAccessToken()), &gatewayv1.UpdateUserRequest{Id: other.GetId(),
		User: &gatewayv1.User{Disabled: true}, UpdateMask: mask("disabled")})
	grpctest.WantCode(t, err, codes.FailedPrecondition)
}

// TestDisableUser: disabling a user refuses their access tokens and API keys; enabling them
// again brings the keys back, not the tokens.
func TestDisableUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	victor, login, ctx := h.member(t, "victor@example.com")
	k, err := h.auth.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	access := login.GetTokens().GetAccessToken()
	if _, err := h.whoAmI(t, k.GetSecret()); err != nil {
		t.Fatalf("WhoAmI with the key: %v", err)
	}
	ex, err := h.identity.ExchangeAPIKey(h.anon, &gatewayv1.ExchangeAPIKeyRequest{ApiKey: k.GetSecret()})
	if err != nil {
		t.Fatal(err)
	}
	watch := h.watchNew(t)

	setDisabled := func(d bool) {
		t.Helper()
		upd, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: victor.GetId(), User: &gatewayv1.User{Disabled: d},
			UpdateMask: mask("disabled")})
		if err != nil || upd.GetUser().GetDisabled() != d {
			t.Fatalf("UpdateUser(disabled=%v) = %v, %v", d, upd, err)
		}
	}
	setDisabled(true)
	msg := watch.next(t)
	if msg.GetType() != gatewayv1.RevocationType_REVOCATION_TYPE_USER || msg.GetRevocation().GetSubject() != victor.GetId() ||
		msg.GetRevocation().GetNotBefore() == nil {
		t.Fatalf("revocation %v, want user %s with not_before", msg, victor.GetId())
	}
	// Then that they are disabled: services stop acting for them (serviceonly_test.go).
	if msg := watch.next(t); msg.GetType() != gatewayv1.RevocationType_REVOCATION_TYPE_USER_DISABLED || msg.GetRevocation().GetSubject() != victor.GetId() {
		t.Fatalf("revocation %v, want user %s disabled", msg, victor.GetId())
	}
	h.waitRefused(t, "the disabled user's access token", access)
	h.waitRefused(t, "the disabled user's API key", k.GetSecret())
	h.waitRefused(t, "the disabled user's key token", ex.GetAccessToken())
	_, err = h.identity.ExchangeAPIKey(h.anon, &gatewayv1.ExchangeAPIKeyRequest{ApiKey: k.GetSecret()})
	grpctest.WantCode(t, err, codes.Unauthenticated)

	setDisabled(false)
	if m := watch.next(t); m.GetType() != gatewayv1.RevocationType_REVOCATION_TYPE_USER_ENABLED {
		t.Errorf("enabling: %v, want only the user enabled", m)
	}
	if m, ok := watch.within(300 * time.Millisecond); ok {
		t.Errorf("enabling made a revocation: %v", m)
	}
	// The key works again: a new exchange, and through the server's authenticator.
	ex2, err := h.identity.ExchangeAPIKey(h.anon, &gatewayv1.ExchangeAPIKeyRequest{ApiKey: k.GetSecret()})
	if err != nil {
		t.Fatalf("ExchangeAPIKey after enabling: %v", err)
	}
	if who, err := h.whoAmI(t, ex2.GetAccessToken()); err != nil || who.GetUserId() != victor.GetId() {
		t.Errorf("WhoAmI with a new key token = %v, %v", who, err)
	}
	if who, err := h.whoAmI(t, k.GetSecret()); err != nil || who.GetUserId() != victor.GetId() {
		t.Errorf("WhoAmI with the key after enabling = %v, %v", who, err)
	}
	// The old tokens stay refused.
	for _, tok := range []string{access, ex.GetAccessToken()} {
		_, err := h.whoAmI(t, tok)
		grpctest.WantCode(t, err, codes.Unauthenticated)
	}
	// The user logs in anew.
	again := h.login(t, "victor@example.com")
	if _, err := h.whoAmI(t, again.GetTokens().GetAccessToken()); err != nil {
		t.Errorf("WhoAmI after logging in again: %v", err)
	}
}

// TestRoleChange: a role change ends the user's sessions; their next login carries the new
// role.
func TestRoleChange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	wendy, login, _ := h.member(t, "wendy@example.com")
	if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: wendy.GetId(), User: &gatewayv1.User{Role: gatewayv1.Role_ROLE_ADMIN},
		UpdateMask: mask("role")}); err != nil {
		t.Fatal(err)
	}
	h.waitRefused(t, "the token from before the role change", login.GetTokens().GetAccessToken())
	_, err := h.auth.RefreshToken(h.anon, &gatewayv1.RefreshTokenRequest{RefreshToken: login.GetTokens().GetRefreshToken()})
	grpctest.WantCode(t, err, codes.Unauthenticated)
	again := h.login(t, "wendy@example.com")
	if again.GetUser().GetRole() != gatewayv1.Role_ROLE_ADMIN {
		t.Errorf("user after the role change = %v", again.GetUser())
	}
	who, err := h.whoAmI(t, again.GetTokens().GetAccessToken())
	if err != nil || who.GetRole() != gatewayv1.Role_ROLE_ADMIN {
		t.Fatalf("WhoAmI after the role change = %v, %v", who, err)
	}
	if _, err := h.users.ListUsers(bearer(t, again.GetTokens().GetAccessToken()), &gatewayv1.ListUsersRequest{}); err != nil {
		t.Errorf("ListUsers as the new admin: %v", err)
	}
}
