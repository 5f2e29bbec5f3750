package authsvc_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/auth"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
	"github.com/thefold/thefold/services/gateway/internal/mailer"
	"github.com/thefold/thefold/services/gateway/internal/store"
)

// TestLogin: a user the admin created logs in with a code from the mail, once.
func TestLogin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)

	created := h.createUser(t, "Carol@Example.com", gatewayv1.Role_ROLE_UNSPECIFIED)
	if created.GetId() == "" || created.GetEmail() != "Carol@Example.com" || created.GetDisplayName() != "Carol" ||
		created.GetRole() != gatewayv1.Role_ROLE_MEMBER || created.GetDisabled() || created.GetCreateTime() == nil ||
		created.GetUpdateTime() == nil || created.GetLastLoginTime() != nil {
		t.Fatalf("CreateUser = %v", created)
	}
	got, err := h.users.GetUser(h.admin, &gatewayv1.GetUserRequest{Id: created.GetId()})
	if err != nil || !proto.Equal(got.GetUser(), created) {
		t.Fatalf("GetUser = %v, %v; want %v", got, err, created)
	}

	// The code goes to the address as the user was created, whatever case it is asked in.
	start := time.Now()
	resp, err := h.auth.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{Email: "carol@example.COM"})
	if err != nil {
		t.Fatalf("RequestLoginCode: %v", err)
	}
	if exp := resp.GetExpireTime().AsTime(); exp.Before(start.Add(h.cfg.CodeTTL-time.Second)) || exp.After(time.Now().Add(h.cfg.CodeTTL+time.Second)) {
		t.Errorf("expire_time %v, want about now + %v", exp, h.cfg.CodeTTL)
	}
	var sent []string
	eventually(t, 5*time.Second, "the login code", func() bool { sent = h.mailTo(t, "Carol@Example.com"); return len(sent) == 1 })

	login, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: " carol@EXAMPLE.com ", Code: sent[0]})
	if err != nil {
		t.Fatalf("VerifyLoginCode: %v", err)
	}
	if u := login.GetUser(); u.GetId() != created.GetId() || u.GetEmail() != created.GetEmail() || u.GetLastLoginTime() == nil ||
		u.GetLastLoginTime().AsTime().Before(start.Add(-time.Second)) {
		t.Errorf("VerifyLoginCode user = %v", u)
	}
	tok := login.GetTokens()
	now := time.Now()
	if tok.GetAccessToken() == "" || tok.GetRefreshToken() == "" || tok.GetAccessToken() == tok.GetRefreshToken() {
		t.Fatalf("tokens = %v", tok)
	}
	if exp := tok.GetAccessExpireTime().AsTime(); exp.Before(now.Add(h.cfg.AccessTTL-time.Minute)) || exp.After(now.Add(h.cfg.AccessTTL+time.Second)) {
		t.Errorf("access_expire_time %v, want about now + %v", exp, h.cfg.AccessTTL)
	}
	if exp := tok.GetRefreshExpireTime().AsTime(); exp.Before(now.Add(h.cfg.RefreshTTL-time.Minute)) || exp.After(now.Add(h.cfg.RefreshTTL+time.Second)) {
		t.Errorf("refresh_expire_time %v, want about now + %v", exp, h.cfg.RefreshTTL)
	}
	// The stored user says so too.
	got, err = h.users.GetUser(h.admin, &gatewayv1.GetUserRequest{Id: created.GetId()})
	if err != nil || got.GetUser().GetLastLoginTime() == nil {
		t.Errorf("GetUser after login = %v, %v; want last_login_time set", got, err)
	}

	// The access token works, as a member's.
	who, err := h.whoAmI(t, tok.GetAccessToken())
	if err != nil {
		t.Fatalf("WhoAmI: %v", err)
	}
	p := h.principal(t, tok.GetAccessToken())
	if who.GetUserId() != created.GetId() || who.GetRole() != gatewayv1.Role_ROLE_MEMBER || who.GetTokenId() != p.TokenID ||
		who.GetTokenId() == "" || !who.GetExpireTime().AsTime().Equal(tok.GetAccessExpireTime().AsTime()) || len(who.GetScopes()) != 0 {
		t.Errorf("WhoAmI = %v", who)
	}
	if p.SessionID == "" || p.APIKeyID != "" || len(p.Scopes) != 0 || p.HasRole(auth.RoleAdmin) {
		t.Errorf("access token principal = %+v, want a member's session token", p)
	}
	// A member reads themselves.
	self, err := h.users.GetUser(bearer(t, tok.GetAccessToken()), &gatewayv1.GetUserRequest{Id: created.GetId()})
	if err != nil || self.GetUser().GetId() != created.GetId() {
		t.Errorf("GetUser of self = %v, %v", self, err)
	}

	// A code works once.
	_, err = h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "carol@example.com", Code: sent[0]})
	grpctest.WantCode(t, err, codes.Unauthenticated, "invalid or expired code")

	// A second login is a second session.
	again := h.login(t, "carol@example.com")
	if p2 := h.principal(t, again.GetTokens().GetAccessToken()); p2.SessionID == p.SessionID || p2.UserID != created.GetId() {
		t.Errorf("second login's principal = %+v, want another session of %s", p2, created.GetId())
	}

	if got, want := h.audit(t, "carol@example.com"), []string{store.OutcomeCodeSent, store.OutcomeSuccess, store.OutcomeBadCode,
		store.OutcomeCodeSent, store.OutcomeSuccess}; !slices.Equal(got, want) {
		t.Errorf("audit = %v, want %v", got, want)
	}
}

