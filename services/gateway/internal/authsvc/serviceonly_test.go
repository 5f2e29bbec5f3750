package authsvc_test

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/auth"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
)

// TestWatchRevocationsIsForServices: the revocations are served to a service speaking for
// itself and to nobody else — not without a token, not to a person (even an admin), an API
// key, or a service acting for an owner.
func TestWatchRevocationsIsForServices(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, harnessOptions{noFollow: true})
	// One revocation in force, so an accepted stream has something to send at once.
	tok, revoked, err := h.env.Signer.Issue("someone", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.RevokeToken(bearer(t, tok), &gatewayv1.RevokeTokenRequest{}); err != nil {
		t.Fatal(err)
	}
	member, _, memberCtx := h.member(t, "mona@example.com")
	key, err := h.auth.CreateAPIKey(memberCtx, &gatewayv1.CreateAPIKeyRequest{Name: "ci", Scopes: []string{"*:read"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"no token", h.anon, codes.Unauthenticated},
		{"garbage token", bearer(t, "not.a.jwt"), codes.Unauthenticated},
		{"a member's token", memberCtx, codes.PermissionDenied},
		{"the admin's token", h.admin, codes.PermissionDenied},
		{"an API key", bearer(t, key.GetSecret()), codes.PermissionDenied},
		{"the agent acting for a member", h.env.ServiceContext(t, "agent", member.GetId()), codes.PermissionDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := recvFirst(tc.ctx, h.identity, &gatewayv1.WatchRevocationsRequest{})
			grpctest.WantCode(t, err, tc.want)
		})
	}
	w := h.watchAs(t, h.asService(t, context.Background(), "memory"), &gatewayv1.WatchRevocationsRequest{})
	if m := w.next(t); m.GetRevocation().GetSubject() != revoked.TokenID {
		t.Fatalf("memory as itself got %v, want the revocation of %s", m, revoked.TokenID)
	}
}

// TestRevocationSlotsPerService: one service holding all of its streams takes none of
// another's, and a restarted service still subscribes and learns of a revocation made
// while the streams are held.
func TestRevocationSlotsPerService(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *authsvc.Config) { c.MaxWatches, c.WatchesPerService = 8, 3 }, harnessOptions{noFollow: true})
	first, _, err := h.env.Signer.Issue("someone", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.RevokeToken(bearer(t, first), &gatewayv1.RevokeTokenRequest{}); err != nil {
		t.Fatal(err)
	}
	// Memory holds all its streams (each has delivered, so each holds its slot).
	memory := h.asService(t, context.Background(), "memory")
	for range 3 {
		h.watchAs(t, memory, &gatewayv1.WatchRevocationsRequest{}).next(t)
	}
	err = recvFirst(memory, h.identity, &gatewayv1.WatchRevocationsRequest{FromNow: true})
	grpctest.WantCode(t, err, codes.ResourceExhausted, "too many revocation watches for one caller")

	// The agent, restarted: a verifier that knows nothing yet follows the gateway.
	pub := h.env.SigningKey.Public().(ed25519.PublicKey)
	restarted := auth.NewVerifier(pub)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = auth.FollowRevocations(h.asService(t, ctx, "agent"), h.identity, restarted, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { stop(); <-done })

	tok, _, err := h.env.Signer.Issue("someone", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Verify(tok); err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.RevokeToken(bearer(t, tok), &gatewayv1.RevokeTokenRequest{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the restarted agent refuses the revoked token", func() bool {
		_, err := restarted.Verify(tok)
		return err != nil
	})
}

// TestDisabledUserStopsServiceTokens: disabling a user is a revocation every follower
// applies to the services acting for them too, live and for a follower starting later;
// enabling them lifts it.
func TestDisabledUserStopsServiceTokens(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	xena, _, _ := h.member(t, "xena@example.com")
	agent := h.env.ServiceSigner(t, "agent")
	forXena, _, err := agent.Issue(xena.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.whoAmI(t, forXena); err != nil {
		t.Fatalf("the agent acting for xena: %v", err)
	}
	live := h.watchNew(t)

	setDisabled := func(disabled bool) {
		t.Helper()
		if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: xena.GetId(), User: &gatewayv1.User{Disabled: disabled},
			UpdateMask: mask("disabled")}); err != nil {
			t.Fatal(err)
		}
	}
	setDisabled(true)
	for _, want := range []gatewayv1.RevocationType{gatewayv1.RevocationType_REVOCATION_TYPE_USER, gatewayv1.RevocationType_REVOCATION_TYPE_USER_DISABLED} {
		if m := live.next(t); m.GetType() != want || m.GetRevocation().GetSubject() != xena.GetId() {
			t.Fatalf("live: %v, want %v for xena", m, want)
		}
	}
	h.waitRefused(t, "the agent's token for a disabled owner", forXena)
	fresh, _, _ := agent.Issue(xena.GetId())
	if _, err := h.whoAmI(t, fresh); code(err) != codes.Unauthenticated {
		t.Fatalf("a token minted after the disabling: %v, want Unauthenticated", err)
	}

	// A follower starting now learns that xena is disabled.
	if !inForce(t, h, gatewayv1.RevocationType_REVOCATION_TYPE_USER_DISABLED, xena.GetId()) {
		t.Fatal("a new stream does not say xena is disabled")
	}

	setDisabled(false)
	if m := live.next(t); m.GetType() != gatewayv1.RevocationType_REVOCATION_TYPE_USER_ENABLED || m.GetRevocation().GetSubject() != xena.GetId() {
		t.Fatalf("live: %v, want xena enabled", m)
	}
	eventually(t, 5*time.Second, "the agent acts for xena again", func() bool {
		_, err := h.whoAmI(t, fresh)
		return err == nil
	})
	if inForce(t, h, gatewayv1.RevocationType_REVOCATION_TYPE_USER_DISABLED, xena.GetId()) {
		t.Fatal("a new stream still says xena is disabled")
	}
}

// inForce reports whether a stream from 0 delivers a revocation of typ for subject among
// those in force (it reads until the first heartbeat-free pause).
func inForce(t *testing.T, h *harness, typ gatewayv1.RevocationType, subject string) bool {
	t.Helper()
	w := h.watch(t, &gatewayv1.WatchRevocationsRequest{})
	for {
		m, ok := w.within(500 * time.Millisecond)
		if !ok {
			return false
		}
		if m.GetType() == typ && m.GetRevocation().GetSubject() == subject {
			return true
		}
	}
}
