package authsvc_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// TestRefreshRotation: a refresh token buys the next pair once; a retry within the grace
// period gets the same successor; a reuse after the successor was used ends the session.
func TestRefreshRotation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	u, login, _ := h.member(t, "ivan@example.com")
	r1 := login.GetTokens().GetRefreshToken()
	sid := h.principal(t, login.GetTokens().GetAccessToken()).SessionID

	// Watch the session's revocation arrive, besides the server's verifier following it.
	watch := h.watchNew(t)

	refresh := func(tok string) (*gatewayv1.TokenPair, error) {
		resp, err := h.auth.RefreshToken(h.anon, &gatewayv1.RefreshTokenRequest{RefreshToken: tok})
		return resp.GetTokens(), err
	}
	p2, err := refresh(r1)
	if err != nil {
		t.Fatalf("RefreshToken: %v", err)
	}
	r2 := p2.GetRefreshToken()
	if r2 == "" || r2 == r1 || p2.GetAccessToken() == "" || p2.GetAccessToken() == login.GetTokens().GetAccessToken() {
		t.Fatalf("RefreshToken = %v: want a new pair", p2)
	}
	// The session keeps its end: rotation does not extend it (the first answer is not
	// rounded to the database's microseconds).
	if d := p2.GetRefreshExpireTime().AsTime().Sub(login.GetTokens().GetRefreshExpireTime().AsTime()); d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("refresh_expire_time %v, want the session's %v", p2.GetRefreshExpireTime().AsTime(), login.GetTokens().GetRefreshExpireTime().AsTime())
	}
	pr2 := h.principal(t, p2.GetAccessToken())
	if pr2.SessionID != sid || pr2.UserID != u.GetId() {
		t.Errorf("refreshed access token: %+v, want session %s of %s", pr2, sid, u.GetId())
	}
	if who, err := h.whoAmI(t, p2.GetAccessToken()); err != nil || who.GetUserId() != u.GetId() {
		t.Errorf("WhoAmI with the refreshed token = %v, %v", who, err)
	}

	// A retry (a lost response) gets the same successor.
	retry, err := refresh(r1)
	if err != nil {
		t.Fatalf("RefreshToken retried: %v", err)
	}
	if retry.GetRefreshToken() != r2 {
		t.Errorf("retried RefreshToken: refresh token %q, want the same successor %q", retry.GetRefreshToken(), r2)
	}
	if h.principal(t, retry.GetAccessToken()).SessionID != sid {
		t.Errorf("retried RefreshToken: another session")
	}

	// The successor works.
	p3, err := refresh(r2)
	if err != nil {
		t.Fatalf("RefreshToken with the successor: %v", err)
	}
	r3 := p3.GetRefreshToken()
	if r3 == r2 || r3 == r1 {
		t.Fatalf("successor's successor %q is not new", r3)
	}
	if _, err := h.whoAmI(t, p3.GetAccessToken()); err != nil {
		t.Fatalf("WhoAmI with the third access token: %v", err)
	}

	// The first token again, after its successor was used: theft. The session ends.
	_, err = refresh(r1)
	grpctest.WantCode(t, err, codes.Unauthenticated, "invalid or expired refresh token")
	msg := watch.next(t)
	if msg.GetType() != gatewayv1.RevocationType_REVOCATION_TYPE_SESSION || msg.GetRevocation().GetSubject() != sid {
		t.Fatalf("revocation %v, want session %s", msg, sid)
	}
	if exp := msg.GetRevocation().GetExpireTime().AsTime(); exp.Before(p3.GetAccessExpireTime().AsTime()) {
		t.Errorf("session revocation expires %v, before the session's last access token (%v)", exp, p3.GetAccessExpireTime().AsTime())
	}
	// Every access token of the session is refused, and so is every refresh token.
	for _, tok := range []string{login.GetTokens().GetAccessToken(), p2.GetAccessToken(), retry.GetAccessToken(), p3.GetAccessToken()} {
		h.waitRefused(t, "the ended session's access token", tok)
	}
	for _, tok := range []string{r1, r2, r3} {
		_, err := refresh(tok)
		grpctest.WantCode(t, err, codes.Unauthenticated)
	}
	// Another login is unaffected.
	other := h.login(t, "ivan@example.com")
	if _, err := h.whoAmI(t, other.GetTokens().GetAccessToken()); err != nil {
		t.Errorf("WhoAmI in a new session: %v", err)
	}
	if _, err := refresh(other.GetTokens().GetRefreshToken()); err != nil {
		t.Errorf("RefreshToken in a new session: %v", err)
	}
}

