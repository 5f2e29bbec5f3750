package authsvc_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/events"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// revocation is what a test expects of one.
type revocation struct {
	typ     gatewayv1.RevocationType
	subject string
}

// TestWatchRevocations: from 0 the stream delivers the revocations in force, then new
// ones; after_id resumes; from_now skips the past.
func TestWatchRevocations(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, harnessOptions{noFollow: true})

	// One revocation that is no longer in force: its token expired.
	short, _, err := h.env.Signer.Issue("shortlived", nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.RevokeToken(bearer(t, short), &gatewayv1.RevokeTokenRequest{}); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}

	// One of each type, in force.
	var want []revocation
	tok, p, err := h.env.Signer.Issue("someone", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.RevokeToken(bearer(t, tok), &gatewayv1.RevokeTokenRequest{}); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	want = append(want, revocation{gatewayv1.RevocationType_REVOCATION_TYPE_TOKEN, p.TokenID})

	xena, login, xenaCtx := h.member(t, "xena@example.com")
	if _, err := h.auth.RevokeToken(xenaCtx, &gatewayv1.RevokeTokenRequest{Token: login.GetTokens().GetRefreshToken()}); err != nil {
		t.Fatalf("RevokeToken(refresh): %v", err)
	}
	want = append(want, revocation{gatewayv1.RevocationType_REVOCATION_TYPE_SESSION, h.principal(t, login.GetTokens().GetAccessToken()).SessionID})

	k, err := h.auth.CreateAPIKey(h.env.Context(t, xena.GetId()), &gatewayv1.CreateAPIKeyRequest{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.RevokeAPIKey(h.env.Context(t, xena.GetId()), &gatewayv1.RevokeAPIKeyRequest{Id: k.GetApiKey().GetId()}); err != nil {
		t.Fatal(err)
	}
	want = append(want, revocation{gatewayv1.RevocationType_REVOCATION_TYPE_API_KEY, k.GetApiKey().GetId()})

	if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: xena.GetId(), User: &gatewayv1.User{Disabled: true},
		UpdateMask: mask("disabled")}); err != nil {
		t.Fatal(err)
	}
	want = append(want, revocation{gatewayv1.RevocationType_REVOCATION_TYPE_USER, xena.GetId()},
		revocation{gatewayv1.RevocationType_REVOCATION_TYPE_USER_DISABLED, xena.GetId()})

	// By now the short-lived token has expired, and its revocation with it.
	time.Sleep(time.Until(h.principal(t, tok).IssuedAt.Add(2 * time.Second)))

	check := func(t *testing.T, w *watcher, want []revocation, after int64) []int64 {
		t.Helper()
		var ids []int64
		for i, r := range want {
			m := w.next(t)
			if m.GetType() != r.typ || m.GetRevocation().GetSubject() != r.subject {
				t.Fatalf("revocation %d: %v, want %v %s", i, m, r.typ, r.subject)
			}
			if m.GetId() <= after || m.GetTime() == nil || m.GetRevocation().GetExpireTime() == nil ||
				!m.GetRevocation().GetExpireTime().AsTime().After(time.Now()) {
				t.Errorf("revocation %d: %v, want an id after %d, a time and a future expire_time", i, m, after)
			}
			userCut := r.typ == gatewayv1.RevocationType_REVOCATION_TYPE_USER || r.typ == gatewayv1.RevocationType_REVOCATION_TYPE_USER_DISABLED
			if userCut != (m.GetRevocation().GetNotBefore() != nil) {
				t.Errorf("revocation %d: not_before %v; want one for a user revocation only", i, m.GetRevocation().GetNotBefore())
			}
			after = m.GetId()
			ids = append(ids, after)
		}
		return ids
	}

	all := h.watch(t, &gatewayv1.WatchRevocationsRequest{})
	ids := check(t, all, want, 0)
	if m, ok := all.within(200 * time.Millisecond); ok {
		t.Fatalf("a revocation not in force or not made: %v", m)
	}
	resumed := h.watch(t, &gatewayv1.WatchRevocationsRequest{AfterId: ids[1]})
	check(t, resumed, want[2:], ids[1])
	fromNow := h.watch(t, &gatewayv1.WatchRevocationsRequest{FromNow: true, AfterId: ids[0]})

	// A new revocation reaches every stream, live.
	tok2, p2, err := h.env.Signer.Issue("someone", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// from_now cannot be told when it started: revoke until it delivers, then check it
	// delivered only revocations made after it opened.
	made := map[string]bool{}
	var live *gatewayv1.WatchRevocationsResponse
	for i := 0; live == nil; i++ {
		if i == 50 {
			t.Fatal("from_now delivered nothing")
		}
		if i > 0 {
			tok2, p2, _ = h.env.Signer.Issue("someone", nil, time.Hour)
		}
		if _, err := h.auth.RevokeToken(bearer(t, tok2), &gatewayv1.RevokeTokenRequest{}); err != nil {
			t.Fatal(err)
		}
		made[p2.TokenID] = true
		live, _ = fromNow.within(100 * time.Millisecond)
	}
	if !made[live.GetRevocation().GetSubject()] || live.GetId() <= ids[len(ids)-1] {
		t.Errorf("from_now delivered %v, not one made after it opened", live)
	}
	first := ""
	for _, w := range []*watcher{all, resumed} {
		m := w.next(t)
		if m.GetType() != gatewayv1.RevocationType_REVOCATION_TYPE_TOKEN || !made[m.GetRevocation().GetSubject()] || m.GetId() <= ids[len(ids)-1] {
			t.Errorf("live revocation %v, want one of the new tokens", m)
		}
		if first == "" {
			first = m.GetRevocation().GetSubject()
		} else if m.GetRevocation().GetSubject() != first {
			t.Errorf("streams disagree on the first live revocation: %s, %s", first, m.GetRevocation().GetSubject())
		}
	}

	// A cursor older than the retained history is OUT_OF_RANGE; from 0 still works.
	time.Sleep(10 * time.Millisecond)
	if _, err := events.Prune(t.Context(), h.pool, time.Microsecond); err != nil {
		t.Fatal(err)
	}
	err = recvFirst(h.asService(t, h.anon, "gateway"), h.identity, &gatewayv1.WatchRevocationsRequest{AfterId: ids[0]})
	grpctest.WantCode(t, err, codes.OutOfRange)
	again := h.watch(t, &gatewayv1.WatchRevocationsRequest{})
	ids = check(t, again, want[:len(want)-1], 0)
	// The users disabled now come after every revocation in force (here the live ones
	// too), with the stream's starting cursor as their id.
	for {
		m := again.next(t)
		if m.GetType() == gatewayv1.RevocationType_REVOCATION_TYPE_USER_DISABLED {
			if m.GetRevocation().GetSubject() != xena.GetId() || m.GetId() <= ids[len(ids)-1] {
				t.Fatalf("disabled user %v, want xena after id %d", m, ids[len(ids)-1])
			}
			break
		}
	}
}

// TestFollowRevocations: a verifier following the gateway applies what was revoked
// before it started, and keeps up after.
func TestFollowRevocations(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, harnessOptions{noFollow: true})
	before, _, err := h.env.Signer.Issue("yann", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.RevokeToken(bearer(t, before), &gatewayv1.RevokeTokenRequest{}); err != nil {
		t.Fatal(err)
	}
	// Not followed, a revoked token still works: the server learns of revocations only by
	// following them.
	if _, err := h.whoAmI(t, before); err != nil {
		t.Fatalf("WhoAmI before following: %v", err)
	}
	h.follow(t)
	h.waitRefused(t, "the token revoked before following", before)
	after, _, err := h.env.Signer.Issue("yann", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.whoAmI(t, after); err != nil {
		t.Fatalf("WhoAmI with another token: %v", err)
	}
	if _, err := h.auth.RevokeToken(bearer(t, after), &gatewayv1.RevokeTokenRequest{}); err != nil {
		t.Fatal(err)
	}
	h.waitRefused(t, "the token revoked while following", after)
	if n := h.env.Auth.Verifier().Revocations(); n != 2 {
		t.Errorf("verifier holds %d revocations, want 2", n)
	}
}