// TestLoginCodeNotSent: an unknown address and a disabled user get the same answer as a
// known one, and no mail.
func TestLoginCodeNotSent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	knownUser := h.createUser(t, "known@example.com", gatewayv1.Role_ROLE_MEMBER)
	off := h.createUser(t, "off@example.com", gatewayv1.Role_ROLE_MEMBER)
	if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: off.GetId(), User: &gatewayv1.User{Disabled: true},
		UpdateMask: mask("disabled")}); err != nil {
		t.Fatalf("UpdateUser: %v", err)
	}

	answers := map[string]*gatewayv1.RequestLoginCodeResponse{}
	for _, email := range []string{"nobody@example.com", "off@example.com", "known@example.com"} {
		resp, err := h.auth.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{Email: email})
		if err != nil {
			t.Fatalf("RequestLoginCode(%s): %v", email, err)
		}
		answers[email] = resp
	}
	known := answers["known@example.com"]
	for _, email := range []string{"nobody@example.com", "off@example.com"} {
		a := answers[email]
		// The same shape: only the expiry, which moves with the clock, differs.
		if d := known.GetExpireTime().AsTime().Sub(a.GetExpireTime().AsTime()); d < 0 || d > 5*time.Second {
			t.Errorf("%s: expire_time %v, known address's %v", email, a.GetExpireTime().AsTime(), known.GetExpireTime().AsTime())
		}
		c := proto.Clone(a).(*gatewayv1.RequestLoginCodeResponse)
		c.ExpireTime = known.GetExpireTime()
		if !proto.Equal(c, known) {
			t.Errorf("%s: answer %v, known address's %v", email, a, known)
		}
	}
	// The known address's mail arrives; the others never get one.
	eventually(t, 5*time.Second, "the known address's code", func() bool { return len(h.mailTo(t, "known@example.com")) == 1 })
	time.Sleep(200 * time.Millisecond)
	for _, email := range []string{"nobody@example.com", "off@example.com"} {
		if got := h.mailTo(t, email); len(got) != 0 {
			t.Errorf("mail to %s: %v", email, got)
		}
		if got := h.audit(t, email); !slices.Equal(got, []string{store.OutcomeCodeNotSent}) {
			t.Errorf("audit of %s = %v, want [code_not_sent]", email, got)
		}
	}
	// A disabled user cannot log in even with a code sent before they were disabled.
	code := h.requestCode(t, "known@example.com")
	if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: knownUser.GetId(), User: &gatewayv1.User{Disabled: true},
		UpdateMask: mask("disabled")}); err != nil {
		t.Fatalf("UpdateUser: %v", err)
	}
	_, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "known@example.com", Code: code})
	grpctest.WantCode(t, err, codes.Unauthenticated, "invalid or expired code")
}