// TestRefreshDisabledUser: a disabled user's refresh is refused.
func TestRefreshDisabledUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	u, login, _ := h.member(t, "judy@example.com")
	if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: u.GetId(), User: &gatewayv1.User{Disabled: true},
		UpdateMask: mask("disabled")}); err != nil {
		t.Fatal(err)
	}
	_, err := h.auth.RefreshToken(h.anon, &gatewayv1.RefreshTokenRequest{RefreshToken: login.GetTokens().GetRefreshToken()})
	grpctest.WantCode(t, err, codes.Unauthenticated)
	// Enabled again, the old session stays ended.
	if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: u.GetId(), User: &gatewayv1.User{Disabled: false},
		UpdateMask: mask("disabled")}); err != nil {
		t.Fatal(err)
	}
	_, err = h.auth.RefreshToken(h.anon, &gatewayv1.RefreshTokenRequest{RefreshToken: login.GetTokens().GetRefreshToken()})
	grpctest.WantCode(t, err, codes.Unauthenticated)
}

// TestRevokeToken: a caller revokes their own access token, another access token, or a
// refresh token (logout, which ends the session).
func TestRevokeToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.createUser(t, "kim@example.com", gatewayv1.Role_ROLE_MEMBER)

	t.Run("own access token", func(t *testing.T) {
		l := h.login(t, "kim@example.com")
		tok := l.GetTokens().GetAccessToken()
		if _, err := h.auth.RevokeToken(bearer(t, tok), &gatewayv1.RevokeTokenRequest{}); err != nil {
			t.Fatalf("RevokeToken: %v", err)
		}
		start := time.Now()
		h.waitRefused(t, "the revoked token", tok)
		t.Logf("revocation applied after %v", time.Since(start))
		// Only that token: the session's refresh token still works, and its new token too.
		resp, err := h.auth.RefreshToken(h.anon, &gatewayv1.RefreshTokenRequest{RefreshToken: l.GetTokens().GetRefreshToken()})
		if err != nil {
			t.Fatalf("RefreshToken after revoking the access token: %v", err)
		}
		if _, err := h.whoAmI(t, resp.GetTokens().GetAccessToken()); err != nil {
			t.Errorf("WhoAmI with the refreshed token: %v", err)
		}
		// Revoking a revoked token is no error (with another token of the user).
		if _, err := h.auth.RevokeToken(bearer(t, resp.GetTokens().GetAccessToken()), &gatewayv1.RevokeTokenRequest{Token: tok}); err != nil {
			t.Errorf("RevokeToken of a revoked token: %v", err)
		}
	})

	t.Run("another access token", func(t *testing.T) {
		a, b := h.login(t, "kim@example.com"), h.login(t, "kim@example.com")
		if _, err := h.auth.RevokeToken(bearer(t, a.GetTokens().GetAccessToken()),
			&gatewayv1.RevokeTokenRequest{Token: b.GetTokens().GetAccessToken()}); err != nil {
			t.Fatalf("RevokeToken: %v", err)
		}
		h.waitRefused(t, "the revoked token", b.GetTokens().GetAccessToken())
		if _, err := h.whoAmI(t, a.GetTokens().GetAccessToken()); err != nil {
			t.Errorf("WhoAmI with the revoking token: %v", err)
		}
	})

	t.Run("refresh token", func(t *testing.T) {
		l := h.login(t, "kim@example.com")
		refreshed, err := h.auth.RefreshToken(h.anon, &gatewayv1.RefreshTokenRequest{RefreshToken: l.GetTokens().GetRefreshToken()})
		if err != nil {
			t.Fatal(err)
		}
		other := h.login(t, "kim@example.com") // another session, unaffected
		if _, err := h.auth.RevokeToken(bearer(t, l.GetTokens().GetAccessToken()),
			&gatewayv1.RevokeTokenRequest{Token: refreshed.GetTokens().GetRefreshToken()}); err != nil {
			t.Fatalf("RevokeToken: %v", err)
		}
		h.waitRefused(t, "the logged-out session's first access token", l.GetTokens().GetAccessToken())
		h.waitRefused(t, "the logged-out session's refreshed access token", refreshed.GetTokens().GetAccessToken())
		_, err = h.auth.RefreshToken(h.anon, &gatewayv1.RefreshTokenRequest{RefreshToken: refreshed.GetTokens().GetRefreshToken()})
		grpctest.WantCode(t, err, codes.Unauthenticated)
		if _, err := h.whoAmI(t, other.GetTokens().GetAccessToken()); err != nil {
			t.Errorf("WhoAmI in another session: %v", err)
		}
		// Logging out twice is no error.
		if _, err := h.auth.RevokeToken(bearer(t, other.GetTokens().GetAccessToken()),
			&gatewayv1.RevokeTokenRequest{Token: refreshed.GetTokens().GetRefreshToken()}); err != nil {
			t.Errorf("RevokeToken of an ended session's refresh token: %v", err)
		}
	})

	t.Run("service token", func(t *testing.T) {
		_, err := h.auth.RevokeToken(h.env.ServiceContext(t, "agent", "kim"), &gatewayv1.RevokeTokenRequest{})
		grpctest.WantCode(t, err, codes.PermissionDenied)
	})
}
