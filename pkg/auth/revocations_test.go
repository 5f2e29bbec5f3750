package auth

import (
	"crypto/ed25519"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func wantRevoked(t *testing.T, v *Verifier, tok, why string) {
	t.Helper()
	_, err := v.Verify(tok)
	if !errors.Is(err, ErrInvalidToken) || !errors.Is(err, ErrRevoked) || !strings.Contains(err.Error(), why) {
		t.Fatalf("err = %v, want ErrInvalidToken and ErrRevoked mentioning %q", err, why)
	}
}

func wantValid(t *testing.T, v *Verifier, tok string) Principal {
	t.Helper()
	p, err := v.Verify(tok)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	return p
}

func TestIssueExtraClaims(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	now := time.Now().Add(-10 * time.Second) // a fraction of a second is dropped from iat
	s := NewSigner(priv, WithClock(func() time.Time { return now }))
	tok, issued, err := s.IssueExtra("u1", []string{RoleUser}, time.Hour, Extra{SessionID: "s1", APIKeyID: "k1", Scopes: []string{"tasks:read", "*:write"}})
	if err != nil {
		t.Fatal(err)
	}
	p := wantValid(t, NewVerifier(pub), tok)
	if p.SessionID != "s1" || p.APIKeyID != "k1" || !slices.Equal(p.Scopes, []string{"tasks:read", "*:write"}) ||
		!p.IssuedAt.Equal(now.Truncate(time.Second)) || !p.ExpiresAt.Equal(now.Truncate(time.Second).Add(time.Hour)) {
		t.Fatalf("principal = %+v", p)
	}
	if issued.SessionID != p.SessionID || issued.APIKeyID != p.APIKeyID || !slices.Equal(issued.Scopes, p.Scopes) || !issued.IssuedAt.Equal(p.IssuedAt) {
		t.Fatalf("issued %+v, verified %+v", issued, p)
	}
	if p, _ := NewVerifier(pub).Verify(mustIssue(t, s, "u1")); p.SessionID != "" || p.APIKeyID != "" || p.Scopes != nil {
		t.Fatalf("plain token carries extras: %+v", p)
	}
	for _, bad := range [][]string{{"tasks"}, {"tasks:admin"}, {"nowhere:read"}, {"tasks:read", ""}} {
		if _, _, err := s.IssueExtra("u1", nil, time.Hour, Extra{Scopes: bad}); err == nil {
			t.Errorf("scopes %q issued", bad)
		}
	}
	// A signer elsewhere with bad scopes: refused by the verifier.
	crafted := craft(t, jwt.SigningMethodEdDSA, priv, userClaims(time.Now(), func(c *Claims) { c.Scopes = []string{"tasks:everything"} }))
	wantRefused(t, NewVerifier(pub), crafted, "scope")
}

func mustIssue(t *testing.T, s *Signer, user string) string {
	t.Helper()
	tok, _, err := s.Issue(user, []string{RoleUser}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestRevokeEachType(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	start := time.Now().Truncate(time.Second)
	clock := newTestClock(start)
	s := NewSigner(priv, clock.Option())
	issue := func(user string, x Extra) (string, Principal) {
		t.Helper()
		tok, p, err := s.IssueExtra(user, []string{RoleUser}, time.Hour, x)
		if err != nil {
			t.Fatal(err)
		}
		return tok, p
	}
	expire := start.Add(2 * time.Hour)

	t.Run("token", func(t *testing.T) {
		v := NewVerifier(pub, clock.Option())
		tok, p := issue("u1", Extra{})
		other, _ := issue("u1", Extra{})
		wantValid(t, v, tok) // now cached: the revocation must be seen on a cache hit
		v.Revoke(Revocation{Type: RevokeToken, Subject: p.TokenID, Expire: expire})
		wantRevoked(t, v, tok, "token revoked")
		wantValid(t, v, other)
	})
	t.Run("session", func(t *testing.T) {
		v := NewVerifier(pub, clock.Option())
		a, _ := issue("u1", Extra{SessionID: "s1"})
		b, _ := issue("u1", Extra{SessionID: "s1"})
		other, _ := issue("u1", Extra{SessionID: "s2"})
		none, _ := issue("u1", Extra{})
		wantValid(t, v, a)
		v.Revoke(Revocation{Type: RevokeSession, Subject: "s1", Expire: expire})
		wantRevoked(t, v, a, "session ended")
		wantRevoked(t, v, b, "session ended") // never verified before: the uncached path
		wantValid(t, v, other)
		wantValid(t, v, none)
	})
	t.Run("API key", func(t *testing.T) {
		v := NewVerifier(pub, clock.Option())
		a, _ := issue("u1", Extra{APIKeyID: "k1", Scopes: []string{"tasks:read"}})
		other, _ := issue("u1", Extra{APIKeyID: "k2"})
		plain, _ := issue("u1", Extra{})
		wantValid(t, v, a)
		v.Revoke(Revocation{Type: RevokeAPIKey, Subject: "k1", Expire: expire})
		wantRevoked(t, v, a, "API key revoked")
		wantValid(t, v, other)
		wantValid(t, v, plain)
	})
	t.Run("types do not mix", func(t *testing.T) {
		v := NewVerifier(pub, clock.Option())
		tok, p := issue("u1", Extra{SessionID: "x", APIKeyID: "x"})
		// Each subject revoked under a type that does not name it.
		v.Revoke(Revocation{Type: RevokeSession, Subject: p.TokenID, Expire: expire})
		v.Revoke(Revocation{Type: RevokeToken, Subject: "x", Expire: expire})
		v.Revoke(Revocation{Type: RevokeAPIKey, Subject: "u1", Expire: expire})
		v.Revoke(Revocation{Type: RevokeUser, Subject: "x", NotBefore: expire, Expire: expire})
		wantValid(t, v, tok)
		if n := v.Revocations(); n != 4 {
			t.Fatalf("Revocations() = %d, want 4", n)
		}
	})
}

// A user revocation refuses the user's tokens issued before NotBefore. iat is in whole
// seconds, so a token issued in the second of a revocation has an iat before it: the
// gateway's NotBefore is the next whole second, and it waits for it before issuing.
func TestRevokeUserNotBefore(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	agentPub, agentPriv := newKeys(t)
	base := time.Now().Truncate(time.Second)
	clock := newTestClock(base.Add(400 * time.Millisecond))
	v := NewVerifier(pub, clock.Option(), WithServiceKeys(map[string]ed25519.PublicKey{"agent": agentPub}))
	s := NewSigner(priv, clock.Option())
	agent, _ := NewServiceSigner("agent", agentPriv, clock.Option())

	before := mustIssue(t, s, "u1") // iat = base, issued at base+0.4s
	otherUser := mustIssue(t, s, "u2")
	service, _, err := agent.Issue("u1")
	if err != nil {
		t.Fatal(err)
	}
	wantValid(t, v, before)
	wantValid(t, v, service)

	clock.Set(base.Add(700 * time.Millisecond))
	sameSecond := mustIssue(t, s, "u1") // iat = base too, though issued after the revocation below
	v.Revoke(Revocation{Type: RevokeUser, Subject: "u1", NotBefore: base.Add(time.Second), Expire: base.Add(time.Hour)})
	wantRevoked(t, v, before, "issued before")
	wantRevoked(t, v, sameSecond, "issued before")
	wantValid(t, v, otherUser)
	// A service acting for the user is not covered: its token is minted afresh per call.
	if p := wantValid(t, v, service); p.Service != "agent" || p.UserID != "u1" {
		t.Fatalf("service principal = %+v", p)
	}

	clock.Set(base.Add(time.Second))
	after := mustIssue(t, s, "u1") // iat = NotBefore exactly: not before it
	if p := wantValid(t, v, after); !p.IssuedAt.Equal(base.Add(time.Second)) {
		t.Fatalf("iat = %v", p.IssuedAt)
	}
	wantRevoked(t, v, before, "issued before")

	// A second revocation of the user reaching less far does not shorten the first.
	v.Revoke(Revocation{Type: RevokeUser, Subject: "u1", NotBefore: base, Expire: base.Add(time.Minute)})
	wantRevoked(t, v, sameSecond, "issued before")
	if n := v.Revocations(); n != 1 {
		t.Fatalf("Revocations() = %d, want 1", n)
	}
	// One reaching further moves NotBefore on.
	clock.Set(base.Add(2 * time.Second))
	v.Revoke(Revocation{Type: RevokeUser, Subject: "u1", NotBefore: base.Add(2 * time.Second), Expire: base.Add(time.Hour)})
	wantRevoked(t, v, after, "issued before")
	wantValid(t, v, service)
	// A service token is still refused by its own id.
	sp := wantValid(t, v, service)
	v.Revoke(Revocation{Type: RevokeToken, Subject: sp.TokenID, Expire: base.Add(time.Hour)})
	wantRevoked(t, v, service, "token revoked")
}

func TestRevocationsExpire(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	start := time.Now().Truncate(time.Second)
	clock := newTestClock(start)
	v := NewVerifier(pub, clock.Option())
	tok, p, _ := NewSigner(priv, clock.Option()).IssueExtra("u1", nil, time.Hour, Extra{SessionID: "s1"})

	// Covering nothing any more (or nothing at all): not even recorded.
	v.Revoke(Revocation{Type: RevokeToken, Subject: p.TokenID, Expire: start.Add(-time.Second)})
	v.Revoke(Revocation{Type: RevokeToken, Subject: p.TokenID, Expire: start})
	v.Revoke(Revocation{Type: RevokeToken, Subject: p.TokenID})
	v.Revoke(Revocation{Type: RevokeSession, Subject: "", Expire: start.Add(time.Hour)})
	if n := v.Revocations(); n != 0 {
		t.Fatalf("Revocations() = %d, want 0", n)
	}
	wantValid(t, v, tok)

	// A revocation is forgotten once it has expired (pruned when revocations arrive).
	v.Revoke(Revocation{Type: RevokeSession, Subject: "s1", Expire: start.Add(10 * time.Second)})
	v.Revoke(Revocation{Type: RevokeToken, Subject: "other", Expire: start.Add(time.Hour)})
	wantRevoked(t, v, tok, "session ended")
	if n := v.Revocations(); n != 2 {
		t.Fatalf("Revocations() = %d, want 2", n)
	}
	clock.Add(revocationPruneEvery + 11*time.Second)
	v.Revoke(Revocation{Type: RevokeToken, Subject: "another", Expire: start.Add(time.Hour)})
	if n := v.Revocations(); n != 2 {
		t.Fatalf("Revocations() after the session's expired = %d, want 2 (pruned)", n)
	}
	wantValid(t, v, tok)
}

// UserDisabled tells of a disabled user until they are enabled again or the revocation
// expires; nobody else is disabled.
func TestUserDisabled(t *testing.T) {
	t.Parallel()
	pub, _ := newKeys(t)
	start := time.Now().Truncate(time.Second)
	clock := newTestClock(start)
	v := NewVerifier(pub, clock.Option())
	if v.UserDisabled("u1") {
		t.Fatal("u1 disabled before any revocation")
	}
	v.Revoke(Revocation{Type: RevokeUserDisabled, Subject: "u1", NotBefore: start, Expire: start.Add(time.Hour)})
	if !v.UserDisabled("u1") || v.UserDisabled("u2") {
		t.Fatalf("after disabling u1: u1 %v, u2 %v", v.UserDisabled("u1"), v.UserDisabled("u2"))
	}
	v.Revoke(Revocation{Type: RevokeUserEnabled, Subject: "u1"})
	if v.UserDisabled("u1") {
		t.Fatal("u1 still disabled once enabled")
	}
	v.Revoke(Revocation{Type: RevokeUserDisabled, Subject: "u1", NotBefore: start, Expire: start.Add(time.Minute)})
	clock.Add(2 * time.Minute)
	if v.UserDisabled("u1") {
		t.Fatal("u1 disabled after the revocation expired")
	}
}