// TestLoginCodeSuperseded: only the newest code counts.
func TestLoginCodeSuperseded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.createUser(t, "dan@example.com", gatewayv1.Role_ROLE_MEMBER)
	first := h.requestCode(t, "dan@example.com")
	second := h.requestCode(t, "dan@example.com")
	if first != second {
		_, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "dan@example.com", Code: first})
		grpctest.WantCode(t, err, codes.Unauthenticated)
	}
	if _, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "dan@example.com", Code: second}); err != nil {
		t.Fatalf("VerifyLoginCode with the newest code: %v", err)
	}
}

// TestLoginCodeExpires: a code is refused once its time is up.
func TestLoginCodeExpires(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *authsvc.Config) { c.CodeTTL = 2 * time.Second })
	h.createUser(t, "erin@example.com", gatewayv1.Role_ROLE_MEMBER)
	sent := time.Now()
	code := h.requestCode(t, "erin@example.com")
	time.Sleep(time.Until(sent.Add(h.cfg.CodeTTL + 200*time.Millisecond)))
	_, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "erin@example.com", Code: code})
	grpctest.WantCode(t, err, codes.Unauthenticated, "invalid or expired code")
	if got, want := h.audit(t, "erin@example.com"), []string{store.OutcomeCodeSent, store.OutcomeBadCode}; !slices.Equal(got, want) {
		t.Errorf("audit = %v, want %v", got, want)
	}
	// A fresh code still works: the expiry was the only reason.
	if _, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "erin@example.com",
		Code: h.requestCode(t, "erin@example.com")}); err != nil {
		t.Fatalf("VerifyLoginCode with a fresh code: %v", err)
	}
}

// TestLockout: MaxFailures wrong codes lock the address out, known or not, alike.
func TestLockout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *authsvc.Config) { c.MaxFailures = 3 })
	h.createUser(t, "frank@example.com", gatewayv1.Role_ROLE_MEMBER)
	code := h.requestCode(t, "frank@example.com")

	lockOut := func(email, right string) error {
		t.Helper()
		for range h.cfg.MaxFailures {
			_, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: email, Code: wrongCode(right)})
			grpctest.WantCode(t, err, codes.Unauthenticated, "invalid or expired code")
		}
		// Now even the right code is refused.
		_, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: email, Code: right})
		return err
	}
	known := lockOut("frank@example.com", code)
	unknown := lockOut("nobody@example.com", code)
	if d := retryDelay(t, known); d <= 0 || d > h.cfg.LockoutBase {
		t.Errorf("retry delay %v, want up to %v", d, h.cfg.LockoutBase)
	}
	if d := retryDelay(t, unknown); d <= 0 || d > h.cfg.LockoutBase {
		t.Errorf("unknown address: retry delay %v, want up to %v", d, h.cfg.LockoutBase)
	}
	// The two answers say the same: a lockout reveals nothing about the address.
	if k, u := statusOf(known), statusOf(unknown); k.Message() != u.Message() || len(k.Details()) != len(u.Details()) {
		t.Errorf("known address: %v; unknown: %v", k, u)
	}
	// Asking for a code is refused too while locked out, and sends nothing.
	for _, email := range []string{"frank@example.com", "nobody@example.com"} {
		_, err := h.auth.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{Email: email})
		retryDelay(t, err)
	}
	if got := h.mailTo(t, "frank@example.com"); len(got) != 1 {
		t.Errorf("mail to frank while locked out: %v", got)
	}
	// The lockout is by address: another user logs in meanwhile.
	h.createUser(t, "grace@example.com", gatewayv1.Role_ROLE_MEMBER)
	h.login(t, "grace@example.com")

	bad := []string{store.OutcomeBadCode, store.OutcomeBadCode, store.OutcomeBadCode, store.OutcomeLockedOut}
	if got, want := h.audit(t, "frank@example.com"), append([]string{store.OutcomeCodeSent}, bad...); !slices.Equal(got, want) {
		t.Errorf("audit of the known address = %v, want %v", got, want)
	}
	if got := h.audit(t, "nobody@example.com"); !slices.Equal(got, bad) {
		t.Errorf("audit of the unknown address = %v, want %v", got, bad)
	}
	rows, err := h.store.LoginAttempts(t.Context(), "frank@example.com", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.UserID == "" || r.Peer == "" || r.Time.IsZero() {
			t.Errorf("audit row %+v: want the user and the peer", r)
		}
	}
}

