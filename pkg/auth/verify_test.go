package auth

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// craft signs claims as an attacker or a careless signer would, bypassing Signer's rules.
func craft(t *testing.T, method jwt.SigningMethod, key any, c jwt.Claims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func userClaims(now time.Time, edit func(c *Claims)) Claims {
	c := Claims{RegisteredClaims: jwt.RegisteredClaims{
		Issuer:    Issuer,
		Audience:  jwt.ClaimStrings{Audience},
		Subject:   "u1",
		ID:        "t1",
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
	}, Roles: []string{RoleAdmin}}
	if edit != nil {
		edit(&c)
	}
	return c
}

func TestVerifyRejectsUserTokens(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	_, otherPriv := newKeys(t)
	pubDER, _ := x509.MarshalPKIXPublicKey(pub)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	now := time.Now()
	v := NewVerifier(pub, WithMaxLifetime(24*time.Hour))
	ed := jwt.SigningMethodEdDSA

	cases := []struct {
		name  string
		token string
		want  string // in the error, so a case cannot pass for the wrong reason
	}{
		{"alg none", craft(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, userClaims(now, nil)), "signing method none is invalid"},
		{"HS256 with the public key bytes", craft(t, jwt.SigningMethodHS256, []byte(pub), userClaims(now, nil)), "signing method HS256 is invalid"},
		{"HS256 with the public key PEM", craft(t, jwt.SigningMethodHS256, pubPEM, userClaims(now, nil)), "signing method HS256 is invalid"},
		{"other key", craft(t, ed, otherPriv, userClaims(now, nil)), "signature is invalid"},
		{"wrong issuer", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.Issuer = "someone-else" })), "invalid issuer"},
		{"no issuer", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.Issuer = "" })), "iss claim is required"},
		{"wrong audience", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.Audience = jwt.ClaimStrings{"other"} })), "invalid audience"},
		{"no audience", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.Audience = nil })), "aud claim is required"},
		{"missing sub", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.Subject = "" })), "no subject"},
		{"missing exp", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.ExpiresAt = nil })), "exp claim is required"},
		{"expired", craft(t, ed, priv, userClaims(now.Add(-2*time.Hour), nil)), "token is expired"},
		{"future nbf", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(10 * time.Minute)) })), "token is not valid yet"},
		{"future iat", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.IssuedAt = jwt.NewNumericDate(now.Add(10 * time.Minute)) })), "used before issued"},
		{"missing iat", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.IssuedAt = nil })), "no iat"},
		{"lifetime over the maximum", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.ExpiresAt = jwt.NewNumericDate(now.Add(25 * time.Hour)) })), "exceeds the maximum"},
		{"on_behalf_of in a user token", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.OnBehalfOf = "u2" })), "on_behalf_of"},
		{"service subject in a user token", craft(t, ed, priv, userClaims(now, func(c *Claims) { c.Subject = "service:agent" })), "service subject"},
		{"not a JWT", "abc.def.ghi", ""},
		{"empty", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := v.Verify(tc.token)
			if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidToken mentioning %q", err, tc.want)
			}
		})
	}

	// The crafting itself is sound: the unedited claims verify.
	if p, err := v.Verify(craft(t, ed, priv, userClaims(now, nil))); err != nil || p.UserID != "u1" || p.Service != "" {
		t.Fatalf("valid crafted token: %+v, %v", p, err)
	}
}

func TestIssueRefusesTokensThatWouldNotVerify(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	s := NewSigner(priv, WithMaxLifetime(24*time.Hour))
	cases := []struct {
		name string
		user string
		ttl  time.Duration
		want string
	}{
		{"no user", "", time.Hour, "user id required"},
		{"service prefix", "service:agent", time.Hour, "reserved for services"},
		{"no expiry", "u1", 0, "lifetime required"},
		{"negative", "u1", -time.Hour, "lifetime required"},
		{"over the maximum", "u1", 25 * time.Hour, "exceeds the maximum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := s.Issue(tc.user, nil, tc.ttl); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}

	// At the maximum: issued with exp and iat, and accepted.
	tok, issued, err := s.Issue("u1", []string{RoleUser}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var c Claims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil || c.ExpiresAt == nil || c.IssuedAt == nil || c.ExpiresAt.Sub(c.IssuedAt.Time) != 24*time.Hour {
		t.Fatalf("claims = %+v, %v", c, err)
	}
	p, err := NewVerifier(pub, WithMaxLifetime(24*time.Hour)).Verify(tok)
	if err != nil || !p.ExpiresAt.Equal(issued.ExpiresAt) {
		t.Fatalf("verify = %+v, %v", p, err)
	}
	// A verifier with a shorter maximum refuses what a laxer signer issued.
	if _, err := NewVerifier(pub, WithMaxLifetime(time.Hour)).Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("over a verifier's maximum: %v", err)
	}
}

func TestDefaultMaxLifetime(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	if _, _, err := NewSigner(priv).Issue("u1", nil, DefaultMaxLifetime+time.Second); err == nil {
		t.Fatal("default signer issued past the default maximum")
	}
	tok := craft(t, jwt.SigningMethodEdDSA, priv, userClaims(time.Now(), func(c *Claims) {
		c.ExpiresAt = jwt.NewNumericDate(c.IssuedAt.Add(DefaultMaxLifetime + time.Second))
	}))
	if _, err := NewVerifier(ed25519.PublicKey(pub)).Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("default verifier accepted a token past the default maximum: %v", err)
	}
}