// TestLockoutEnds: a lockout lasts LockoutBase, then the right code works (it was not
// spent while locked out); lockouts in a row double.
func TestLockoutEnds(t *testing.T) {
	t.Parallel()
	const base = 2 * time.Second
	h := newHarness(t, func(c *authsvc.Config) { c.MaxFailures, c.LockoutBase, c.LockoutMax = 2, base, time.Minute })
	h.createUser(t, "heidi@example.com", gatewayv1.Role_ROLE_MEMBER)
	code := h.requestCode(t, "heidi@example.com")

	fail := func(email string) time.Duration {
		t.Helper()
		for range h.cfg.MaxFailures {
			_, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: email, Code: wrongCode(code)})
			grpctest.WantCode(t, err, codes.Unauthenticated)
		}
		_, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: email, Code: code})
		return retryDelay(t, err)
	}
	t.Run("known", func(t *testing.T) {
		t.Parallel()
		d := fail("heidi@example.com")
		if d <= 0 || d > base {
			t.Fatalf("retry delay %v, want up to %v", d, base)
		}
		time.Sleep(d + 200*time.Millisecond)
		if _, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "heidi@example.com", Code: code}); err != nil {
			t.Fatalf("VerifyLoginCode after the lockout: %v", err)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		t.Parallel()
		d := fail("nobody@example.com")
		if d <= 0 || d > base {
			t.Fatalf("retry delay %v, want up to %v", d, base)
		}
		time.Sleep(d + 200*time.Millisecond)
		if d2 := fail("nobody@example.com"); d2 <= base || d2 > 2*base {
			t.Errorf("second lockout: retry delay %v, want more than %v, up to %v", d2, base, 2*base)
		}
	})
}

// gatedMailer holds every message until released.
type gatedMailer struct {
	release chan struct{}
	sent    chan mailer.Message
}

func (m *gatedMailer) Send(ctx context.Context, msg mailer.Message) error {
	select {
	case <-m.release:
		m.sent <- msg
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestFlushMailWaitsForCodesInFlight: the answer does not wait for the mail, but FlushMail
// (the gateway's shutdown) does, and says how many codes are still out when it gives up.
func TestFlushMailWaitsForCodesInFlight(t *testing.T) {
	t.Parallel()
	gm := &gatedMailer{release: make(chan struct{}), sent: make(chan mailer.Message, 1)}
	h := newHarness(t, nil, harnessOptions{mailer: gm})
	h.createUser(t, "dora@example.com", gatewayv1.Role_ROLE_MEMBER)
	if _, err := h.auth.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{Email: "dora@example.com"}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if n := h.core.FlushMail(short); n != 1 {
		t.Fatalf("FlushMail with the mail held = %d, want 1 still being sent", n)
	}
	close(gm.release)
	if n := h.core.FlushMail(t.Context()); n != 0 {
		t.Fatalf("FlushMail after release = %d, want 0", n)
	}
	select {
	case msg := <-gm.sent:
		if msg.To != "dora@example.com" || msg.Subject != codeSubject {
			t.Errorf("sent %+v", msg)
		}
	default:
		t.Fatal("FlushMail returned before the code was sent")
	}
}
